package datapath

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// Defaults of HealthConfig.
const (
	DefaultStallAfter = 60 * time.Second
	DefaultLagAfter   = 30 * time.Second
)

// HealthConfig tunes a Health.
type HealthConfig struct {
	SourceAlias, TargetAlias string
	// Source lists the source partitions' offsets (an admin client).
	Source *kgo.Client
	// StallAfter: a partition behind the source whose progress has not
	// moved for this long is stalled. LagAfter: one whose oldest record
	// not yet copied is at least this old is lagging.
	StallAfter, LagAfter time.Duration
	// Interval is how often the source is asked; zero means a quarter
	// of StallAfter, at most 5 s.
	Interval time.Duration
	Metrics  *metrics.Metrics
	// Held, if set, lists the flow's partitions that are not in the
	// engine yet (waiting, fencing): watched and reported like the
	// others, in the state they have.
	Held func() []PartitionStatus
}

// Health watches the partitions of one engine: how far each is behind the
// source's last stable offset, in records and in seconds, and whether its
// progress moves. It names each partition's state (running, lagging,
// stalled, besides the engine's own paused, restarting and stopped) for
// status, metrics and readiness, and is the watchdog: a stalled partition
// with nothing in flight is restarted from its progress, which gets a
// partition going again that its engine stopped fetching (a lost fetch
// position, a consumer that holds data it never hands out).
type Health struct {
	cfg HealthConfig
	eng Engine
	log *slog.Logger

	mu     sync.Mutex
	parts  map[progress.TP]*watch
	checks int64                    // Checks begun
	ends   *kmsg.ListOffsetsRequest // of parts' last stable offsets; nil when they changed
}

// watch is what Health knows of one partition.
type watch struct {
	done    int64     // progress seen at the last check
	movedAt time.Time // when done last changed (or the partition was first seen)
	start   int64     // source log start at the last check
	end     int64     // source last stable offset at the last check; -1 unknown
	// samples are (time, end) pairs, oldest first: the oldest record not
	// yet copied was written before the first sample whose end is past it.
	samples []sample
	state   string
	lag     int64
	lagSec  float64
	seen    int64 // the Check that last listed it

	checked bool                  // state and lag are known
	series  *metrics.HealthSeries // labels of its metrics; nil without
}

type sample struct {
	at  time.Time
	end int64
}

// maxSamples bounds the end offsets kept per partition.
const maxSamples = 64

// NewHealth watches eng's partitions.
func NewHealth(cfg HealthConfig, eng Engine, log *slog.Logger) *Health {
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = DefaultStallAfter
	}
	if cfg.LagAfter <= 0 {
		cfg.LagAfter = DefaultLagAfter
	}
	if cfg.Interval <= 0 {
		cfg.Interval = min(cfg.StallAfter/4, 5*time.Second)
	}
	h := &Health{cfg: cfg, eng: eng, log: log, parts: make(map[progress.TP]*watch)}
	if cfg.Metrics != nil {
		cfg.Metrics.Partitions.Add(h)
	}
	return h
}

// Run checks every Interval until ctx ends.
func (h *Health) Run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		h.Check(ctx, time.Now())
		select {
		case <-ctx.Done():
			h.forget()
			return
		case <-t.C:
		}
	}
}

// Check lists the source offsets of the assigned partitions, updates their
// state and restarts the stalled ones that have nothing in flight. Each
// check lists the last stable offset of every partition, in one request
// per leader kept while the partitions stay the same, and the log start
// only of those behind (of one caught up, the lag is 0 whatever the log
// start). Metrics read the last check's values when scraped.
func (h *Health) Check(ctx context.Context, now time.Time) {
	st := h.eng.Status()
	if h.cfg.Held != nil {
		st = append(st, h.cfg.Held()...)
	}
	if ends := h.track(st, now); ends != nil {
		lctx, cancel := context.WithTimeout(ctx, h.cfg.Interval)
		defer cancel()
		behind := h.behind(st, h.cfg.Source.RequestSharded(lctx, ends), now)
		if len(behind) > 0 {
			starts := h.cfg.Source.RequestSharded(lctx, offsetsRequest(behind, -2, h.cfg.Interval))
			h.mu.Lock()
			h.listed(starts, func(w *watch, start int64) { w.start = start })
			h.mu.Unlock()
		}
	}
	var restart []PartitionStatus
	h.mu.Lock()
	for _, s := range st {
		w := h.parts[progress.TP{Topic: s.Topic, Partition: s.Partition}]
		if w == nil {
			continue
		}
		w.lag, w.lagSec = w.lagOf(now)
		w.state = h.stateOf(s, w, now)
		if w.state == Stalled && s.InFlight == 0 {
			restart = append(restart, s)
			w.movedAt = now // give the restart a whole StallAfter
		}
		w.checked = true
	}
	h.mu.Unlock()
	for _, s := range restart {
		tp := progress.TP{Topic: s.Topic, Partition: s.Partition}
		if !h.eng.Restart(ctx, tp) {
			continue
		}
		h.log.Warn("partition stalled: behind the source with no progress and nothing in flight; restarted from its progress",
			"topic", s.Topic, "partition", s.Partition, "done", s.Done, "stalled_for", h.cfg.StallAfter.String())
		if m := h.cfg.Metrics; m != nil {
			m.PartitionRestarts.WithLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, s.Remote, strconv.Itoa(int(s.Partition)), "stalled").Inc()
		}
	}
}

// track watches the partitions of st, forgets those no longer in it and
// notes progress that moved; it returns the request for their last
// stable offsets (nil: no partitions).
func (h *Health) track(st []PartitionStatus, now time.Time) *kmsg.ListOffsetsRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks++
	for _, s := range st {
		tp := progress.TP{Topic: s.Topic, Partition: s.Partition}
		w := h.parts[tp]
		if w == nil {
			w = h.watch(s, now)
			h.parts[tp] = w
			h.ends = nil
		}
		w.seen = h.checks
		if s.Done != w.done {
			w.done, w.movedAt = s.Done, now
		}
	}
	if len(h.parts) != len(st) {
		h.forgetLocked(h.checks)
	}
	if h.ends == nil && len(h.parts) > 0 {
		tps := make([]progress.TP, 0, len(h.parts))
		for tp := range h.parts {
			tps = append(tps, tp)
		}
		h.ends = offsetsRequest(tps, -1, h.cfg.Interval)
	}
	return h.ends
}

// offsetsRequest asks for the offsets of tps at timestamp: -1 the last
// stable offset, -2 the log start.
func offsetsRequest(tps []progress.TP, timestamp int64, timeout time.Duration) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1 // read_committed: the last stable offset
	req.TimeoutMillis = int32(timeout.Milliseconds())
	topic := make(map[string]int)
	for _, tp := range tps {
		i, ok := topic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			topic[tp.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = tp.Partition, timestamp
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}

// watch starts watching the partition of s, with its metric series.
func (h *Health) watch(s PartitionStatus, now time.Time) *watch {
	w := &watch{done: s.Done, movedAt: now, end: -1}
	if m := h.cfg.Metrics; m != nil {
		w.series = m.Partitions.Series(h.cfg.SourceAlias, h.cfg.TargetAlias, s.Remote, strconv.Itoa(int(s.Partition)), States)
	}
	return w
}

// listed calls set with the watch and offset of every partition that
// shards listed without error; h.mu is held.
func (h *Health) listed(shards []kgo.ResponseShard, set func(*watch, int64)) {
	for _, sh := range shards {
		resp, ok := sh.Resp.(*kmsg.ListOffsetsResponse)
		if sh.Err != nil || !ok {
			continue
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if w := h.parts[progress.TP{Topic: t.Topic, Partition: p.Partition}]; w != nil && p.ErrorCode == 0 {
					set(w, p.Offset)
				}
			}
		}
	}
}

// behind takes the last stable offsets that ends listed and returns the
// partitions in st that have not copied up to theirs.
func (h *Health) behind(st []PartitionStatus, ends []kgo.ResponseShard, now time.Time) []progress.TP {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listed(ends, func(w *watch, end int64) {
		w.end = end
		// A sample only where the end moved: lagOf looks for the first
		// sample past a position.
		if n := len(w.samples); n == 0 || w.samples[n-1].end != end {
			if n == maxSamples {
				w.samples = append(w.samples[:0], w.samples[1:]...)
			}
			w.samples = append(w.samples, sample{now, end})
		}
	})
	var tps []progress.TP
	for _, s := range st {
		tp := progress.TP{Topic: s.Topic, Partition: s.Partition}
		if w := h.parts[tp]; w != nil && w.done+1 < w.end {
			tps = append(tps, tp)
		}
	}
	return tps
}

// lagOf returns how many records of the source are not yet copied and at
// least how long the oldest of them has waited.
func (w *watch) lagOf(now time.Time) (int64, float64) {
	if w.end < 0 {
		return 0, 0
	}
	next := max(w.done+1, w.start)
	lag := max(w.end-next, 0)
	if lag == 0 {
		return 0, 0
	}
	for _, s := range w.samples {
		if s.end > next {
			return lag, now.Sub(s.at).Seconds()
		}
	}
	return lag, 0
}

// stateOf names a partition's state: stopped, paused, waiting and fencing
// as the engine or flow says; stalled when behind with no progress for
// StallAfter, also while the engine retries (restarting); then
// restarting, lagging or running.
func (h *Health) stateOf(s PartitionStatus, w *watch, now time.Time) string {
	switch {
	case engineOwn(s.State):
		return s.State
	case w.lag > 0 && now.Sub(w.movedAt) >= h.cfg.StallAfter:
		return Stalled
	case s.State != Running:
		return s.State
	case w.lag > 0 && w.lagSec >= h.cfg.LagAfter.Seconds():
		return Lagging
	}
	return Running
}

// Annotate adds what Health knows (lag, state) to an engine's status.
func (h *Health) Annotate(st []PartitionStatus) []PartitionStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range st {
		w := h.parts[progress.TP{Topic: st[i].Topic, Partition: st[i].Partition}]
		if w == nil {
			continue
		}
		st[i].SourceEnd, st[i].Lag, st[i].LagSeconds = w.end, w.lag, w.lagSec
		if !engineOwn(st[i].State) && !engineOwn(w.state) { // else the check is older than the state
			st[i].State = w.state
		}
	}
	return st
}

// States lists every partition state, for the state metric.
var States = []string{Running, Lagging, Stalled, Paused, Restarting, Stopped, Waiting, Fencing}

// ReportHealth reports the lag and state of every checked partition
// (metrics.HealthReporter).
func (h *Health) ReportHealth(report func(s *metrics.HealthSeries, lag int64, lagSeconds float64, state int)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.parts {
		if w.series == nil || !w.checked {
			continue
		}
		for i, st := range States {
			if st == w.state {
				report(w.series, w.lag, w.lagSec, i)
				break
			}
		}
	}
}

// forget drops every partition, and so their metric series.
func (h *Health) forget() {
	if m := h.cfg.Metrics; m != nil {
		m.Partitions.Remove(h)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetLocked(h.checks + 1)
}

// forgetLocked drops the partitions not seen by Check number check (and
// so their metric series); h.mu is held.
func (h *Health) forgetLocked(check int64) {
	for tp, w := range h.parts {
		if w.seen != check {
			delete(h.parts, tp)
			h.ends = nil
		}
	}
}

// NotReady counts the partitions in st that are stopped, stalled or
// fencing, or waiting with an error (their remote topic cannot be made).
// A partition waiting for the target to host it is not counted: that
// takes seconds, and at most a few minutes before it is copied anyway.
func NotReady(st []PartitionStatus) int {
	n := 0
	for _, s := range st {
		switch s.State {
		case Stopped, Stalled, Fencing:
			n++
		case Waiting:
			if s.Error != "" {
				n++
			}
		}
	}
	return n
}

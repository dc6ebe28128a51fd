package datapath

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

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
	// Admin lists the source partitions' last stable offsets.
	Admin *kadm.Client
	// StallAfter: a partition behind the source whose progress has not
	// moved for this long is stalled. LagAfter: one whose oldest record
	// not yet copied is at least this old is lagging.
	StallAfter, LagAfter time.Duration
	// Interval is how often the source is asked; zero means a quarter
	// of StallAfter, at most 5 s.
	Interval time.Duration
	Metrics  *metrics.Metrics
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

	mu    sync.Mutex
	parts map[progress.TP]*watch
}

// watch is what Health knows of one partition.
type watch struct {
	remote  string
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
	return &Health{cfg: cfg, eng: eng, log: log, parts: make(map[progress.TP]*watch)}
}

// Run checks every Interval until ctx ends.
func (h *Health) Run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		h.Check(ctx, time.Now())
		select {
		case <-ctx.Done():
			h.forget(nil)
			return
		case <-t.C:
		}
	}
}

// Check lists the source offsets of the assigned partitions, updates their
// state and restarts the stalled ones that have nothing in flight.
func (h *Health) Check(ctx context.Context, now time.Time) {
	st := h.eng.Status()
	topics := make(map[string]bool)
	for _, s := range st {
		topics[s.Topic] = true
	}
	var ends, starts kadm.ListedOffsets
	if len(topics) > 0 {
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		lctx, cancel := context.WithTimeout(ctx, h.cfg.Interval)
		ends, _ = h.cfg.Admin.ListCommittedOffsets(lctx, names...)
		starts, _ = h.cfg.Admin.ListStartOffsets(lctx, names...)
		cancel()
	}
	var restart []PartitionStatus
	h.mu.Lock()
	seen := make(map[progress.TP]bool, len(st))
	for _, s := range st {
		tp := progress.TP{Topic: s.Topic, Partition: s.Partition}
		seen[tp] = true
		w := h.parts[tp]
		if w == nil {
			w = &watch{remote: s.Remote, done: s.Done, movedAt: now, end: -1}
			h.parts[tp] = w
		}
		if s.Done != w.done {
			w.done, w.movedAt = s.Done, now
		}
		if o, ok := ends.Lookup(s.Topic, s.Partition); ok && o.Err == nil {
			w.end = o.Offset
			w.samples = append(w.samples, sample{now, o.Offset})
			if len(w.samples) > maxSamples {
				w.samples = w.samples[1:]
			}
		}
		if o, ok := starts.Lookup(s.Topic, s.Partition); ok && o.Err == nil {
			w.start = o.Offset
		}
		w.lag, w.lagSec = w.lagOf(now)
		w.state = h.stateOf(s, w, now)
		if w.state == Stalled && s.InFlight == 0 {
			restart = append(restart, s)
			w.movedAt = now // give the restart a whole StallAfter
		}
	}
	h.mu.Unlock()
	h.forget(seen)
	h.export(st)
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

// stateOf names a partition's state: stopped and paused as the engine says;
// stalled when behind with no progress for StallAfter, also while the
// engine retries (restarting); then restarting, lagging or running.
func (h *Health) stateOf(s PartitionStatus, w *watch, now time.Time) string {
	switch {
	case s.State == Stopped || s.State == Paused:
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
		if st[i].State != Stopped && st[i].State != Paused {
			st[i].State = w.state
		}
	}
	return st
}

// States lists every partition state, for the state metric.
var States = []string{Running, Lagging, Stalled, Paused, Restarting, Stopped}

// export sets the lag and state metrics of the partitions in st.
func (h *Health) export(st []PartitionStatus) {
	m := h.cfg.Metrics
	if m == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range st {
		w := h.parts[progress.TP{Topic: s.Topic, Partition: s.Partition}]
		if w == nil {
			continue
		}
		part := strconv.Itoa(int(s.Partition))
		m.PartitionLag.WithLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, s.Remote, part).Set(float64(w.lag))
		m.PartitionLagSeconds.WithLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, s.Remote, part).Set(w.lagSec)
		for _, state := range States {
			v := 0.0
			if state == w.state {
				v = 1
			}
			m.PartitionState.WithLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, s.Remote, part, state).Set(v)
		}
	}
}

// forget drops the partitions not in keep (all with nil) and their
// metric series.
func (h *Health) forget(keep map[progress.TP]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.cfg.Metrics
	for tp, w := range h.parts {
		if keep[tp] {
			continue
		}
		delete(h.parts, tp)
		if m == nil {
			continue
		}
		part := strconv.Itoa(int(tp.Partition))
		m.PartitionLag.DeleteLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, w.remote, part)
		m.PartitionLagSeconds.DeleteLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, w.remote, part)
		for _, state := range States {
			m.PartitionState.DeleteLabelValues(h.cfg.SourceAlias, h.cfg.TargetAlias, w.remote, part, state)
		}
	}
}

// NotReady counts the partitions in st that are stopped or stalled.
func NotReady(st []PartitionStatus) int {
	n := 0
	for _, s := range st {
		if s.State == Stopped || s.State == Stalled {
			n++
		}
	}
	return n
}

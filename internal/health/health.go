// Package health watches the partitions of one engine: how far each is
// behind the source, in records and seconds, and whether its progress
// moves. It names each partition's state for status, metrics and
// readiness, and restarts a stalled partition (the watchdog).
package health

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// Defaults of Config.
const (
	DefaultStallAfter = 60 * time.Second
	DefaultLagAfter   = 30 * time.Second
)

// Config tunes a Watcher.
type Config struct {
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
	// Table is the flow's partition table: the partitions it holds back
	// from the engine (waiting, fencing) are watched like the others, in
	// the state they have, and every check is written there. Nil means a
	// table of the Watcher's own.
	Table *datapath.Table
}

// Watcher watches the partitions of one engine: how far each is behind the
// source's last stable offset, in records and in seconds, and whether its
// progress moves. It names each partition's state (running, lagging,
// stalled, besides the engine's own paused, restarting and stopped) for
// status, metrics and readiness, and is the watchdog: a stalled partition
// with nothing in flight is restarted from its progress, which gets a
// partition going again that its engine stopped fetching (a lost fetch
// position, a consumer that holds data it never hands out).
type Watcher struct {
	cfg Config
	eng datapath.Engine
	log *slog.Logger

	st     []datapath.PartitionStatus // the engine's status, kept between checks (Check only)
	report []datapath.Check           // what a check found, kept between checks (Check only)

	mu     sync.Mutex
	parts  map[progress.TP]*watch
	order  []*watch  // the watches of the last check's status, in its order
	checks int64     // Checks begun
	ends   []listing // of parts' last stable offsets; nil when partitions or leaders changed
}

// listing is one ListOffsets request to a source broker and the
// partitions it lists, in their order.
type listing struct {
	broker int32
	req    *kmsg.ListOffsetsRequest
	ws     []*watch
	first  map[string]int // index in ws of each topic's first partition
}

// watch is what Watcher knows of one partition.
type watch struct {
	tp      progress.TP
	leader  int32     // source leader, from the last metadata asked; -1 unknown
	done    int64     // progress seen at the last check
	movedAt time.Time // when done last changed (or the partition was first seen)
	// restartAt is when a stall last restarted the partition: the next
	// restart waits a whole StallAfter, while the state stays stalled
	// until the partition moves (a probe must not see it ready between).
	restartAt time.Time
	start     int64 // source log start at the last check
	end       int64 // source last stable offset at the last check; -1 unknown
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

// New watches eng's partitions.
func New(cfg Config, eng datapath.Engine, log *slog.Logger) *Watcher {
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = DefaultStallAfter
	}
	if cfg.LagAfter <= 0 {
		cfg.LagAfter = DefaultLagAfter
	}
	if cfg.Interval <= 0 {
		cfg.Interval = min(cfg.StallAfter/4, 5*time.Second)
	}
	if cfg.Table == nil {
		cfg.Table = datapath.NewTable(nil)
	}
	h := &Watcher{cfg: cfg, eng: eng, log: log, parts: make(map[progress.TP]*watch)}
	if cfg.Metrics != nil {
		cfg.Metrics.Partitions.Add(h)
	}
	return h
}

// Run checks every Interval until ctx ends.
func (h *Watcher) Run(ctx context.Context) {
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
// check lists the last stable offset of every partition, straight from its
// leader: one request per leader, kept while the partitions and their
// leaders stay the same (the leaders are asked for again after a change
// or an error), and the log start only of those behind (of one caught up,
// the lag is 0 whatever the log start). Metrics read the last check's
// values when scraped. Checks run one at a time.
func (h *Watcher) Check(ctx context.Context, now time.Time) {
	st := h.status()
	if h.track(st, now) {
		lctx, cancel := context.WithTimeout(ctx, h.cfg.Interval)
		defer cancel()
		ends := h.locate(lctx)
		behind := h.behind(h.list(lctx, ends), now)
		if len(behind) > 0 {
			starts := h.list(lctx, requests(behind, -2, h.cfg.Interval))
			h.mu.Lock()
			h.listed(starts, func(w *watch, start int64) { w.start = start })
			h.mu.Unlock()
		}
	}
	var restart []datapath.PartitionStatus
	h.report = h.report[:0]
	h.mu.Lock()
	for i, s := range st {
		w := h.order[i]
		w.lag, w.lagSec = w.lagOf(now)
		w.state = h.stateOf(s, w, now)
		if w.state == datapath.Stalled && s.InFlight == 0 && now.Sub(w.restartAt) >= h.cfg.StallAfter {
			restart = append(restart, s)
			w.restartAt = now // give the restart a whole StallAfter
		}
		w.checked = true
		h.report = append(h.report, datapath.Check{TP: w.tp, State: w.state, SourceEnd: w.end, Lag: w.lag, LagSeconds: w.lagSec})
	}
	h.mu.Unlock()
	h.cfg.Table.SetChecks(h.report)
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

// status returns the engine's status, in the buffer of the last check.
func (h *Watcher) status() []datapath.PartitionStatus {
	h.st = h.cfg.Table.Merge(h.eng.Status(h.st[:0]))
	return h.st
}

// track watches the partitions of st, in st's order (h.order), forgets
// those no longer in it and notes progress that moved; it reports whether
// there is any partition to list.
func (h *Watcher) track(st []datapath.PartitionStatus, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks++
	old := h.order
	h.order = h.order[:0]
	for i := range st {
		s := &st[i]
		w := h.lookup(old, i, s.Topic, s.Partition)
		if w == nil {
			w = h.watch(*s, now)
			h.parts[w.tp] = w
			h.ends = nil
		}
		h.order = append(h.order, w)
		w.seen = h.checks
		if s.Done != w.done {
			w.done, w.movedAt = s.Done, now
		}
	}
	clear(h.order[len(h.order):cap(h.order)])
	if len(h.parts) != len(st) {
		h.forgetLocked(h.checks)
	}
	return len(h.parts) > 0
}

// lookup returns the watch of topic and partition, found at index i of
// order when that status is in the same order as the last one (then
// without hashing); nil when it is not watched. h.mu is held.
func (h *Watcher) lookup(order []*watch, i int, topic string, partition int32) *watch {
	if i < len(order) {
		if w := order[i]; w.tp.Partition == partition && w.tp.Topic == topic {
			return w
		}
	}
	return h.parts[progress.TP{Topic: topic, Partition: partition}]
}

// locate returns the requests for the last stable offsets of every
// watched partition, one per leader. After partitions or leaders changed
// it asks the source for the leaders first (one metadata request).
func (h *Watcher) locate(ctx context.Context) []listing {
	h.mu.Lock()
	if h.ends != nil {
		defer h.mu.Unlock()
		return h.ends
	}
	req := kmsg.NewPtrMetadataRequest()
	seen := make(map[string]bool)
	for _, w := range h.order {
		if !seen[w.tp.Topic] {
			seen[w.tp.Topic] = true
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(w.tp.Topic)
			req.Topics = append(req.Topics, t)
		}
	}
	h.mu.Unlock()
	// Through the client: it learns the brokers from the answer, and so
	// finds a leader that is new to it.
	resp, err := req.RequestWith(ctx, h.cfg.Source)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		return nil // no offsets this check
	}
	for _, w := range h.parts {
		w.leader = -1
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			w := h.parts[progress.TP{Topic: *t.Topic, Partition: p.Partition}]
			if w != nil && p.ErrorCode == 0 {
				w.leader = p.Leader
			}
		}
	}
	ends := requests(h.order, -1, h.cfg.Interval)
	if !slices.ContainsFunc(h.order, func(w *watch) bool { return w.leader < 0 }) {
		h.ends = ends // else the leaders are asked for again next time
	}
	return ends
}

// requests asks for the offsets of the partitions of ws at timestamp (-1
// the last stable offset, -2 the log start), one request per leader, each
// listing its partitions in the order of ws. Partitions without a known
// leader are left out.
func requests(ws []*watch, timestamp int64, timeout time.Duration) []listing {
	var out []listing
	at := make(map[int32]int)
	for _, w := range ws {
		if w.leader < 0 {
			continue
		}
		i, ok := at[w.leader]
		if !ok {
			i = len(out)
			at[w.leader] = i
			req := kmsg.NewPtrListOffsetsRequest()
			req.IsolationLevel = 1 // read_committed: the last stable offset
			req.TimeoutMillis = int32(timeout.Milliseconds())
			out = append(out, listing{broker: w.leader, req: req, first: make(map[string]int)})
		}
		l := &out[i]
		if n := len(l.req.Topics); n == 0 || l.req.Topics[n-1].Topic != w.tp.Topic {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = w.tp.Topic
			l.req.Topics = append(l.req.Topics, t)
			l.first[w.tp.Topic] = len(l.ws)
		}
		t := &l.req.Topics[len(l.req.Topics)-1]
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = w.tp.Partition, timestamp
		t.Partitions = append(t.Partitions, p)
		l.ws = append(l.ws, w)
	}
	return out
}

// answer is a broker's answer to one listing.
type answer struct {
	l    *listing
	resp *kmsg.ListOffsetsResponse
	err  error
}

// list sends the requests of ls, to their brokers at once, and returns
// the answers.
func (h *Watcher) list(ctx context.Context, ls []listing) []answer {
	out := make([]answer, len(ls))
	var wg sync.WaitGroup
	for i := range ls {
		out[i].l = &ls[i]
		wg.Go(func() {
			a := &out[i]
			var resp kmsg.Response
			if resp, a.err = h.cfg.Source.Broker(int(a.l.broker)).Request(ctx, a.l.req); a.err == nil {
				a.resp = resp.(*kmsg.ListOffsetsResponse)
			}
		})
	}
	wg.Wait()
	return out
}

// watch starts watching the partition of s, with its metric series.
func (h *Watcher) watch(s datapath.PartitionStatus, now time.Time) *watch {
	w := &watch{tp: progress.TP{Topic: s.Topic, Partition: s.Partition}, leader: -1, done: s.Done, movedAt: now, end: -1}
	if m := h.cfg.Metrics; m != nil {
		w.series = m.Partitions.Series(h.cfg.SourceAlias, h.cfg.TargetAlias, s.Remote, strconv.Itoa(int(s.Partition)), States)
	}
	return w
}

// listed calls set with the watch and offset of every partition that the
// answers list without error. A failed request or a partition error (a
// leader that moved, most likely) has the leaders asked for again at the
// next check. h.mu is held.
func (h *Watcher) listed(as []answer, set func(*watch, int64)) {
	for _, a := range as {
		if a.err != nil {
			h.ends = nil
			continue
		}
		ws := a.l.ws
		for _, t := range a.resp.Topics {
			// A topic's partitions come in the order asked, normally;
			// the topics in any order.
			k, ok := a.l.first[t.Topic]
			if !ok {
				k = len(ws)
			}
			for _, p := range t.Partitions {
				var w *watch
				if k < len(ws) && ws[k].tp.Partition == p.Partition && ws[k].tp.Topic == t.Topic {
					w = ws[k]
					k++
				} else {
					w = h.parts[progress.TP{Topic: t.Topic, Partition: p.Partition}]
				}
				switch {
				case w == nil:
				case p.ErrorCode != 0:
					h.ends = nil
				default:
					set(w, p.Offset)
				}
			}
		}
	}
}

// behind takes the last stable offsets that ends listed and returns the
// watched partitions that have not copied up to theirs.
func (h *Watcher) behind(ends []answer, now time.Time) []*watch {
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
	var ws []*watch
	for _, w := range h.order {
		if w.done+1 < w.end {
			ws = append(ws, w)
		}
	}
	return ws
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
func (h *Watcher) stateOf(s datapath.PartitionStatus, w *watch, now time.Time) string {
	switch {
	case datapath.OwnState(s.State):
		return s.State
	case w.lag > 0 && now.Sub(w.movedAt) >= h.cfg.StallAfter:
		return datapath.Stalled
	case s.State != datapath.Running:
		return s.State
	case w.lag > 0 && w.lagSec >= h.cfg.LagAfter.Seconds():
		return datapath.Lagging
	}
	return datapath.Running
}

// States lists every partition state, for the state metric.
var States = []string{datapath.Running, datapath.Lagging, datapath.Stalled, datapath.Paused, datapath.Restarting, datapath.Stopped, datapath.Waiting, datapath.Fencing}

// ReportHealth reports the lag and state of every checked partition
// (metrics.HealthReporter).
func (h *Watcher) ReportHealth(report func(s *metrics.HealthSeries, lag int64, lagSeconds float64, state int)) {
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
func (h *Watcher) forget() {
	if m := h.cfg.Metrics; m != nil {
		m.Partitions.Remove(h)
	}
	h.cfg.Table.SetChecks(nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetLocked(h.checks + 1)
	h.order = nil
}

// forgetLocked drops the partitions not seen by Check number check (and
// so their metric series); h.mu is held.
func (h *Watcher) forgetLocked(check int64) {
	for tp, w := range h.parts {
		if w.seen != check {
			delete(h.parts, tp)
			h.ends = nil
		}
	}
}

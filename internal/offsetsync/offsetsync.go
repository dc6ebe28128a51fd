// Package offsetsync decides when to publish an offset sync (upstream offset,
// downstream offset) for a replicated partition and writes it to MM2's
// offset-syncs topic, following MM2's emission rules.
//
// In exact mode (see EnableExact and docs/offset-translation.md) it also
// publishes a sync whenever the downstream offsets jump, and copies every
// run boundary, plus one sync per partition per IndexInterval, to
// kmirror's offset index topic, whose delete policy keeps the history that
// compaction removes from the offset-syncs topic.
package offsetsync

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/lograte"
	"github.com/kmirror/kmirror/internal/wire"
)

type tp struct {
	topic     string
	partition int32
}

// state is what MM2 keeps per partition to decide whether a sync is due.
type state struct {
	prevUp, prevDown, lastSyncDown int64
	lastIndex                      time.Time // last write to the offset index
	// inflight are the syncs handed to the producer and not written
	// yet, in order (written).
	inflight []wire.OffsetSync
}

// observe records an acknowledged pair and reports whether MM2 would emit
// a sync for it now.
func (s *state) observe(up, down, lagMax int64) bool {
	due, _ := s.observeMode(up, down, lagMax, false)
	return due
}

// Rule is the emission rule of one partition, for tools and tests that
// simulate the writer.
type Rule struct{ s state }

// NewRule returns the rule of a partition whose writer starts now.
func NewRule() *Rule { return &Rule{state{prevUp: -1, prevDown: -1, lastSyncDown: -1}} }

// Observe reports whether the pair (up, down) is a due sync, and whether it
// is a run boundary (exact mode copies those to the offset index).
func (r *Rule) Observe(up, down, lagMax int64, exact bool) (due, boundary bool) {
	return r.s.observeMode(up, down, lagMax, exact)
}

// Flushed records that a flush published the last pair.
func (r *Rule) Flushed() { r.s.lastSyncDown = r.s.prevDown }

// observeMode is observe with exact mode's extra rule: a downstream jump
// (down-prevDown != 1) is due as well. boundary reports a discontinuity
// (first record, a jump on either side, a rewind), which exact mode copies
// to the offset index.
func (s *state) observeMode(up, down, lagMax int64, exact bool) (due, boundary bool) {
	boundary = s.lastSyncDown == -1 || // first record since start
		up-s.prevUp != 1 || // upstream skipped offsets
		down < s.prevDown // downstream went backwards
	if exact && down-s.prevDown != 1 {
		boundary = true // downstream jumped: a record not from this pipeline, or a retry
	}
	due = boundary || down-(s.lastSyncDown+1) >= lagMax // translation would lag by lagMax
	if due {
		s.lastSyncDown = down
	}
	s.prevUp, s.prevDown = up, down
	return due, boundary
}

// Writer publishes offset syncs for the partitions of one flow.
type Writer struct {
	topic  string
	lagMax int64
	cl     *kgo.Client // a producer of its own on the cluster holding the topic
	log    *slog.Logger
	failed func() // counts a failed send; may be nil
	// logs limits the warnings of failed sends, one cause per error,
	// with counts: a target that refuses every sync would log each.
	logs lograte.Limiter

	mu     sync.Mutex
	states map[tp]*state
	// pending holds every due sync not sent yet, per partition in
	// order: with HoldUntilFlush several of a partition wait for the
	// commit, and each may be a run boundary (exact mode) that a reader
	// of the topic needs. Syncs the producer refused come back to the
	// head of theirs (written).
	pending map[tp][]wire.OffsetSync
	order   []tp                   // partitions with pending syncs, in arrival order
	delayed map[tp]wire.OffsetSync // newest sync that was not due

	hold     bool // syncs wait for Flush (HoldUntilFlush)
	exact    bool
	indexCl  *kgo.Client
	index    string
	indexDue []wire.OffsetSync // to copy to the index at the next send
	// indexIn are the index entries handed to the producer and not
	// written yet, in order (indexWritten).
	indexIn []wire.OffsetSync
	now     func() time.Time
}

// New returns a Writer producing to topic (partition 0) through cl, which
// must be a client of its own: Flush waits for everything cl buffered, and
// Acked may be called from another client's produce callbacks.
// lagMax is offset.lag.max. failed, if not nil, is called for every sync that
// could not be written.
func New(cl *kgo.Client, topic string, lagMax int64, log *slog.Logger, failed func()) *Writer {
	return &Writer{
		topic:   topic,
		lagMax:  lagMax,
		cl:      cl,
		log:     log,
		failed:  failed,
		states:  make(map[tp]*state),
		pending: make(map[tp][]wire.OffsetSync),
		delayed: make(map[tp]wire.OffsetSync),
		now:     time.Now,
	}
}

// IndexInterval is how often a partition without discontinuities gets an
// entry in the offset index.
const IndexInterval = time.Minute

// DefaultIndexRetention is the retention.ms of a new offset index topic.
const DefaultIndexRetention = 7 * 24 * time.Hour

// IndexTopic names the offset index of the flow from source: it lives on
// the flow's target cluster.
func IndexTopic(source string) string { return "kmirror-offset-index." + source + ".internal" }

// EnableExact switches w to exact mode before its first Acked: a downstream
// jump is a due sync, and run boundaries go to the offset index topic too,
// through indexCl (which may be w's own client, or nil for no index).
func (w *Writer) EnableExact(indexCl *kgo.Client, indexTopic string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.exact, w.indexCl, w.index = true, indexCl, indexTopic
}

// CreateIndexTopic creates the offset index topic (one partition, delete
// policy, the given retention) unless it exists. rfKey names the setting rf
// came from, for the error message.
func CreateIndexTopic(ctx context.Context, adm *kadm.Client, topic string, rf int16, rfKey string, retention time.Duration) error {
	_, err := internaltopic.Create(ctx, adm, internaltopic.Spec{Name: topic, Partitions: 1, ReplicationFactor: rf, RFKey: rfKey,
		Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": strconv.FormatInt(retention.Milliseconds(), 10)}})
	return err
}

// HoldUntilFlush makes w send syncs only when flushed, never as they
// become due: for exactly-once, whose engines flush after a commit, so
// that a sync never points at a record of a transaction still open (or
// aborted later). A restart without progress may then take its position
// from the last sync (see internal/flow/recover.go). Call it before the
// first Acked.
func (w *Writer) HoldUntilFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = true
}

// Acked records that the source record at offset up of topic/partition was
// written to the target at offset down. Calls for one partition must come in
// offset order. A sync that is due is sent at once.
func (w *Writer) Acked(topic string, partition int32, up, down int64) {
	k := tp{topic, partition}
	w.mu.Lock()
	s := w.states[k]
	if s == nil {
		s = &state{prevUp: -1, prevDown: -1, lastSyncDown: -1}
		w.states[k] = s
	}
	due, boundary := s.observeMode(up, down, w.lagMax, w.exact)
	sync := wire.OffsetSync{Topic: topic, Partition: partition, UpstreamOffset: up, DownstreamOffset: down}
	w.indexLocked(s, sync, boundary)
	if due {
		delete(w.delayed, k)
		if _, ok := w.pending[k]; !ok {
			w.order = append(w.order, k)
		}
		w.pending[k] = append(w.pending[k], sync)
	} else {
		w.delayed[k] = sync
	}
	hold := w.hold
	w.mu.Unlock()
	if due && !hold {
		w.send(nil)
	}
}

// Flush promotes every delayed sync to due, sends all due syncs and waits
// until they are written. It is called whenever progress is saved, so the
// latest position of a quiet partition is always published.
func (w *Writer) Flush(ctx context.Context) error { return w.FlushOnly(ctx, nil) }

// FlushOnly is Flush for the partitions that only reports true of (all
// with nil); the other partitions' delayed syncs stay delayed. A partition
// handed to another worker is flushed this way after its final progress
// is saved: its newest pair is then published, and the next owner's
// checkpoints translate offsets up to it exactly.
func (w *Writer) FlushOnly(ctx context.Context, only func(topic string, partition int32) bool) error {
	w.mu.Lock()
	for k, s := range w.delayed {
		if only != nil && !only(k.topic, k.partition) {
			continue
		}
		if _, ok := w.pending[k]; !ok {
			w.order = append(w.order, k)
		}
		w.pending[k] = append(w.pending[k], s)
		st := w.states[k]
		st.lastSyncDown = s.DownstreamOffset
		w.indexLocked(st, s, false)
		delete(w.delayed, k)
	}
	w.mu.Unlock()
	if w.hold {
		w.send(only) // other partitions' due syncs wait for their commit
	} else {
		w.send(nil)
	}
	if w.indexCl != nil && w.indexCl != w.cl {
		if err := w.indexCl.Flush(ctx); err != nil {
			return err
		}
	}
	return w.cl.Flush(ctx)
}

// Forget drops the state of a partition that is no longer replicated here,
// so the next record after a reassignment emits a sync at once.
func (w *Writer) Forget(topic string, partition int32) {
	k := tp{topic, partition}
	w.mu.Lock()
	delete(w.states, k)
	delete(w.delayed, k)
	if _, ok := w.pending[k]; ok {
		// Due but not sent (HoldUntilFlush): of an aborted transaction.
		delete(w.pending, k)
		w.order = slices.DeleteFunc(w.order, func(o tp) bool { return o == k })
	}
	w.mu.Unlock()
}

// indexLocked queues sync for the offset index if it is a run boundary or
// the partition had no index entry for IndexInterval.
func (w *Writer) indexLocked(s *state, sync wire.OffsetSync, boundary bool) {
	if w.indexCl == nil {
		return
	}
	now := w.now()
	if boundary || now.Sub(s.lastIndex) >= IndexInterval {
		s.lastIndex = now
		w.indexDue = append(w.indexDue, sync)
	}
}

// send writes the due syncs of the partitions only reports true of (all
// with nil); the others stay due.
func (w *Writer) send(only func(topic string, partition int32) bool) {
	w.mu.Lock()
	var idx []*kgo.Record
	var entries []wire.OffsetSync
	for _, s := range w.indexDue {
		if key, value, err := wire.Encode(s); err == nil {
			idx = append(idx, &kgo.Record{Topic: w.index, Partition: 0, Key: key, Value: value})
			entries = append(entries, s)
		}
	}
	w.indexIn = append(w.indexIn, entries...)
	w.indexDue = w.indexDue[:0]
	recs := make([]*kgo.Record, 0, len(w.order))
	syncs := make([]wire.OffsetSync, 0, len(w.order))
	var kept []tp
	for _, k := range w.order {
		if only != nil && !only(k.topic, k.partition) {
			kept = append(kept, k)
			continue
		}
		for _, sync := range w.pending[k] {
			key, value, err := wire.Encode(sync)
			if err != nil { // only a topic name over 32767 bytes, which Kafka forbids
				w.log.Error("offset sync not encodable", "topic", k.topic, "err", err)
				continue
			}
			recs = append(recs, &kgo.Record{Topic: w.topic, Partition: 0, Key: key, Value: value})
			syncs = append(syncs, sync)
			if st := w.states[k]; st != nil {
				st.inflight = append(st.inflight, sync)
			}
		}
	}
	if kept == nil {
		clear(w.pending)
		w.order = w.order[:0]
	} else {
		for _, k := range w.order {
			if only(k.topic, k.partition) {
				delete(w.pending, k)
			}
		}
		w.order = kept
	}
	w.mu.Unlock()
	for i, r := range idx {
		e := entries[i]
		w.indexCl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				w.logs.Warn(w.log, "index|"+err.Error(), "offset index entry not written", "topic", w.index, "err", err)
				if w.failed != nil {
					w.failed()
				}
			}
			w.indexWritten(e, err)
		})
	}
	for i, r := range recs {
		sync := syncs[i]
		w.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				w.logs.Warn(w.log, "sync|"+err.Error(), "offset sync not written", "topic", w.topic, "err", err)
				if w.failed != nil {
					w.failed()
				}
			}
			w.written(sync, err)
		})
	}
}

// indexWritten takes the producer's answer for an index entry, as
// written does for a sync (answered): the index keeps the run boundaries
// a reader needs after a restart.
func (w *Writer) indexWritten(e wire.OffsetSync, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var dropped int
	w.indexIn, w.indexDue, dropped = answered(w.indexIn, w.indexDue, e, err)
	if dropped > 0 {
		w.log.Error("offset index entries dropped: the producer refused them and too many waited; after a restart, checkpoints of offsets in the dropped range may be translated wrongly",
			"dropped", dropped, "topic", w.index)
	}
}

// maxPending bounds the syncs of one partition kept to send again while
// the producer cannot write them.
const maxPending = 10000

// written takes the producer's answer for sync. A sync not written goes
// back to the head of its partition's due syncs, with every sync of the
// partition handed to the producer after it, in order, and they are sent
// again with the next ones: none is lost. A quiet partition may get no
// other sync, and its groups' checkpoints need one (a refusal under load,
// of a topic just made, lost a quiet partition's only sync and its
// checkpoints with it); in exact mode every sync may be a run boundary,
// and a reader that misses one joins the runs around it. Those after it
// are sent again because a reader applies syncs in order: after the
// older one, the newest must come last again. Callbacks of one partition
// come in order, so a sync re-queued here is not written meanwhile.
func (w *Writer) written(sync wire.OffsetSync, err error) {
	k := tp{sync.Topic, sync.Partition}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.states[k]
	if s == nil { // forgotten
		return
	}
	if !slices.Contains(s.inflight, sync) { // re-queued by an earlier failure
		return
	}
	var again []wire.OffsetSync
	var dropped int
	s.inflight, again, dropped = answered(s.inflight, w.pending[k], sync, err)
	if err == nil {
		return
	}
	if dropped > 0 {
		w.log.Error("offset syncs of a partition dropped: the producer refused them and too many waited; checkpoints of offsets in the dropped range may be translated wrongly",
			"topic", sync.Topic, "partition", sync.Partition, "dropped", dropped, "syncs_topic", w.topic)
	}
	if _, ok := w.pending[k]; !ok {
		w.order = append(w.order, k)
	}
	w.pending[k] = again
}

// answered takes the producer's answer for x, one of inflight (handed to
// the producer, in order). Written, x leaves inflight. Refused, x and
// every item after it go back to the head of due, at most maxPending of
// them (dropped: how many of the oldest did not fit). An x not in
// inflight (re-queued already) changes nothing.
func answered(inflight, due []wire.OffsetSync, x wire.OffsetSync, err error) (_, _ []wire.OffsetSync, dropped int) {
	i := slices.Index(inflight, x)
	if i < 0 {
		return inflight, due, 0
	}
	if err == nil {
		return slices.Delete(inflight, i, i+1), due, 0
	}
	again := append(slices.Clone(inflight[i:]), due...)
	if len(again) > maxPending {
		dropped = len(again) - maxPending
		again = again[dropped:]
	}
	return inflight[:i], again, dropped
}

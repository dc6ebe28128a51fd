// Package offsetsync decides when to publish an offset sync (upstream offset,
// downstream offset) for a replicated partition and writes it to MM2's
// offset-syncs topic, following MM2's emission rules.
package offsetsync

import (
	"context"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/wire"
)

type tp struct {
	topic     string
	partition int32
}

// state is what MM2 keeps per partition to decide whether a sync is due.
type state struct {
	prevUp, prevDown, lastSyncDown int64
}

// observe records an acknowledged pair and reports whether MM2 would emit
// a sync for it now.
func (s *state) observe(up, down, lagMax int64) bool {
	due := s.lastSyncDown == -1 || // first record since start
		down-(s.lastSyncDown+1) >= lagMax || // translation would lag by lagMax
		up-s.prevUp != 1 || // upstream skipped offsets
		down < s.prevDown // downstream went backwards
	if due {
		s.lastSyncDown = down
	}
	s.prevUp, s.prevDown = up, down
	return due
}

// Writer publishes offset syncs for the partitions of one flow.
type Writer struct {
	topic  string
	lagMax int64
	cl     *kgo.Client // a producer of its own on the cluster holding the topic
	log    *slog.Logger
	failed func() // counts a failed send; may be nil

	mu      sync.Mutex
	states  map[tp]*state
	pending map[tp]wire.OffsetSync // due now
	order   []tp                   // pending in arrival order
	delayed map[tp]wire.OffsetSync // newest sync that was not due
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
		pending: make(map[tp]wire.OffsetSync),
		delayed: make(map[tp]wire.OffsetSync),
	}
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
	due := s.observe(up, down, w.lagMax)
	sync := wire.OffsetSync{Topic: topic, Partition: partition, UpstreamOffset: up, DownstreamOffset: down}
	if due {
		delete(w.delayed, k)
		if _, ok := w.pending[k]; !ok {
			w.order = append(w.order, k)
		}
		w.pending[k] = sync
	} else {
		w.delayed[k] = sync
	}
	w.mu.Unlock()
	if due {
		w.send()
	}
}

// Flush promotes every delayed sync to due, sends all due syncs and waits
// until they are written. It is called whenever progress is saved, so the
// latest position of a quiet partition is always published.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	for k, s := range w.delayed {
		if _, ok := w.pending[k]; !ok {
			w.order = append(w.order, k)
		}
		w.pending[k] = s
		w.states[k].lastSyncDown = s.DownstreamOffset
	}
	clear(w.delayed)
	w.mu.Unlock()
	w.send()
	return w.cl.Flush(ctx)
}

// Forget drops the state of a partition that is no longer replicated here,
// so the next record after a reassignment emits a sync at once.
func (w *Writer) Forget(topic string, partition int32) {
	k := tp{topic, partition}
	w.mu.Lock()
	delete(w.states, k)
	delete(w.delayed, k)
	w.mu.Unlock()
}

func (w *Writer) send() {
	w.mu.Lock()
	recs := make([]*kgo.Record, 0, len(w.order))
	for _, k := range w.order {
		key, value, err := wire.Encode(w.pending[k])
		if err != nil { // only a topic name over 32767 bytes, which Kafka forbids
			w.log.Error("offset sync not encodable", "topic", k.topic, "err", err)
			continue
		}
		recs = append(recs, &kgo.Record{Topic: w.topic, Partition: 0, Key: key, Value: value})
	}
	clear(w.pending)
	w.order = w.order[:0]
	w.mu.Unlock()
	for _, r := range recs {
		w.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				w.log.Warn("offset sync not written", "topic", w.topic, "err", err)
				if w.failed != nil {
					w.failed()
				}
			}
		})
	}
}

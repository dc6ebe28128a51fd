// Package progress keeps, on the target cluster, the last source offset that
// kmirror replicated for every partition, in MM2's Connect offsets topic
// (mm2-offsets.<source>.internal), so that kmirror and Apache MM2 can take
// over from each other without re-copying data.
package progress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/wire"
)

// TP names a source topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Store reads and writes the progress of one flow (one source cluster).
type Store struct {
	topic  string
	source string
	parts  int32
	cl     *kgo.Client // producer on the target cluster, records carry their partition

	connect []kgo.Opt // target connection, to read the topic again
	log     *slog.Logger
	catchMu sync.Mutex // one CatchUp at a time

	adm         *kadm.Client
	spec        internaltopic.Spec // to create the topic again (Repair)
	onMissing   func(bool)
	onRecreated func()
	repairMu    sync.Mutex // one Repair at a time
	// writeMu: Save and transactional writers (Writing) write under its
	// read lock, Repair rewrites under its write lock, so a rewrite of
	// what is in memory never lands after (and over) a newer save, nor
	// misses one that is under way.
	writeMu sync.RWMutex
	id      [16]byte // of the offsets topic, under repairMu

	mu    sync.Mutex
	saved map[TP]int64
	ids   map[string]string // source topic -> topic ID the progress belongs to
	// read is where the last read of the topic ended, per partition;
	// written holds the partitions this Store saved since CatchUp began.
	read    map[int32]int64
	written map[TP]bool
	// acked is, per partition of the offsets topic, the highest offset
	// the target acknowledged to this Store's producer (see produce);
	// emptied when the topic is made again.
	acked   map[int32]int64
	problem string // see Problem
	// shared: several workers share the flow's partitions (Options.Shared);
	// owned holds the partitions this worker copies now (Own, Disown).
	shared bool
	owned  map[TP]bool
}

// Options describe where progress lives.
type Options struct {
	Topic             string // mm2-offsets.<source>.internal
	Source            string // source cluster alias, the "cluster" field of each key
	Partitions        int32  // used only when the topic is created
	ReplicationFactor int16  // used only when the topic is created; -1 is the broker default
	// Missing, if set, is called with true when the topic is found
	// missing on the target (see Repair) and with false once the
	// progress is written to it again; Recreated once it was made again.
	Missing   func(missing bool)
	Recreated func()
	// Shared: several workers share the flow's partitions (group mode).
	// Repair then writes back only the progress of the partitions this
	// worker holds (Own): what it holds of the others' may be older than
	// what their owners saved since, and their owners write theirs.
	Shared bool
}

// newTopicWait bounds how long Open waits for every broker to know the
// offsets topic.
const newTopicWait = 30 * time.Second

// newTopicRetry retries within newTopicWait.
var newTopicRetry = backoff.Policy{First: 100 * time.Millisecond, Max: time.Second, For: newTopicWait}

// Open makes sure the offsets topic exists on the target, then reads every
// progress record of o.Source from it. connect are the target's connection
// options; producer must be a client on the target whose partitioner honours
// Record.Partition. Malformed records are skipped with a warning.
func Open(ctx context.Context, adm *kadm.Client, connect []kgo.Opt, producer *kgo.Client, o Options, log *slog.Logger) (*Store, error) {
	parts, err := ensureTopic(ctx, adm, o)
	if err != nil {
		return nil, err
	}
	s := &Store{topic: o.Topic, source: o.Source, parts: parts, cl: producer, connect: connect, log: log,
		adm: adm, spec: topicSpec(o), onMissing: o.Missing, onRecreated: o.Recreated, shared: o.Shared, owned: make(map[TP]bool)}
	s.id = s.learnID(ctx)
	s.saved, s.ids, s.acked = make(map[TP]int64), make(map[string]string), make(map[int32]int64)
	// The topic exists now, but right after its creation a broker may not
	// know it yet (UNKNOWN_TOPIC_OR_PARTITION on a 3-node target).
	var ch changes
	var ends map[int32]int64
	unknown := func(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }
	if err := backoff.Retry(ctx, newTopicRetry, unknown, func() (err error) {
		ch, ends, err = read(ctx, connect, o.Topic, o.Source, nil, log)
		return err
	}); err != nil {
		return nil, err
	}
	ch.applyTo(s.saved, s.ids, nil)
	s.read = ends
	return s, nil
}

// CatchUp reads what was written to the topic since the last read: the
// saves of other workers sharing the flow, so that a partition handed over
// by one resumes where that one left it rather than where this Store last
// saw it. Partitions this Store saves meanwhile keep their own value.
// Calls run one at a time.
//
// It first makes sure the topic is the one it read (Check): one deleted
// and made again since, by another worker's repair, is repaired here too,
// which has the read start from the new topic's start; the offsets where
// the read of the old topic ended mean nothing in the new one, and reading
// from them would miss what the other workers wrote back and saved there.
func (s *Store) CatchUp(ctx context.Context) error {
	if err := s.Check(ctx); err != nil {
		return err
	}
	s.catchMu.Lock()
	defer s.catchMu.Unlock()
	s.mu.Lock()
	from := maps.Clone(s.read)
	s.written = make(map[TP]bool)
	s.mu.Unlock()
	ch, ends, err := read(ctx, s.connect, s.topic, s.source, from, s.log)
	s.mu.Lock()
	defer s.mu.Unlock()
	written := s.written
	s.written = nil
	if err != nil {
		return err
	}
	ch.applyTo(s.saved, s.ids, written)
	s.read = ends
	return nil
}

// Read returns the progress saved for source in topic, without writing
// anything: what kmirror (or MM2) has copied, per source partition.
func Read(ctx context.Context, connect []kgo.Opt, topic, source string, log *slog.Logger) (map[TP]int64, error) {
	ch, _, err := read(ctx, connect, topic, source, nil, log)
	if err != nil {
		return nil, err
	}
	saved := make(map[TP]int64)
	ch.applyTo(saved, make(map[string]string), nil)
	return saved, nil
}

// changes is what one read of the offsets topic found for a source, the
// newest record per key; deletedOffset and "" stand for deleted records.
type changes struct {
	saved map[TP]int64
	ids   map[string]string
}

// deletedOffset marks progress whose record was deleted (a tombstone).
const deletedOffset = math.MinInt64

// applyTo merges c into saved and ids, leaving the partitions in skip as
// they are.
func (c changes) applyTo(saved map[TP]int64, ids map[string]string, skip map[TP]bool) {
	for tp, off := range c.saved {
		switch {
		case skip[tp]:
		case off == deletedOffset:
			delete(saved, tp)
		default:
			saved[tp] = off
		}
	}
	for t, id := range c.ids {
		if id == "" {
			delete(ids, t)
		} else {
			ids[t] = id
		}
	}
}

// read collects the records of source in offsetsTopic from the offsets in
// from (the log start when nil) and returns where each partition ended.
func read(ctx context.Context, connect []kgo.Opt, offsetsTopic, source string, from map[int32]int64, log *slog.Logger) (changes, map[int32]int64, error) {
	ch := changes{saved: make(map[TP]int64), ids: make(map[string]string)}
	ends, err := readlog.From(ctx, connect, offsetsTopic, from, func(r *kgo.Record) {
		if cluster, topic, ok := decodeTopicIDKey(r.Key); ok {
			if cluster == source {
				id, _ := decodeTopicIDValue(r.Value) // "" if deleted
				ch.ids[topic] = id
			}
			return
		}
		conn, cluster, topic, part, err := wire.DecodeSourceOffsetKey(r.Key)
		if err != nil {
			// Other connectors' keys (checkpoints, heartbeats) do
			// not decode as source keys; only log real garbage.
			log.Debug("skipping offsets record", "topic", offsetsTopic, "partition", r.Partition, "offset", r.Offset, "err", err)
			return
		}
		if conn != wire.SourceConnector || cluster != source {
			return
		}
		tp := TP{topic, part}
		off, err := wire.DecodeOffsetValue(r.Value)
		if errors.Is(err, wire.ErrOffsetDeleted) {
			ch.saved[tp] = deletedOffset
			return
		}
		if err != nil {
			log.Warn("skipping malformed progress record", "topic", offsetsTopic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
			return
		}
		ch.saved[tp] = off
	})
	if err != nil {
		return ch, nil, fmt.Errorf("reading progress from %s: %w", offsetsTopic, err)
	}
	return ch, ends, nil
}

// Get returns the last replicated offset of tp, if any was saved.
func (s *Store) Get(tp TP) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.saved[tp]
	return off, ok
}

// Save writes every offset that differs from what is saved and waits until
// the target has acknowledged all of them.
func (s *Store) Save(ctx context.Context, offsets map[TP]int64) error {
	s.mu.Lock()
	var recs []*kgo.Record
	for tp, off := range offsets {
		if old, ok := s.saved[tp]; ok && old == off {
			continue
		}
		recs = append(recs, s.record(tp, off))
	}
	s.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	err := s.write(ctx, recs, offsets)
	if err == nil {
		return nil
	}
	if !kafkaerr.TopicGone(err) {
		return fmt.Errorf("saving progress to %s: %w", s.topic, err)
	}
	// The topic was deleted on the target: made again with everything
	// in memory, then these offsets are written.
	rewrote, rerr := s.Repair(ctx)
	if rerr != nil {
		return fmt.Errorf("saving progress to %s: %w (making the topic again: %v)", s.topic, err, rerr)
	}
	if !rewrote {
		return fmt.Errorf("saving progress to %s: %w", s.topic, err)
	}
	if err := s.write(ctx, recs, offsets); err != nil {
		return fmt.Errorf("saving progress to %s: %w", s.topic, err)
	}
	return nil
}

// write produces recs and, once they are acknowledged, records offsets as
// saved, under writeMu's read lock (see Repair).
func (s *Store) write(ctx context.Context, recs []*kgo.Record, offsets map[TP]int64) error {
	s.writeMu.RLock()
	defer s.writeMu.RUnlock()
	if err := s.produce(ctx, recs); err != nil {
		return err
	}
	s.Saved(offsets)
	return nil
}

// errDuplicate: the target acknowledged a progress record as a duplicate
// of an earlier one without writing it.
var errDuplicate = errors.New("the target took a progress record for a duplicate of an earlier one and did not write it")

// produce writes recs with the Store's producer and makes sure each landed:
// a record acknowledged at an offset at or below one this producer was
// acknowledged in that partition before was taken by the broker as a
// duplicate of an earlier batch with the same producer ID, epoch and
// sequence numbers (an idempotent producer that numbers from 0 again
// under the same epoch), and was not written. That is an error: the
// caller does not mark it saved, and writes it again, with the next
// sequence numbers, at the next try.
func (s *Store) produce(ctx context.Context, recs []*kgo.Record) error {
	s.mu.Lock()
	before := maps.Clone(s.acked)
	s.mu.Unlock()
	rs := s.cl.ProduceSync(ctx, recs...)
	var dup *kgo.Record
	s.mu.Lock()
	for _, r := range rs {
		if r.Err != nil {
			continue
		}
		p, off := r.Record.Partition, r.Record.Offset
		if last, ok := before[p]; ok && off <= last {
			dup = r.Record
			continue
		}
		if last, ok := s.acked[p]; !ok || off > last {
			s.acked[p] = off
		}
	}
	s.mu.Unlock()
	if err := rs.FirstErr(); err != nil {
		return err
	}
	if dup != nil {
		s.log.Warn("a progress record was acknowledged as a duplicate and not written; it is written again at the next save",
			"topic", s.topic, "partition", dup.Partition, "offset", dup.Offset, "key", string(dup.Key))
		return fmt.Errorf("%w (partition %d, offset %d)", errDuplicate, dup.Partition, dup.Offset)
	}
	return nil
}

// SaveAndSync saves offsets, then publishes the offset syncs that waited
// for a save (offsetsync.Writer.Flush), so that the newest position of a
// quiet partition is published. A sync due by MM2's rules went out when
// its record was acknowledged and may be ahead of the saved progress; in
// exactly-once mode every sync waits for its commit instead
// (HoldUntilFlush). syncs may be nil.
func (s *Store) SaveAndSync(ctx context.Context, offsets map[TP]int64, syncs *offsetsync.Writer) error {
	if err := s.Save(ctx, offsets); err != nil {
		return err
	}
	if syncs != nil {
		return syncs.Flush(ctx)
	}
	return nil
}

// Writing is for callers that write progress records themselves (Record,
// inside a transaction): it holds off Repair's rewrite of the progress in
// memory until done is called, after Saved. Without it a rewrite could
// land after a committed transaction's newer progress, and over it.
func (s *Store) Writing() (done func()) {
	s.writeMu.RLock()
	return s.writeMu.RUnlock
}

// Record returns the progress record for tp at offset off, for callers that
// write it themselves (inside a transaction).
func (s *Store) Record(tp TP, off int64) *kgo.Record { return s.record(tp, off) }

// Saved records offsets written by a caller through Record.
func (s *Store) Saved(offsets map[TP]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, off := range offsets {
		s.saved[tp] = off
		if s.written != nil {
			s.written[tp] = true
		}
	}
}

// Own records that this worker copies tps now (the group assigned them and
// the data path starts them): with Options.Shared, Repair writes back
// their progress, and only theirs. Call it after reading their progress
// (CatchUp), before their first save.
func (s *Store) Own(tps []TP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tp := range tps {
		s.owned[tp] = true
	}
}

// Disown records that this worker no longer copies tps (revoked, lost, or
// their topic gone), once their final progress is saved: Repair no longer
// writes it back, or it could land over what their next owner saved.
func (s *Store) Disown(tps []TP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tp := range tps {
		delete(s.owned, tp)
	}
}

// TopicID returns the ID of the source topic whose progress is saved under
// topic's name, if kmirror recorded one.
func (s *Store) TopicID(topic string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.ids[topic]
	return id, ok
}

// SaveTopicID records that the progress saved for topic belongs to the
// source topic with this ID: a topic deleted and re-created under the same
// name gets a new ID, and its old progress must not be used. Like Save, it
// repairs the offsets topic if it was deleted on the target (Repair), then
// writes the ID again.
func (s *Store) SaveTopicID(ctx context.Context, topic, id string) error {
	err := s.writeTopicID(ctx, topic, id)
	if err == nil {
		return nil
	}
	if !kafkaerr.TopicGone(err) {
		return fmt.Errorf("saving topic ID to %s: %w", s.topic, err)
	}
	// Repair makes the topic again (or, if it is there, makes the
	// producer look it up again); either way one more write may pass.
	if _, rerr := s.Repair(ctx); rerr != nil {
		return fmt.Errorf("saving topic ID to %s: %w (making the topic again: %v)", s.topic, err, rerr)
	}
	if err := s.writeTopicID(ctx, topic, id); err != nil {
		return fmt.Errorf("saving topic ID to %s: %w", s.topic, err)
	}
	return nil
}

// writeTopicID produces the topic ID record and, once acknowledged, keeps
// the ID in memory, under writeMu's read lock (see Repair).
func (s *Store) writeTopicID(ctx context.Context, topic, id string) error {
	key := topicIDKey(s.source, topic)
	rec := &kgo.Record{Topic: s.topic, Partition: wire.ConnectPartition(key, s.parts), Key: key, Value: topicIDValue(id)}
	s.writeMu.RLock()
	defer s.writeMu.RUnlock()
	if err := s.produce(ctx, []*kgo.Record{rec}); err != nil {
		return err
	}
	s.mu.Lock()
	s.ids[topic] = id
	s.mu.Unlock()
	return nil
}

func (s *Store) record(tp TP, off int64) *kgo.Record {
	key := wire.SourceOffsetKey(s.source, tp.Topic, tp.Partition)
	return &kgo.Record{
		Topic:     s.topic,
		Partition: wire.ConnectPartition(key, s.parts),
		Key:       key,
		Value:     wire.OffsetValue(off),
	}
}

// topicSpec is how the offsets topic is created: compacted, as Connect's.
func topicSpec(o Options) internaltopic.Spec {
	return internaltopic.Spec{Name: o.Topic, Partitions: o.Partitions, ReplicationFactor: o.ReplicationFactor,
		RFKey: "offset.storage.replication.factor", Configs: map[string]string{"cleanup.policy": "compact"}}
}

func ensureTopic(ctx context.Context, adm *kadm.Client, o Options) (int32, error) {
	if _, err := internaltopic.Create(ctx, adm, topicSpec(o)); err != nil {
		return 0, fmt.Errorf("progress topic: %w", err)
	}
	return internaltopic.Partitions(ctx, adm, o.Topic)
}

// kmirror keeps the topic ID next to MM2's records, under a namespace of its
// own that MM2's Connect worker reads and never uses:
//
//	["kmirror-topic-id",{"cluster":"A","topic":"t"}] -> {"id":"..."}
const topicIDNamespace = "kmirror-topic-id"

func topicIDKey(cluster, topic string) []byte {
	b, _ := json.Marshal([]any{topicIDNamespace, struct {
		Cluster string `json:"cluster"`
		Topic   string `json:"topic"`
	}{cluster, topic}})
	return b
}

func decodeTopicIDKey(key []byte) (cluster, topic string, ok bool) {
	var parts []json.RawMessage
	if json.Unmarshal(key, &parts) != nil || len(parts) != 2 {
		return "", "", false
	}
	var ns string
	if json.Unmarshal(parts[0], &ns) != nil || ns != topicIDNamespace {
		return "", "", false
	}
	var m struct{ Cluster, Topic string }
	if json.Unmarshal(parts[1], &m) != nil {
		return "", "", false
	}
	return m.Cluster, m.Topic, true
}

func topicIDValue(id string) []byte {
	b, _ := json.Marshal(struct {
		ID string `json:"id"`
	}{id})
	return b
}

func decodeTopicIDValue(v []byte) (string, bool) {
	var m struct{ ID string }
	if v == nil || json.Unmarshal(v, &m) != nil || m.ID == "" {
		return "", false
	}
	return m.ID, true
}

package progress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/wire"
)

// Problem says why the progress cannot be saved now (the topic is missing
// on the target and could not be made again yet), or "" when it can.
func (s *Store) Problem() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.problem
}

// Topic is the name of the offsets topic.
func (s *Store) Topic() string { return s.topic }

// Check makes sure the offsets topic is still there as it was, and repairs
// it (Repair) if it was deleted or created again: the flow asks once per
// topic refresh, so that the topic deleted while no progress moves is
// noticed too. It costs one metadata request.
func (s *Store) Check(ctx context.Context) error {
	s.repairMu.Lock()
	known := s.id
	s.repairMu.Unlock()
	st, _, err := s.describe(ctx, known)
	if err != nil || st == present {
		return nil // unreachable, or an error that does not say it is gone
	}
	_, err = s.Repair(ctx)
	return err
}

// Repair is called when writing progress failed because the target does
// not know the offsets topic (kafkaerr.TopicGone). If the topic was deleted, it
// creates it again, with its partition count and compaction, and writes
// the progress and topic IDs this Store holds in memory (with
// Options.Shared, the progress of the partitions it owns only, see
// rewrite); if it was created again by someone else (a new topic ID), it
// writes them as well.
// It reports whether it rewrote the progress. Until it succeeds, Problem
// names the cause. Calls run one at a time.
func (s *Store) Repair(ctx context.Context) (bool, error) {
	s.repairMu.Lock()
	defer s.repairMu.Unlock()
	st, id, err := s.describe(ctx, s.id)
	if err != nil {
		return false, fmt.Errorf("checking progress topic %s: %w", s.topic, err)
	}
	if st == present {
		// Not gone: a metadata hiccup, or another Repair made it
		// again first (and its rewrite had the producer look it up).
		// The producer must not forget a topic it has written to: it
		// would number its batches from 0 again under the same
		// producer ID, and the broker would acknowledge a batch that
		// matches one it holds as a duplicate, without writing it.
		// Not even when the Store has not learned the topic's ID yet
		// (a broker that did not know the topic a moment after its
		// creation): it learns it now.
		if s.id == ([16]byte{}) {
			s.id = id
		}
		return false, nil
	}
	if st == missing {
		s.setProblem(fmt.Sprintf("progress topic %s is missing on the target; it is created again and the progress held in memory written to it", s.topic))
		s.log.Error("progress topic was deleted on the target: creating it again and writing the progress held in memory; until then a restart would not know where partitions stand",
			"topic", s.topic, "partitions", s.parts)
		if repairPause > 0 {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(repairPause):
			}
		}
		spec := s.spec
		spec.Partitions = s.parts // keys must land where they did
		if _, err := internaltopic.CreateOnce(ctx, s.adm, spec); err != nil {
			return false, fmt.Errorf("creating progress topic %s again: %w", s.topic, err)
		}
	} else {
		s.log.Warn("progress topic was deleted and created again on the target behind kmirror: writing the progress held in memory to it", "topic", s.topic)
	}
	s.writeMu.Lock() // no save under way: the rewrite holds the newest
	n, err := s.rewrite(ctx)
	s.writeMu.Unlock()
	if err != nil {
		s.setProblem(fmt.Sprintf("progress topic %s was deleted on the target; writing the progress held in memory failed: %v", s.topic, err))
		return false, err
	}
	s.id = s.learnID(ctx)
	s.setProblem("")
	if s.onRecreated != nil {
		s.onRecreated()
	}
	s.log.Warn("progress topic made again on the target; the progress held in memory is written", "topic", s.topic, "partitions_written", n)
	return true, nil
}

// repairPause is zero but in a failpoints build (failpoint.go).
var repairPause time.Duration

func (s *Store) setProblem(p string) {
	s.mu.Lock()
	changed := (s.problem == "") != (p == "")
	s.problem = p
	s.mu.Unlock()
	if changed && s.onMissing != nil {
		s.onMissing(p != "")
	}
}

// rewrite writes the progress and topic IDs in memory to the offsets
// topic, which was just created, and reads it from its start at the next
// CatchUp. It returns how many progress records it wrote.
//
// With Options.Shared it writes the progress of the partitions this worker
// owns (Own) only: the progress held of the other workers' partitions came
// from reading theirs earlier and may be older than what they saved since;
// each worker's repair writes its own, and a stale value written last
// would have the partition's next owner copy its records again. An owned
// partition's value is the one this worker last saved, or read when it
// took the partition; a CatchUp since replaces it only with a record
// written after that save (CatchUp keeps the saves made while it reads),
// such as an exactly-once commit whose outcome was unsure.
func (s *Store) rewrite(ctx context.Context) (int, error) {
	// The producer keeps the deleted topic's ID until it forgets it
	// (kgo does not adopt a new ID for a topic it holds), so it has not
	// written to the new topic: its sequence numbers start at 0 there.
	s.cl.PurgeTopicsFromProducing(s.topic)
	s.mu.Lock()
	var recs []*kgo.Record
	for tp, off := range s.saved {
		if s.shared && !s.owned[tp] {
			continue
		}
		recs = append(recs, s.record(tp, off))
	}
	n := len(recs)
	for topic, id := range s.ids {
		key := topicIDKey(s.source, topic)
		recs = append(recs, &kgo.Record{Topic: s.topic, Partition: wire.ConnectPartition(key, s.parts), Key: key, Value: topicIDValue(id)})
	}
	s.read = make(map[int32]int64)
	s.acked = make(map[int32]int64) // the new topic's offsets start at 0
	s.mu.Unlock()
	// A topic created a moment ago may be unknown to some brokers.
	if err := backoff.Retry(ctx, newTopicRetry, kafkaerr.TopicGone, func() error {
		return s.produce(ctx, recs)
	}); err != nil {
		return 0, err
	}
	return n, nil
}

// learnID returns the ID of the offsets topic, which exists (it was just
// created or written), retrying while a broker does not know it yet; zero
// if it cannot tell. Later Repairs compare against it, and one that finds
// the topic there must not have to guess whether the producer holds an
// outdated ID.
func (s *Store) learnID(ctx context.Context) [16]byte {
	var id [16]byte
	_ = backoff.Retry(ctx, newTopicRetry, func(err error) bool { return errors.Is(err, errNotKnownYet) }, func() error {
		st, got, err := s.describe(ctx, [16]byte{})
		switch {
		case err != nil:
			return err
		case st == missing:
			return errNotKnownYet
		}
		id = got
		return nil
	})
	return id
}

var errNotKnownYet = errors.New("the broker does not know the topic yet")

// state is what the target says of the offsets topic.
type state int

const (
	present  state = iota // there, with the ID the Store knows (or it knows none)
	missing               // deleted
	replaced              // there with another ID: deleted and created again
)

// describe asks a broker straight about the offsets topic (kgo would
// answer a metadata request through the client from its cache for a
// while); known is the topic ID the Store knows, zero for none.
func (s *Store) describe(ctx context.Context, known [16]byte) (state, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := clients.Metadata(ctx, s.cl, req)
	if err != nil {
		return present, [16]byte{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != s.topic {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return missing, [16]byte{}, nil
		case err != nil:
			return present, [16]byte{}, err
		case known != [16]byte{} && t.TopicID != [16]byte{} && t.TopicID != known:
			return replaced, t.TopicID, nil
		}
		return present, t.TopicID, nil
	}
	return missing, [16]byte{}, nil
}

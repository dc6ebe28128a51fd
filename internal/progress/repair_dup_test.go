package progress

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRepairKeepsSequences: a Repair that finds the offsets topic there
// (a metadata hiccup, or another Repair made it again first) must not make
// the producer forget the topic. Forgetting it restarts the idempotent
// producer's sequence numbers at 0 under the same producer ID and epoch,
// and the broker acknowledges the next batch of the same size as a
// duplicate of the first one it holds, without writing it: the save
// reports success and its progress never reaches the topic.
func TestRepairKeepsSequences(t *testing.T) {
	for _, tt := range []struct {
		name   string
		delete bool // deleted, made again by Check, then the late Repair
		// noID: the Store has not learned the topic's ID (a broker
		// did not know the topic yet when it asked).
		noID bool
	}{
		{"a repair while the topic is there", false, false},
		{"a repair after another one made the topic again", true, false},
		{"a repair after another one, the topic's ID not learned", true, true},
		{"a repair while the topic is there, its ID not learned", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, connect, adm, log, a := savedOnce(t)
			if tt.delete {
				if _, err := adm.DeleteTopics(ctx, topic); err != nil {
					t.Fatal(err)
				}
				if err := s.Check(ctx); err != nil { // made again, 10 written
					t.Fatal(err)
				}
			}
			if tt.noID {
				s.id = [16]byte{}
			}
			// The save that found the topic gone repairs it late: the
			// topic is there.
			if rewrote, err := s.Repair(ctx); err != nil || rewrote {
				t.Fatalf("Repair with the topic there: rewrote %v, err %v; want false, nil", rewrote, err)
			}
			if err := s.Save(ctx, map[TP]int64{a: 11}); err != nil {
				t.Fatal(err)
			}
			got, err := Read(ctx, connect, topic, "A", log)
			if err != nil {
				t.Fatal(err)
			}
			if got[a] != 11 {
				t.Fatalf("progress of %s in the topic: %d, want 11: the save reported success but its record was taken as a duplicate", a, got[a])
			}
		})
	}
}

// TestSaveTakenForDuplicate: when the producer numbers its batches from 0
// again under the same producer ID and epoch (here: it forgets the topic),
// the broker acknowledges the next save as a duplicate of the first batch
// without writing it. That save must fail and leave the progress unsaved,
// so that the next one writes it.
func TestSaveTakenForDuplicate(t *testing.T) {
	ctx := context.Background()
	s, connect, _, log, a := savedOnce(t)
	s.cl.PurgeTopicsFromProducing(topic) // sequences from 0 again
	if err := s.Save(ctx, map[TP]int64{a: 11}); !errors.Is(err, errDuplicate) {
		t.Fatalf("Save taken for a duplicate returned %v, want errDuplicate", err)
	}
	if off, _ := s.Get(a); off != 10 {
		t.Fatalf("progress in memory after the lost save: %d, want 10", off)
	}
	if err := s.Save(ctx, map[TP]int64{a: 11}); err != nil {
		t.Fatalf("the next Save: %v", err)
	}
	got, err := Read(ctx, connect, topic, "A", log)
	if err != nil {
		t.Fatal(err)
	}
	if got[a] != 11 {
		t.Fatalf("progress of %s in the topic: %d, want 11", a, got[a])
	}
}

const topic = "mm2-offsets.A.internal"

// savedOnce opens a Store on a kfake target whose offsets topic has one
// partition (every record shares its sequence numbers) and saves 10 for a.
func savedOnce(t *testing.T) (s *Store, connect []kgo.Opt, adm *kadm.Client, log *slog.Logger, a TP) {
	t.Helper()
	connect, cl, adm := fakeTarget(t)
	log = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Open(context.Background(), adm, connect, cl, Options{Topic: topic, Source: "A", Partitions: 1, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	a = TP{"t", 0}
	if err := s.Save(context.Background(), map[TP]int64{a: 10}); err != nil {
		t.Fatal(err)
	}
	return s, connect, adm, log, a
}

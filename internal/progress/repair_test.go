package progress

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRepairDeletedTopic: the offsets topic deleted on the target is made
// again, with every progress held in memory, whether a save finds it gone
// or Check does while nothing moves; Missing and Recreated report it.
// A topic ID saved after the deletion (a flow starting or finding a new
// topic) repairs it the same way instead of failing the flow. A topic that
// is there is left alone.
func TestRepairDeletedTopic(t *testing.T) {
	for _, tt := range []struct {
		name      string
		delete    bool
		save      bool // else Check
		recreated int
		saveID    bool // SaveTopicID instead of Save or Check
	}{
		{"a save after the deletion", true, true, 1, false},
		{"a check after the deletion", true, false, 1, false},
		{"a check while the topic is there", false, false, 0, false},
		{"a topic ID saved after the deletion", true, false, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			connect, cl, adm := fakeTarget(t)
			var missing []bool
			recreated := 0
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			const topic = "mm2-offsets.A.internal"
			s, err := Open(ctx, adm, connect, cl, Options{Topic: topic, Source: "A", Partitions: 5, ReplicationFactor: 1,
				Missing: func(m bool) { missing = append(missing, m) }, Recreated: func() { recreated++ }}, log)
			if err != nil {
				t.Fatal(err)
			}
			a, b := TP{"t", 0}, TP{"t", 1}
			if err := s.Save(ctx, map[TP]int64{a: 10, b: 20}); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveTopicID(ctx, "t", "abc"); err != nil {
				t.Fatal(err)
			}
			if tt.delete {
				if _, err := adm.DeleteTopics(ctx, topic); err != nil {
					t.Fatal(err)
				}
			}
			want := map[TP]int64{a: 10, b: 20}
			if tt.saveID {
				if err := s.SaveTopicID(ctx, "u", "def"); err != nil {
					t.Fatalf("SaveTopicID after the deletion: %v", err)
				}
			} else if tt.save {
				if err := s.Save(ctx, map[TP]int64{a: 11, b: 20}); err != nil {
					t.Fatalf("Save after the deletion: %v", err)
				}
				want[a] = 11
			} else if err := s.Check(ctx); err != nil {
				t.Fatalf("Check: %v", err)
			}
			if recreated != tt.recreated {
				t.Errorf("Recreated called %d times, want %d", recreated, tt.recreated)
			}
			if tt.recreated > 0 && (len(missing) != 2 || !missing[0] || missing[1]) {
				t.Errorf("Missing called with %v, want [true false]", missing)
			}
			if p := s.Problem(); p != "" {
				t.Errorf("Problem %q after the repair, want none", p)
			}
			got, err := Read(ctx, connect, topic, "A", log)
			if err != nil {
				t.Fatal(err)
			}
			for tp, off := range want {
				if got[tp] != off {
					t.Errorf("progress of %s in the topic: %d, want %d (all %v)", tp, got[tp], off, got)
				}
			}
			parts, err := adm.ListTopics(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(parts[topic].Partitions); n != 5 {
				t.Errorf("topic has %d partitions, want 5", n)
			}
			// The topic ID is written again too: a new Store reads it.
			s2, err := Open(ctx, adm, connect, cl, Options{Topic: topic, Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
			if err != nil {
				t.Fatal(err)
			}
			if id, ok := s2.TopicID("t"); !ok || id != "abc" {
				t.Errorf("topic ID after the repair: %q %v, want abc", id, ok)
			}
			if id, ok := s2.TopicID("u"); tt.saveID && (!ok || id != "def") {
				t.Errorf("topic ID saved after the deletion: %q %v, want def", id, ok)
			}
		})
	}
}

// TestRepairWaitsForWriting: a transactional writer's progress written
// between the topic's re-creation and its Saved (Writing held) is not
// overwritten by the repair's rewrite of the older progress in memory.
func TestRepairWaitsForWriting(t *testing.T) {
	ctx := context.Background()
	connect, cl, adm := fakeTarget(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const topic = "mm2-offsets.A.internal"
	s, err := Open(ctx, adm, connect, cl, Options{Topic: topic, Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 0}
	if err := s.Save(ctx, map[TP]int64{tp: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	// A writer holds Writing; the topic is made again (by the repair's
	// first step, here by hand) and the writer's newer progress lands.
	done := s.Writing()
	if _, err := adm.CreateTopic(ctx, 5, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic); err != nil {
		t.Fatal(err)
	}
	repaired := make(chan error, 1)
	go func() { _, err := s.Repair(ctx); repaired <- err }()
	// The writer's producer is its own (it was told to forget the topic).
	wcl, err := kgo.NewClient(append(connect, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wcl.Close)
	if err := wcl.ProduceSync(ctx, s.Record(tp, 25)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-repaired:
		t.Fatalf("Repair returned (%v) while a writer held Writing", err)
	case <-time.After(200 * time.Millisecond):
	}
	s.Saved(map[TP]int64{tp: 25})
	done()
	if err := <-repaired; err != nil {
		t.Fatal(err)
	}
	got, err := Read(ctx, connect, topic, "A", log)
	if err != nil {
		t.Fatal(err)
	}
	if got[tp] != 25 {
		t.Fatalf("progress of %s after the repair: %d, want the writer's 25 (the rewrite put the older progress over it)", tp, got[tp])
	}
}

// fakeTarget starts a one-broker kfake cluster and returns its connection
// options, a producer that honours Record.Partition, and an admin client.
func fakeTarget(t *testing.T) ([]kgo.Opt, *kgo.Client, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	connect := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(append(connect, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.UnknownTopicRetries(1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return connect, cl, kadm.NewClient(cl)
}

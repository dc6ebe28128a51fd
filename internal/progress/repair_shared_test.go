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

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// target is a target cluster for Stores that share an offsets topic, as
// the workers of a flow in group mode do.
type target struct {
	connect []kgo.Opt
	adm     *kadm.Client
	topic   string
}

// targets are a kfake cluster and a real broker (testkafka.Shared).
var targets = []struct {
	name string
	make func(t *testing.T) target
}{
	{"kfake", func(t *testing.T) target {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		connect := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
		return target{connect, kadm.NewClient(newProducer(t, connect)), "mm2-offsets.A.internal"}
	}},
	{"kafka", func(t *testing.T) target {
		c := testkafka.Shared(t, 1)[0]
		connect := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...)}
		return target{connect, c.Admin(t), testkafka.Topic(t, "mm2-offsets")}
	}},
}

func newProducer(t *testing.T, connect []kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(connect, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.UnknownTopicRetries(1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// worker opens a shared Store on tg with a producer of its own.
func (tg target) worker(t *testing.T) *Store {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl := newProducer(t, tg.connect)
	s, err := Open(context.Background(), tg.adm, tg.connect, cl, Options{Topic: tg.topic, Source: "A", Partitions: 5, ReplicationFactor: 1, Shared: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (tg target) read(t *testing.T) map[TP]int64 {
	t.Helper()
	got, err := Read(context.Background(), tg.connect, tg.topic, "A", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// expect checks the progress in the topic after both workers repaired it:
// each partition at its owner's newest.
func (tg target) expect(t *testing.T, want map[TP]int64) {
	t.Helper()
	got := tg.read(t)
	for tp, off := range want {
		if got[tp] != off {
			t.Errorf("progress of %s after both repairs: %d, want its owner's %d (all %v)", tp, got[tp], off, got)
		}
	}
}

// deleteTopic deletes the offsets topic and waits until s's broker no
// longer knows it.
func (tg target) deleteTopic(t *testing.T, s *Store) {
	t.Helper()
	rs, err := tg.adm.DeleteTopics(context.Background(), tg.topic)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	// A real broker may list the topic a moment longer.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		st, _, err := s.describe(ctx, [16]byte{})
		if err == nil && st == missing {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still listed after its deletion (err %v)", tg.topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestRepairSharedWritesOwnOnly: two workers share a flow, each owning one
// partition and having read the other's progress (CatchUp) before it moved
// on. The offsets topic is deleted and both repair it, in either order:
// each partition ends at its owner's newest progress. On the old code the
// second repair wrote its stale copy of the other's partition over the
// owner's value, and that partition's next owner copied its records again.
func TestRepairSharedWritesOwnOnly(t *testing.T) {
	for _, tg := range targets {
		for _, tt := range []struct {
			name  string
			first int // which worker repairs first
		}{
			{"a repairs first", 0},
			{"b repairs first", 1},
		} {
			t.Run(tg.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				tgt := tg.make(t)
				p0, p1 := TP{"t", 0}, TP{"t", 1}
				a, b := tgt.worker(t), tgt.worker(t)
				a.Own([]TP{p0})
				b.Own([]TP{p1})
				save(t, a, p0, 10)
				save(t, b, p1, 20)
				for _, s := range []*Store{a, b} {
					if err := s.CatchUp(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if off, _ := a.Get(p1); off != 20 {
					t.Fatalf("a holds %d for b's %s after CatchUp, want 20", off, p1)
				}
				save(t, a, p0, 15)
				save(t, b, p1, 25) // a still holds 20 for p1, b 10 for p0
				tgt.deleteTopic(t, a)
				ws := []*Store{a, b}
				for _, s := range []*Store{ws[tt.first], ws[1-tt.first]} {
					if err := s.Check(ctx); err != nil {
						t.Fatal(err)
					}
				}
				tgt.expect(t, map[TP]int64{p0: 15, p1: 25})
			})
		}
	}
}

// TestRepairSkipsDisowned: a partition handed back (Disown, after its final
// save) is no longer written by its former owner's repair: the topic holds
// only the partitions it still owns, and its next owner's newer progress
// stays once that one repairs too, whichever repairs first.
func TestRepairSkipsDisowned(t *testing.T) {
	for _, tg := range targets {
		for _, tt := range []struct {
			name     string
			newFirst bool // the new owner repairs first
		}{
			{"old owner repairs first", false},
			{"new owner repairs first", true},
		} {
			t.Run(tg.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				tgt := tg.make(t)
				p0, p1 := TP{"t", 0}, TP{"t", 1}
				a, b := tgt.worker(t), tgt.worker(t)
				a.Own([]TP{p0, p1})
				save(t, a, p0, 10)
				save(t, a, p1, 20) // p1's final save, then it is revoked
				a.Disown([]TP{p1})
				if err := b.CatchUp(ctx); err != nil {
					t.Fatal(err)
				}
				b.Own([]TP{p1})
				save(t, b, p1, 30)
				tgt.deleteTopic(t, a)
				old, next := a, b
				if tt.newFirst {
					if err := next.Check(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := old.Check(ctx); err != nil {
					t.Fatal(err)
				}
				if !tt.newFirst {
					got := tgt.read(t)
					if got[p0] != 10 {
						t.Errorf("progress of %s after a's repair: %d, want 10 (all %v)", p0, got[p0], got)
					}
					if off, ok := got[p1]; ok {
						t.Errorf("a's repair wrote %d for %s, which it handed back", off, p1)
					}
					if err := next.Check(ctx); err != nil {
						t.Fatal(err)
					}
				}
				tgt.expect(t, map[TP]int64{p0: 10, p1: 30})
			})
		}
	}
}

func save(t *testing.T, s *Store, tp TP, off int64) {
	t.Helper()
	if err := s.Save(context.Background(), map[TP]int64{tp: off}); err != nil {
		t.Fatal(err)
	}
}

// TestCatchUpAfterRecreation: a worker that has not noticed the offsets
// topic was deleted and made again (no save of its own since) is assigned
// a partition and catches up: it must read the new topic from its start,
// where the owner's repair and later saves are, not from where it stopped
// reading the old topic (an offset past the new topic's end there, which
// read nothing and left it with its older view).
func TestCatchUpAfterRecreation(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			tgt := tg.make(t)
			p0 := TP{"t", 0}
			a, b := tgt.worker(t), tgt.worker(t)
			a.Own([]TP{p0})
			for _, off := range []int64{10, 11, 12} {
				save(t, a, p0, off)
			}
			if err := b.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			tgt.deleteTopic(t, a)
			if err := a.Check(ctx); err != nil { // made again: 12
				t.Fatal(err)
			}
			save(t, a, p0, 13)
			a.Disown([]TP{p0}) // handed over to b
			if err := b.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			if off, _ := b.Get(p0); off != 13 {
				t.Fatalf("b resumes %s from %d after CatchUp, want a's last save 13", p0, off)
			}
		})
	}
}

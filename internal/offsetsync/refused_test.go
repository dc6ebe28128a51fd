package offsetsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestRefusedSyncsSentAgain: a sync the target refuses is sent again at
// the next flush, with the syncs of its partition sent after it, so the
// topic ends with every sync in order and none is lost. A loaded make
// test found a quiet partition's only sync refused (its topic just made,
// not known to the broker yet) and no checkpoint of its group ever after.
func TestRefusedSyncsSentAgain(t *testing.T) {
	type op struct {
		do   string // "ack", "flush", "refused" (wait for n refusals)
		part int32
		up   int64
	}
	for _, tt := range []struct {
		name    string
		hold    bool
		refuse  int // produce requests refused
		ops     []op
		want    []string // partition:upstream of the syncs, in order, the topic's last records
		refused int64
	}{
		{"a quiet partition's only sync", false, 1,
			[]op{{"ack", 0, 5}, {"refused", 1, 0}, {"flush", 0, 0}}, []string{"0:5"}, 1},
		{"refused twice", false, 2,
			[]op{{"ack", 0, 5}, {"refused", 1, 0}, {"flush", 0, 0}, {"refused", 2, 0}, {"flush", 0, 0}}, []string{"0:5"}, 2},
		{"a later sync goes after the refused one", false, 1,
			[]op{{"ack", 0, 5}, {"refused", 1, 0}, {"ack", 0, 7}, {"flush", 0, 0}}, []string{"0:5", "0:7"}, 1},
		{"other partitions are not held back", false, 1,
			[]op{{"ack", 0, 5}, {"refused", 1, 0}, {"ack", 1, 3}, {"flush", 0, 0}}, []string{"0:5", "1:3"}, 1},
		// Exactly-once: every held sync may be a run boundary.
		{"held syncs, in order", true, 1,
			[]op{{"ack", 0, 5}, {"ack", 0, 7}, {"ack", 0, 9}, {"flush", 0, 0}, {"refused", 3, 0}, {"flush", 0, 0}}, []string{"0:5", "0:7", "0:9"}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, cl := testkafka.Fake(t, kfake.SeedTopics(1, "syncs"))
			testkafka.FailProduce(c, kerr.TopicAuthorizationFailed, tt.refuse)
			var logs testkafka.Logs
			var refused atomic.Int64
			w := New(cl, "syncs", 100, logs.Logger(), func() { refused.Add(1) })
			if tt.hold {
				w.HoldUntilFlush()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, o := range tt.ops {
				switch o.do {
				case "ack":
					w.Acked("t", o.part, o.up, o.up)
				case "flush":
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				case "refused":
					for refused.Load() < int64(o.part) {
						if ctx.Err() != nil {
							t.Fatalf("%d syncs refused, want %d", refused.Load(), o.part)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := refused.Load(); got != tt.refused {
				t.Errorf("%d syncs refused, want %d", got, tt.refused)
			}
			got := readSyncs(ctx, t, c)
			if len(got) < len(tt.want) || !slices.Equal(got[len(got)-len(tt.want):], tt.want) {
				t.Errorf("syncs written %v, want them to end with %v", got, tt.want)
			}
		})
	}
}

// TestRefusedIndexEntriesSentAgain: in exact mode an offset index entry
// the target refuses is written at the next flush, as a sync is: the
// index keeps the run boundaries a reader needs after a restart.
func TestRefusedIndexEntriesSentAgain(t *testing.T) {
	c, cl := testkafka.Fake(t, kfake.SeedTopics(1, "syncs", "index"))
	testkafka.FailProduce(c, kerr.TopicAuthorizationFailed, 1)
	var logs testkafka.Logs
	var refused atomic.Int64
	w := New(cl, "syncs", 100, logs.Logger(), func() { refused.Add(1) })
	w.EnableExact(cl, "index")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w.Acked("t", 0, 5, 5) // a first record: a boundary, due and indexed
	for refused.Load() < 1 {
		if ctx.Err() != nil {
			t.Fatal("nothing refused")
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readSyncs(ctx, t, c, "index"); !slices.Equal(got, []string{"0:5"}) {
		t.Errorf("index holds %v, want [0:5]", got)
	}
	if got := readSyncs(ctx, t, c); !slices.Equal(got, []string{"0:5"}) {
		t.Errorf("syncs topic holds %v, want [0:5]", got)
	}
}

// readSyncs returns partition:upstream of every sync in the topic syncs
// (or the one named), read up to its end.
func readSyncs(ctx context.Context, t *testing.T, c *kfake.Cluster, topic ...string) []string {
	name := "syncs"
	if len(topic) > 0 {
		name = topic[0]
	}
	t.Helper()
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ends, err := kadm.NewClient(rd).ListEndOffsets(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(name, 0)
	var got []string
	for next := int64(0); next < end.Offset; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of %s", next, end.Offset, name)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if s, err := wire.DecodeOffsetSync(r.Key, r.Value); err == nil {
				got = append(got, fmt.Sprintf("%d:%d", s.Partition, s.UpstreamOffset))
			}
		})
	}
	return got
}

// TestAnswered: a written item leaves the in-flight list; a refused one
// goes back to the head of the due list with every item sent after it,
// at most maxPending of them; an item not in flight changes nothing.
func TestAnswered(t *testing.T) {
	s := func(ups ...int64) []wire.OffsetSync {
		var out []wire.OffsetSync
		for _, u := range ups {
			out = append(out, wire.OffsetSync{Topic: "t", UpstreamOffset: u})
		}
		return out
	}
	refused := errors.New("refused")
	long := make([]int64, maxPending)
	for i := range long {
		long[i] = int64(100 + i)
	}
	for _, tt := range []struct {
		name            string
		inflight, due   []wire.OffsetSync
		x               int64
		err             error
		wantIn, wantDue []wire.OffsetSync
		wantDropped     int
	}{
		{"written", s(1, 2, 3), s(9), 1, nil, s(2, 3), s(9), 0},
		{"refused with those after it", s(1, 2, 3), s(9), 2, refused, s(1), s(2, 3, 9), 0},
		{"not in flight", s(1, 2), s(9), 5, refused, s(1, 2), s(9), 0},
		{"the oldest past maxPending dropped", s(1, 2), s(long...), 1, refused, s(), s(long...), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, due, dropped := answered(tt.inflight, tt.due, wire.OffsetSync{Topic: "t", UpstreamOffset: tt.x}, tt.err)
			if !slices.Equal(in, tt.wantIn) || !slices.Equal(due, tt.wantDue) || dropped != tt.wantDropped {
				t.Errorf("got in flight %d, due %d (first %v), dropped %d; want %d, %d, %d", len(in), len(due), due[:min(1, len(due))], dropped, len(tt.wantIn), len(tt.wantDue), tt.wantDropped)
			}
		})
	}
}

package offsetsync

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHoldUntilFlush: with HoldUntilFlush (exactly-once) a due sync is not
// written until a flush, FlushOnly writes the partitions it names only,
// and Forget (an aborted transaction) drops a held sync. Without it a due
// sync is written at once.
func TestHoldUntilFlush(t *testing.T) {
	type op struct {
		do   string // "ack", "flush", "flushOnly", "forget"
		part int32
		up   int64
	}
	for _, tt := range []struct {
		name string
		hold bool
		ops  []op
		want []string // partition:upstream of the syncs written, in order
	}{
		{"not held: due at once", false, []op{{"ack", 0, 5}}, []string{"0:5"}},
		{"held until a flush", true, []op{{"ack", 0, 5}}, nil},
		{"held, then flushed", true, []op{{"ack", 0, 5}, {"ack", 1, 7}, {"flush", 0, 0}}, []string{"0:5", "1:7"}},
		{"FlushOnly writes the partition it names", true, []op{{"ack", 0, 5}, {"ack", 1, 7}, {"flushOnly", 1, 0}}, []string{"1:7"}},
		// Every held sync is written, not only a partition's newest: in
		// exact mode each is a run boundary, and a checkpoint task
		// following this topic joins the ones it sees as one run
		// (robustness seed 3 translated 113 to 70, 3 records ahead).
		{"every held sync of a partition is written", true, []op{{"ack", 0, 5}, {"ack", 0, 7}, {"ack", 0, 9}, {"flush", 0, 0}}, []string{"0:5", "0:7", "0:9"}},
		{"Forget drops a held sync", true, []op{{"ack", 0, 5}, {"ack", 1, 7}, {"forget", 0, 0}, {"flush", 0, 0}}, []string{"1:7"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "syncs"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			w := New(cl, "syncs", 100, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			if tt.hold {
				w.HoldUntilFlush()
			}
			ctx := context.Background()
			for _, o := range tt.ops {
				switch o.do {
				case "ack":
					w.Acked("t", o.part, o.up, 0)
				case "flush":
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				case "flushOnly":
					if err := w.FlushOnly(ctx, func(_ string, p int32) bool { return p == o.part }); err != nil {
						t.Fatal(err)
					}
				case "forget":
					w.Forget("t", o.part)
				}
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			got := readSyncs(ctx, t, c)
			if !slices.Equal(got, tt.want) {
				t.Errorf("syncs written %v, want %v", got, tt.want)
			}
		})
	}
}

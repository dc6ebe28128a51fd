package progress

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/wire"
)

func open(t *testing.T, c *kfake.Cluster) (*Store, *kgo.Client) {
	t.Helper()
	connect := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(append(connect, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Open(context.Background(), kadm.NewClient(cl), connect, cl, Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	return s, cl
}

// TestCatchUpSeesOtherWorkers: two Stores share a flow's offsets topic, as
// two workers in group mode do. What one saves reaches the other on CatchUp
// (a deleted record too), and a partition the other saves meanwhile keeps
// its own value.
func TestCatchUpSeesOtherWorkers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a, cl := open(t, c)
	b, _ := open(t, c)
	t1, t2, t3 := TP{"t", 0}, TP{"t", 1}, TP{"u", 0}
	if err := a.Save(ctx, map[TP]int64{t1: 41, t2: 7, t3: 3}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Get(t1); ok {
		t.Fatal("b sees a's save before CatchUp")
	}
	if err := b.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for tp, want := range map[TP]int64{t1: 41, t2: 7, t3: 3} {
		if got, ok := b.Get(tp); !ok || got != want {
			t.Errorf("b after CatchUp: %v = %d (%v), want %d", tp, got, ok, want)
		}
	}
	// a moves on and deletes t3's progress (a tombstone, as a reset
	// writes); b saves t2 itself.
	if err := a.Save(ctx, map[TP]int64{t1: 99}); err != nil {
		t.Fatal(err)
	}
	key := wire.SourceOffsetKey("A", "u", 0)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "mm2-offsets.A.internal", Partition: wire.ConnectPartition(key, 5), Key: key}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, map[TP]int64{t2: 8}); err != nil {
		t.Fatal(err)
	}
	if err := b.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(t1); got != 99 {
		t.Errorf("t1 = %d after the second CatchUp, want 99", got)
	}
	if got, _ := b.Get(t2); got != 8 {
		t.Errorf("t2 = %d, want b's own 8", got)
	}
	if got, ok := b.Get(t3); ok {
		t.Errorf("t3 = %d, want deleted", got)
	}
	// A CatchUp with nothing new changes nothing.
	if err := b.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(t1); got != 99 {
		t.Errorf("t1 = %d after an idle CatchUp, want 99", got)
	}
}

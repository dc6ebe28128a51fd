package datapath

import (
	"context"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestGroupTellsStoreWhatItOwns: the Group tells a shared progress Store
// which partitions this worker copies (assigned and started) and which it
// handed back, so that a repair of the deleted offsets topic writes back
// the progress of the partitions it holds only: not that of a revoked
// partition nor that of another worker's it read.
func TestGroupTellsStoreWhatItOwns(t *testing.T) {
	ctx := context.Background()
	c, cl := testkafka.Fake(t, kfake.NumBrokers(1))
	connect := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	adm := kadm.NewClient(cl)
	const topic = "mm2-offsets.A.internal"
	log := slog.New(slog.DiscardHandler)
	store, err := progress.Open(ctx, adm, connect, cl, progress.Options{Topic: topic, Source: "A", Partitions: 1, Shared: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	a0, a1, a2 := progress.TP{Topic: "a", Partition: 0}, progress.TP{Topic: "a", Partition: 1}, progress.TP{Topic: "a", Partition: 2}
	// a2 is another worker's; this one saw its progress.
	if err := store.Save(ctx, map[progress.TP]int64{a0: 41, a2: 7}); err != nil {
		t.Fatal(err)
	}
	g := &Group{Engine: &fakeEngine{}, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s }, Log: log}
	g.Assigned(ctx, nil, map[string][]int32{"a": {0, 1}})
	if err := store.Save(ctx, map[progress.TP]int64{a1: 5}); err != nil {
		t.Fatal(err)
	}
	g.Revoked(ctx, nil, map[string][]int32{"a": {1}})
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := store.Check(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := progress.Read(ctx, connect, topic, "A", log)
	if err != nil {
		t.Fatal(err)
	}
	if got[a0] != 41 {
		t.Errorf("progress of %s, assigned, after the repair: %d, want 41 (all %v)", a0, got[a0], got)
	}
	for _, tp := range []progress.TP{a1, a2} {
		if off, ok := got[tp]; ok {
			t.Errorf("the repair wrote %d for %s, which this worker does not hold (all %v)", off, tp, got)
		}
	}
}

package flow

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestBuild: build makes from a plan the clients it asks for, the
// progress store and its topic, the offset-syncs topic where the flow
// emits syncs, and the engine the group adapter and the health watcher
// work on. Exactly-once saves progress outside transactions with a
// producer of its own.
func TestBuild(t *testing.T) {
	for _, tt := range []struct {
		name      string
		body      string
		producers int    // of records and progress, forgotten on re-creation
		clients   int    // in all: two admins, consumer, producers, offset-syncs producer, further fetchers
		syncsOn   string // the cluster the offset-syncs topic is made on, if any
	}{
		{"at-least-once", config.FetchesKey + " = 1\n", 1, 5, "target"},
		{"fetch lanes", config.FetchesKey + " = 3\n", 1, 7, "target"},
		{"no offset syncs", config.FetchesKey + " = 1\nA->B.emit.offset-syncs.enabled = false\n", 1, 4, ""},
		// The offset index goes to the target through a producer of its own.
		{"offset syncs on the source", config.FetchesKey + " = 1\nA->B.offset-syncs.topic.location = source\n", 1, 6, "source"},
		{"group workers", config.FetchesKey + " = 1\nA->B.kmirror.workers = group\n", 1, 5, "target"},
		{"exactly-once", config.FetchesKey + " = 1\nB.exactly.once.source.support = enabled\n", 2, 6, "target"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := fakeCluster(t), fakeCluster(t)
			base := "clusters = A, B\nA.bootstrap.servers = " + a.ListenAddrs()[0] + "\nB.bootstrap.servers = " + b.ListenAddrs()[0] +
				"\nA->B.enabled = true\n"
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fc := planFlow(t, base+tt.body)
			f := New(fc, Options{}, metrics.New(), slog.New(slog.DiscardHandler))
			defer f.close()
			r := &running{f: f, c: fc, plan: PlanOf(fc, false), assigned: map[progress.TP]bool{}, kick: make(chan struct{}, 1), looked: map[progress.TP]bool{}}
			if err := r.connect(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r.build(ctx); err != nil {
				t.Fatal(err)
			}
			if r.rep == nil || r.hooks.adapter.Engine != r.rep || r.hooks.adapter.Progress != r.store || r.health == nil || r.syncer == nil {
				t.Fatalf("engine %v, adapter engine %v, adapter store %v, health %v, syncer %v", r.rep, r.hooks.adapter.Engine, r.hooks.adapter.Progress, r.health, r.syncer)
			}
			if r.group != r.plan.Group {
				t.Errorf("group %q, want the plan's %q", r.group, r.plan.Group)
			}
			if n := len(f.producers); n != tt.producers {
				t.Errorf("%d producers of records and progress, want %d", n, tt.producers)
			}
			if n := len(f.closers); n != tt.clients {
				t.Errorf("%d clients, want %d", n, tt.clients)
			}
			tgt, err := r.tgtAdm.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tgt.Has(fc.OffsetStorageTopic) {
				t.Errorf("no progress topic %s on the target: %v", fc.OffsetStorageTopic, tgt.Names())
			}
			src, err := r.srcAdm.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			onTarget, onSource := tgt.Has(fc.Policy.OffsetSyncsTopic(fc.Source)), src.Has(fc.Policy.OffsetSyncsTopic(fc.Target))
			if onTarget != (tt.syncsOn == "target") || onSource != (tt.syncsOn == "source") {
				t.Errorf("offset-syncs topic on the target %v, on the source %v; want it on %q", onTarget, onSource, tt.syncsOn)
			}
		})
	}
}

func fakeCluster(t *testing.T) *kfake.Cluster {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

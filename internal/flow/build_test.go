package flow

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
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
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fc := planFlow(t, flowA2B(fakeCluster(t), fakeCluster(t))+tt.body)
			r := newRunning(t, fc, slog.New(slog.DiscardHandler))
			f := r.f
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

// flowA2B is the configuration of a flow A->B between two clusters.
func flowA2B(a, b *kfake.Cluster) string {
	return "clusters = A, B\nA.bootstrap.servers = " + a.ListenAddrs()[0] + "\nB.bootstrap.servers = " + b.ListenAddrs()[0] +
		"\nA->B.enabled = true\n"
}

// newRunning is a flow's start as Run makes it, before connect and build;
// the flow is closed when the test ends.
func newRunning(t *testing.T, fc *config.Flow, log *slog.Logger) *running {
	f := New(fc, Options{}, metrics.New(), log)
	t.Cleanup(f.close)
	return &running{f: f, c: fc, plan: PlanOf(fc, false), assigned: map[progress.TP]bool{}, kick: make(chan struct{}, 1), looked: map[progress.TP]bool{}}
}

func fakeCluster(t *testing.T) *kfake.Cluster {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestOpenStoreWaitsOutBroker: a target broker that goes down as the
// flow reads its progress (its connection closed, new ones closed during
// the API versions exchange, as a proxy in front of a broker that is down
// does) is waited out; the start does not fail. kgo does not retry a
// connection closed before its first answer, and a robustness run's
// workers exited here (robustness.md, bug 9).
func TestOpenStoreWaitsOutBroker(t *testing.T) {
	b := fakeCluster(t)
	fc := planFlow(t, flowA2B(fakeCluster(t), b)+config.FetchesKey+" = 1\n")
	var down, failed atomic.Int32 // connections still to refuse; refused
	var struck atomic.Bool
	b.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if len(r.Topics) == 0 || r.Topics[0].Topic != fc.OffsetStorageTopic || struck.Swap(true) {
			return nil, nil, false
		}
		down.Store(6)
		return nil, errors.New("broker going down"), true
	})
	b.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		if down.Add(-1) < 0 {
			down.Store(0)
			return nil, nil, false
		}
		failed.Add(1)
		return nil, errors.New("broker down"), true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs testkafka.Logs
	r := newRunning(t, fc, logs.Logger())
	if err := r.connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.build(ctx); err != nil {
		t.Fatalf("build failed while the broker came back: %v", err)
	}
	if failed.Load() == 0 || len(logs.Lines("starting the flow failed; retrying")) == 0 {
		t.Errorf("%d connections refused; log:\n%s", failed.Load(), strings.Join(logs.Lines(""), "\n"))
	}
}

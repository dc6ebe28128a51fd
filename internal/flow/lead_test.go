package flow

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestFencedLeaderWaits: two workers that both believe they lead a flow
// (one frozen past its session and back, not yet told of the new
// assignment). The one that starts its checkpoint task second fences the
// first; the first's task stops without stopping the flow, and the
// worker does not start it again while it still believes it leads (else
// the two would fence each other in turn), only once the group has told
// it otherwise and then made it the leader again.
func TestFencedLeaderWaits(t *testing.T) {
	a, b := fakeCluster(t), fakeCluster(t)
	fc := planFlow(t, flowA2B(a, b)+"emit.checkpoints.interval.seconds = 1\nrefresh.groups.interval.seconds = 1\nsync.group.offsets.enabled = false\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := kgo.NewClient(kgo.SeedBrokers(a.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(b.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	sadm, dadm := kadm.NewClient(src), kadm.NewClient(dst)
	if _, err := sadm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	syncs := fc.OffsetSyncsTopic()
	if _, err := dadm.CreateTopic(ctx, 1, 1, nil, syncs); err != nil {
		t.Fatal(err)
	}
	for _, s := range []wire.OffsetSync{{Topic: "t", UpstreamOffset: 0, DownstreamOffset: 0}, {Topic: "t", UpstreamOffset: 1000, DownstreamOffset: 999}} {
		k, v, _ := wire.Encode(s)
		if err := dst.ProduceSync(ctx, &kgo.Record{Topic: syncs, Key: k, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	at := int64(0)
	commit := func() {
		at += 10
		o := make(kadm.Offsets)
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		if _, err := sadm.CommitOffsets(ctx, "g", o); err != nil {
			t.Fatal(err)
		}
	}

	type worker struct {
		logs  testkafka.Logs
		leads atomic.Bool
		errs  chan error
	}
	start := func(w *worker) {
		f := New(fc, Options{}, metrics.New(), w.logs.Logger())
		w.errs = make(chan error, 1)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			f.leadCheckpoints(ctx, w.leads.Load, func() { t.Error("a fenced checkpoint task stopped the flow") }, w.errs)
		}()
		t.Cleanup(func() { cancel(); <-stopped })
	}
	started := func(w *worker) int { return len(w.logs.Lines("it runs the checkpoints")) }
	yielded := func(w *worker) int { return len(w.logs.Lines("another worker leads the flow's checkpoints")) }
	fenced := func(w *worker) int { return len(w.logs.Lines("a task before this one is fenced")) }

	var w1, w2 worker
	w1.leads.Store(true)
	start(&w1)
	commit()
	testwait.For(t, 20*time.Second, "worker 1's task writing", func() bool { return fenced(&w1) == 1 })
	w2.leads.Store(true)
	start(&w2)
	testwait.For(t, 20*time.Second, "worker 2's task fencing worker 1's", func() bool { return fenced(&w2) == 1 })
	// Worker 2 stops its task (a task that has nothing new to write is
	// not told it was fenced), so that worker 1's next write is the one
	// refused.
	w2.leads.Store(false)
	testwait.For(t, 20*time.Second, "worker 2's task stopping", func() bool { return len(w2.logs.Lines("checkpoints stop here")) == 1 })
	commit()
	testwait.For(t, 20*time.Second, "worker 1's task stopping, fenced", func() bool { return yielded(&w1) == 1 })

	// Still leading in its own view: no new task for a while (ticks of
	// leadCheck pass).
	time.Sleep(3 * leadCheck)
	if n := started(&w1); n != 1 {
		t.Errorf("worker 1 started its checkpoint task %d times while it still believed it led after being fenced; want 1", n)
	}
	// The group tells worker 1 it does not lead, then makes it the leader
	// again: it starts a task, which fences and writes.
	w1.leads.Store(false)
	time.Sleep(leadCheck + leadCheck/2)
	w1.leads.Store(true)
	testwait.For(t, 20*time.Second, "worker 1 leading again", func() bool { return started(&w1) == 2 && fenced(&w1) == 2 })
	commit()
	testwait.For(t, 20*time.Second, "worker 1's checkpoint of the last commit", func() bool {
		return lastUpstream(t, b.ListenAddrs(), fc.Policy.CheckpointsTopic("A")) == at
	})
	for _, w := range []*worker{&w1, &w2} {
		select {
		case err := <-w.errs:
			t.Errorf("the flow got an error: %v", err)
		default:
		}
		if errs := w.logs.Lines("level=ERROR"); len(errs) > 0 {
			t.Errorf("errors logged:\n%s", strings.Join(errs, "\n"))
		}
	}
}

// lastUpstream is the upstream offset of the last committed checkpoint in
// topic, -1 if none.
func lastUpstream(t *testing.T, addrs []string, topic string) int64 {
	t.Helper()
	last := int64(-1)
	err := readlog.ToEnd(context.Background(), []kgo.Opt{kgo.SeedBrokers(addrs...)}, topic, func(r *kgo.Record) {
		if c, err := wire.DecodeCheckpoint(r.Key, r.Value); err == nil {
			last = c.UpstreamOffset
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

package passthrough

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// idlePipeline returns a pipeline with 5,000 idle partitions (1,000
// topics × 5) on one lane, settled, with a producer ID and no brokers.
func idlePipeline() (*Pipeline, *laneState) {
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Progress: new(progress.Store), Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	var ps []datapath.Partition
	for i := range 1000 {
		for j := range int32(5) {
			tp := progress.TP{Topic: fmt.Sprintf("topic-%04d", i), Partition: j}
			ps = append(ps, datapath.Partition{TP: tp, Remote: "A." + tp.Topic})
		}
	}
	pl.Assign(ps)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.pid, pl.lastMeta = 1, time.Now().Add(time.Hour)
	pl.needMeta.Store(false)
	for _, p := range pl.parts {
		p.next, p.srcLeader, p.tgtLeader = 0, 1, 1
		p.srcID[0] = 1
	}
	clear(pl.unresolved)
	pl.fetcher.mu.Lock()
	defer pl.fetcher.mu.Unlock()
	pl.settleLocked(time.Now())
	return pl, pl.fetcher.lanes[lane{1, 0}]
}

// BenchmarkIdlePass is one pass of the request loop (maintain, fetches,
// produces) over 5,000 idle partitions whose lane has its fetch in
// flight, as between the long polls of an idle flow.
func BenchmarkIdlePass(b *testing.B) {
	pl, ls := idlePipeline()
	ls.fetching = true
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		pl.maintain(ctx, ctx)
		pl.startFetches(ctx)
		pl.startProduces(ctx)
	}
}

// BenchmarkIdleFetchRequest builds and encodes the fetch request of the
// idle lane of 5,000 partitions: "full" lists them all, as every fetch
// did without sessions (and as the first of a session does), "session"
// is the fetch of an established session with nothing changed.
func BenchmarkIdleFetchRequest(b *testing.B) {
	for _, full := range []bool{true, false} {
		name := map[bool]string{true: "full", false: "session"}[full]
		b.Run(name, func(b *testing.B) {
			pl, ls := idlePipeline()
			pl.mu.Lock()
			defer pl.mu.Unlock()
			pl.fetcher.mu.Lock()
			defer pl.fetcher.mu.Unlock()
			if !full {
				_, plan := pl.buildFetchLocked(ls)
				maps := plan.listed
				ls.id, ls.epoch = 7, 1
				for tp, e := range maps {
					ls.sess[tp] = e
				}
			}
			var size int
			b.ReportAllocs()
			for b.Loop() {
				req, plan := pl.buildFetchLocked(ls)
				req.SetVersion(17)
				size = len(req.AppendTo(nil))
				if !full {
					for tp := range plan.listed {
						delete(pl.fetcher.sessOf, tp)
					}
				}
			}
			b.ReportMetric(float64(size), "request-bytes")
		})
	}
}

// BenchmarkIdleStatus is Status over 5,000 idle partitions, as the
// dashboard and the health check call it every few seconds.
func BenchmarkIdleStatus(b *testing.B) {
	pl, _ := idlePipeline()
	b.ReportAllocs()
	for b.Loop() {
		if st := pl.Status(nil); len(st) != 5000 {
			b.Fatalf("%d partitions", len(st))
		}
	}
}

// BenchmarkIdleCommit is what the progress commit of 5,000 idle
// partitions whose progress was saved builds for the progress store to
// compare and write, every offset flush interval: "all" the positions of
// every partition (as Commit did), "changed" those that moved since the
// last commit.
func BenchmarkIdleCommit(b *testing.B) {
	pl, _ := idlePipeline()
	pl.mu.Lock()
	for _, p := range pl.parts {
		p.Done, p.committed, p.hasCommitted = 10, 10, true
	}
	pl.mu.Unlock()
	for _, tc := range []struct {
		name string
		pos  func() map[progress.TP]int64
		want int
	}{{"all", pl.Positions, 5000}, {"changed", pl.changedPositions, 0}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n := len(tc.pos()); n != tc.want {
					b.Fatalf("%d positions, want %d", n, tc.want)
				}
			}
		})
	}
}

// TestQuiet: the request loop slows to a pass a second only when nothing
// waits for a time to come or for a pass.
func TestQuiet(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name   string
		change func(pl *Pipeline, ls *laneState, p *partition)
		quiet  bool
	}{
		{"idle, fetching", func(*Pipeline, *laneState, *partition) {}, true},
		{"lane not fetching", func(_ *Pipeline, ls *laneState, _ *partition) { ls.fetching = false }, false},
		{"lane not fetching, paused", func(pl *Pipeline, ls *laneState, _ *partition) { ls.fetching = false; pl.SetPaused(true) }, true},
		{"lane backing off", func(_ *Pipeline, ls *laneState, _ *partition) { ls.retryAt = now.Add(time.Second) }, false},
		{"partition backing off", func(pl *Pipeline, _ *laneState, p *partition) { pl.fetcher.waiting[p] = struct{}{} }, false},
		{"partition changed", func(pl *Pipeline, _ *laneState, p *partition) { pl.touchLocked(p) }, false},
		{"batches to send", func(pl *Pipeline, _ *laneState, p *partition) { pl.sendable[p] = struct{}{} }, false},
		{"produce in flight", func(pl *Pipeline, _ *laneState, _ *partition) { pl.producer.produceIn = 1 }, false},
		{"start offset unknown", func(pl *Pipeline, _ *laneState, p *partition) { pl.unresolved[p] = struct{}{} }, false},
		{"out of range", func(pl *Pipeline, _ *laneState, p *partition) { pl.oor[p] = struct{}{} }, false},
		{"metadata wanted", func(pl *Pipeline, _ *laneState, _ *partition) { pl.needMeta.Store(true) }, false},
		{"no producer ID", func(pl *Pipeline, _ *laneState, _ *partition) { pl.pid = -1 }, false},
		{"exactly-once", func(pl *Pipeline, _ *laneState, _ *partition) { pl.cfg.TransactionalID = "t" }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pl, ls := idlePipeline()
			pl.mu.Lock()
			ls.fetching = true
			tt.change(pl, ls, pl.parts[progress.TP{Topic: "topic-0000", Partition: 0}])
			pl.mu.Unlock()
			if got := pl.quiet(now); got != tt.quiet {
				t.Errorf("quiet %v, want %v", got, tt.quiet)
			}
		})
	}
}

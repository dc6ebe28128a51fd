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

// BenchmarkIdlePass is one pass of the request loop over 5,000 idle
// partitions (1,000 topics × 5) whose lane has its fetch in flight, as
// between the long polls of an idle flow.
func BenchmarkIdlePass(b *testing.B) {
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
	pl.pid, pl.needMeta, pl.lastMeta = 1, false, time.Now().Add(time.Hour)
	for _, p := range pl.parts {
		p.next, p.srcLeader, p.tgtLeader = 0, 1, 1
	}
	pl.laneLocked(lane{1, 0}).fetching = true
	pl.mu.Unlock()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		pl.maintain(ctx)
		pl.startFetches(ctx)
		pl.startProduces(ctx)
	}
}

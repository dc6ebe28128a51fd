package health

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
)

// BenchmarkHealthCheck: one Check of 5,000 partitions (1,000 topics of 5
// on a kfake source, empty), all caught up and idle, with metrics.
func BenchmarkHealthCheck(b *testing.B) {
	topics := make([]string, 1000)
	for i := range topics {
		topics[i] = "t" + strconv.Itoa(i)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(5, topics...))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	eng := &statusEngine{}
	for _, t := range topics {
		for p := range int32(5) {
			eng.st = append(eng.st, datapath.PartitionStatus{Topic: t, Partition: p, Remote: "A." + t, Done: -1, State: datapath.Running})
		}
	}
	h := New(Config{SourceAlias: "A", TargetAlias: "B", Source: cl, Metrics: metrics.New()},
		eng, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	now := time.Now()
	h.Check(ctx, now)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(5 * time.Second)
		h.Check(ctx, now)
	}
}

package replicate

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// BenchmarkReplicate measures the record path between two in-process fake
// clusters: b.N records of 1 KiB over 4 partitions, source to target. The
// fake brokers share the CPU, so compare runs of this benchmark with each
// other (benchstat), not with real clusters.
func BenchmarkReplicate(b *testing.B) {
	f := newFakePair(b)
	ctx := context.Background()
	srcAdm := kadm.NewClient(mustClient(b, f.srcOpts))
	dstAdm := kadm.NewClient(mustClient(b, f.dstOpts))
	srcAdm.CreateTopic(ctx, 4, 1, nil, "bench")
	dstAdm.CreateTopic(ctx, 4, 1, nil, "A.bench")
	value := make([]byte, 1024)
	pcl := mustClient(b, f.srcOpts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	for i := 0; i < b.N; i++ {
		pcl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, nil)
	}
	if err := pcl.Flush(ctx); err != nil {
		b.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	producer := mustClient(b, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	store, err := progress.Open(ctx, dstAdm, f.dstOpts, producer, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
	if err != nil {
		b.Fatal(err)
	}
	r := New(Config{
		SourceAlias: "A", TargetAlias: "B",
		Source:      mustClient(b, f.srcOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NoResetOffset())),
		SourceAdmin: srcAdm,
		Target:      producer,
		Progress:    store,
		Metrics:     metrics.New(),
		Log:         log,
	})
	var ps []datapath.Partition
	for p := int32(0); p < 4; p++ {
		ps = append(ps, datapath.Partition{TP: progress.TP{Topic: "bench", Partition: p}, Remote: "A.bench"})
	}
	b.SetBytes(1024)
	b.ResetTimer()
	r.Assign(ps)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, 10*time.Second) }()
	for {
		var n int64
		for _, off := range r.Positions() {
			n += off + 1
		}
		if n >= int64(b.N) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func mustClient(b *testing.B, opts []kgo.Opt, extra ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), extra...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

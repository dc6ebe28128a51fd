package passthrough

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// gatedDecompressor stands for a batch that takes as long as the test
// likes to decompress (a zstd bomb takes seconds up to the client's
// bound, more under load): every call waits until release is closed,
// then decompresses for real. entered is closed at the first call.
type gatedDecompressor struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedDecompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return kgo.DefaultDecompressor().Decompress(src, codec)
}

// TestStopDoesNotWaitForDecompression stops the engine while it
// decompresses a source batch: re-encoding it (the fetch path) or
// sampling its value bytes after the ack (the forwarding path, MM2's
// byte-count). Run returns within its bound; it used to wait until the
// decompression finished, which for a zstd bomb under load took longer
// than kmirror's 30 s stop timeout (e2e TestZstdBombBounded).
func TestStopDoesNotWaitForDecompression(t *testing.T) {
	for _, m := range []mode{{name: "forward"}, {name: "reencode", reencode: true}} {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(src.Close)
			dst, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "A.t"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(dst.Close)
			srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srcCl.Close)
			var recs []*kgo.Record
			for i := range 20 {
				recs = append(recs, &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "value %d", i)})
			}
			if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			dstCl, store := openTarget(ctx, t, dst, 1)
			pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
				Progress: store, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler), ReencodeAll: m.reencode})
			g := &gatedDecompressor{entered: make(chan struct{}), release: make(chan struct{})}
			t.Cleanup(func() { close(g.release) }) // lets a call left behind finish
			pl.dec = g
			pl.Assign([]datapath.Partition{{TP: progress.TP{Topic: "t", Partition: 0}, Remote: "A.t"}})
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- pl.Run(rctx, 3*time.Second) }()
			select {
			case <-g.entered:
			case <-ctx.Done():
				t.Fatal("the engine never decompressed the batch")
			}
			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second): // the drain bound is 3 s
				t.Fatal("Run did not return within 10 s of the stop while a batch was being decompressed")
			}
		})
	}
}

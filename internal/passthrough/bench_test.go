package passthrough

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// benchBatch returns a source batch of n records with 1 KiB values of
// text-like (compressible) data, and the payload size in bytes.
func benchBatch(b *testing.B, codec kgo.CompressionCodecType, n int) ([]byte, int) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"kafka", "mirror", "record", "batch", "offset", "partition", "topic", "replica", "leader", "commit"}
	recs := make([]*kgo.Record, n)
	payload := 0
	for i := range recs {
		var v []byte
		for len(v) < 1024 {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
			v = fmt.Appendf(v, "%d ", rng.IntN(100000))
		}
		v = v[:1024]
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: v, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Offset: int64(i)}
		payload += len(v) + len(recs[i].Key)
	}
	return sourceBatch(b, recs, codec, 0, false), payload
}

// BenchmarkForward is the passthrough cost of one batch: check the source
// CRC, copy it out of the fetch buffer, rewrite the producer fields and
// the CRC.
func BenchmarkForward(b *testing.B) {
	for _, codec := range codecs {
		b.Run(codecName(codec), func(b *testing.B) {
			raw, payload := benchBatch(b, codec, 100)
			b.SetBytes(int64(payload))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseHeader(raw); err != nil {
					b.Fatal(err)
				}
				out := append([]byte(nil), raw...)
				if err := stamp(out, 1, 0, 0, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReencode is the re-encoding cost of the same batch:
// decompress and decode the records, encode and compress them again with
// the same codec, and stamp the result.
func BenchmarkReencode(b *testing.B) {
	dec := kgo.DefaultDecompressor()
	enc := newEncoder(true)
	for _, codec := range codecs {
		b.Run(codecName(codec), func(b *testing.B) {
			raw, payload := benchBatch(b, codec, 100)
			b.SetBytes(int64(payload))
			b.ReportAllocs()
			for b.Loop() {
				recs, err := decode(raw, 0, "t", 0, dec)
				if err != nil {
					b.Fatal(err)
				}
				out, err := enc.batch(recs, codec)
				if err != nil {
					b.Fatal(err)
				}
				if err := stamp(out, 1, 0, 0, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func codecName(c kgo.CompressionCodecType) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// BenchmarkProduceRequestAppend serializes a produce request of 32
// partitions with a 256 KiB batch each into a fresh buffer, as franz-go
// does after a GC emptied its buffer pool: kmsg's plain AppendTo grows the
// buffer by doubling, produceRequest sizes it once.
func BenchmarkProduceRequestAppend(b *testing.B) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	req.SetVersion(9)
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	size := 64 + 32 + len(t.Topic)
	for p := range int32(32) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, make([]byte, 256<<10)
		t.Partitions = append(t.Partitions, rp)
		size += 16 + len(rp.Records)
	}
	req.Topics = append(req.Topics, t)
	for _, tc := range []struct {
		name string
		r    kmsg.Request
	}{
		{"kmsg", req},
		{"presized", &produceRequest{ProduceRequest: req, size: size, queued: func() {}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				_ = tc.r.AppendTo(make([]byte, 0, 4096))
			}
		})
	}
}

// BenchmarkEngine measures the engine in each mode between two in-process
// fake clusters: b.N records of 1 KiB, lz4, over 4 partitions, source to
// target. It is the workload the record path's BenchmarkReplicate
// (internal/replicate, removed) measured, so "reencode" compares with it.
// The fake brokers share the CPU: compare runs of this benchmark with
// each other (benchstat), not with real clusters.
// "reencode 2 lanes" runs with two source clients, the flows' default
// (kmirror.fetches.per.broker); the record path's default was one.
func BenchmarkEngine(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) { benchEngine(b, m, shape{lanes: 1, partitions: 4, brokers: 1}) })
	}
	b.Run("reencode 2 lanes", func(b *testing.B) { benchEngine(b, mode{reencode: true}, shape{lanes: 2, partitions: 4, brokers: 1}) })
}

// BenchmarkEngineWide is BenchmarkEngine over 128 partitions led by 3
// brokers on each side, with 2 lanes: many partitions' fetch answers and
// acknowledgements at once, where the Pipeline's one lock (pl.mu) would
// show as contention. Run it with -mutexprofile to see that
// (DESIGN.md, lock order).
func BenchmarkEngineWide(b *testing.B) {
	for _, m := range modes[:2] {
		b.Run(m.name, func(b *testing.B) { benchEngine(b, m, shape{lanes: 2, partitions: 128, brokers: 3}) })
	}
}

// shape is the size of a benchmark's flow.
type shape struct{ lanes, partitions, brokers int }

func benchEngine(b *testing.B, m mode, sh shape) {
	lanes, parts := sh.lanes, int32(sh.partitions)
	src, err := kfake.NewCluster(kfake.NumBrokers(sh.brokers))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(sh.brokers))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	srcOpts, dstOpts := []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
	cl := func(opts []kgo.Opt, extra ...kgo.Opt) *kgo.Client {
		c, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), extra...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		return c
	}
	ctx := context.Background()
	srcAdm, dstAdm := kadm.NewClient(cl(srcOpts)), kadm.NewClient(cl(dstOpts))
	srcAdm.CreateTopic(ctx, parts, 1, nil, "bench")
	dstAdm.CreateTopic(ctx, parts, 1, nil, "A.bench")
	value := make([]byte, 1024)
	pcl := cl(srcOpts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	for range b.N {
		pcl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, nil)
	}
	if err := pcl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	producer := cl(dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	store, err := progress.Open(ctx, dstAdm, dstOpts, producer, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
	if err != nil {
		b.Fatal(err)
	}
	var more []*kgo.Client
	for range lanes - 1 {
		more = append(more, cl(srcOpts))
	}
	pl := New(Config{
		SourceAlias: "A", TargetAlias: "B",
		Source: cl(srcOpts), MoreSources: more, SourceAdmin: srcAdm, Target: producer, Progress: store,
		ReencodeAll: m.reencode, Codec: m.codec,
		Metrics: metrics.New(), Log: log,
	})
	var ps []datapath.Partition
	for p := range parts {
		ps = append(ps, datapath.Partition{TP: progress.TP{Topic: "bench", Partition: p}, Remote: "A.bench"})
	}
	b.SetBytes(1024)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	// Wait on the acknowledged count, not by polling Positions: that takes
	// pl.mu over every partition and would show in -mutexprofile as
	// contention the engine does not have.
	all := pl.AckedReached(int64(b.N))
	b.ResetTimer()
	pl.Assign(ps)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	<-all
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

package passthrough

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
)

// TestProduceErrorsRetriedInOrder copies between two kfake clusters while
// the target answers produce requests with retriable errors (leader moved,
// not enough replicas) and a lost producer ID; every record arrives once,
// in order.
func TestProduceErrorsRetriedInOrder(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "A.t", "mm2-offsets.A.internal"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	// Errors go only to the pipeline's requests for A.t, known by name or
	// by topic ID; the progress writes to the offsets topic are left alone.
	adm, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(adm).ListTopics(context.Background(), "A.t")
	adm.Close()
	if err != nil {
		t.Fatal(err)
	}
	aID := [16]byte(td["A.t"].ID)
	var calls atomic.Int64
	dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || (pr.Topics[0].Topic != "A.t" && pr.Topics[0].TopicID != aID) {
			return nil, nil, false
		}
		n := calls.Add(1)
		if n%3 != 0 || n > 30 {
			return nil, nil, false
		}
		code := []int16{kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code, kerr.UnknownProducerID.Code}[(n/3)%3]
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerBatchMaxBytes(4000))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 2000
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: int32(i % 2), Key: fmt.Appendf(nil, "%d", i), Value: fmt.Appendf(nil, "value %d", i)})
	}
	if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dstCl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer dstCl.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := progress.Open(ctx, kadm.NewClient(dstCl), []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, dstCl, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 2}, log)
	if err != nil {
		t.Fatal(err)
	}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: log, PartitionMaxBytes: 2000})
	pl.Assign([]replicate.Partition{{TP: progress.TP{Topic: "t", Partition: 0}, Remote: "A.t"}, {TP: progress.TP{Topic: "t", Partition: 1}, Remote: "A.t"}})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	for {
		pos := pl.Positions()
		if pos[progress.TP{Topic: "t", Partition: 0}] >= n/2-1 && pos[progress.TP{Topic: "t", Partition: 1}] >= n/2-1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not copied in time; positions %v", pos)
		case <-time.After(20 * time.Millisecond):
		}
	}
	rcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls.Load() < 9 {
		t.Fatalf("only %d produce requests: the errors were not exercised", calls.Load())
	}

	rd, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.ConsumeTopics("A.t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	next := map[int32]int{0: 0, 1: 1}
	for got := 0; got < n; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprint(next[r.Partition]); string(r.Key) != want {
				t.Fatalf("partition %d offset %d: key %s, want %s", r.Partition, r.Offset, r.Key, want)
			}
			next[r.Partition] += 2
			got++
		})
	}
	t.Logf("%d produce requests, records arrived once and in order", calls.Load())
}

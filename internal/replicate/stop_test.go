package replicate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestStopSavesAcknowledged: when the target never acknowledges one
// partition's records (its leader hangs), a stopping replicator gives up
// on them after drain and still saves the progress of the partition the
// target did acknowledge, so a restart copies only the rest again.
func TestStopSavesAcknowledged(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	dst, err := kfake.NewCluster(kfake.NumBrokers(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the clusters close
	f := &fakePair{src: src, dst: dst,
		srcOpts: []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		dstOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}}
	const topic, syncs = "t", "syncs"
	f.topics(t, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := testLog()
	dstAdm := kadm.NewClient(client(t, f.dstOpts))
	popts := progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 1, ReplicationFactor: 1}
	producer := client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	store, err := progress.Open(ctx, dstAdm, f.dstOpts, producer, popts, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dstAdm.CreateTopic(ctx, 1, 1, nil, syncs); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	// Node 1 leads A.t partition 1 only, and never answers a produce.
	for _, tp := range []struct {
		topic     string
		partition int32
		node      int32
	}{{"A." + topic, 0, 0}, {"A." + topic, 1, 1}, {popts.Topic, 0, 0}, {syncs, 0, 0}} {
		if err := dst.MoveTopicPartition(tp.topic, tp.partition, tp.node); err != nil {
			t.Fatal(err)
		}
	}
	dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if dst.CurrentNode() == 1 {
			dst.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	produce(t, f.srcOpts, topic, 2, 0, 20) // 10 records per partition

	source := client(t, f.srcOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	r := New(Config{
		SourceAlias: "A", TargetAlias: "B",
		Source:      source,
		SourceAdmin: kadm.NewClient(client(t, f.srcOpts)),
		Target:      producer,
		Progress:    store,
		Syncs:       offsetsync.New(client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner())), syncs, 100, log, nil),
		Metrics:     metrics.New(),
		Log:         log,
	})
	r.Assign([]datapath.Partition{
		{TP: progress.TP{Topic: topic, Partition: 0}, Remote: "A." + topic},
		{TP: progress.TP{Topic: topic, Partition: 1}, Remote: "A." + topic},
	})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, time.Second) }()
	for {
		n := 0
		for _, rec := range readAll(t, f.dstOpts, "A."+topic) {
			if rec.Partition == 0 {
				n++
			}
		}
		if n == 10 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("partition 0 never reached the target")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run = nil, want the records in flight it gave up on")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after its context ended")
	}
	reopened, err := progress.Open(ctx, dstAdm, f.dstOpts, client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner())), popts, log)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := reopened.Get(progress.TP{Topic: topic, Partition: 0}); !ok || off < 9 {
		t.Errorf("saved progress of partition 0 = %d (saved %v), want its 10 acknowledged records", off, ok)
	}
	if off, ok := reopened.Get(progress.TP{Topic: topic, Partition: 1}); ok && off >= 0 {
		t.Errorf("saved progress of partition 1 = %d, want none: the target acknowledged nothing", off)
	}
}

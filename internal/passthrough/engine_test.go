package passthrough

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/wire"
)

// The tests of this file run the engine in each of its modes: batches
// forwarded as they are, every batch re-encoded (kmirror.passthrough.enabled
// = false), and batches re-encoded to a target codec. They hold what the
// record path's tests (internal/replicate, removed) checked, now of the
// one engine.

// mode is one way the engine sends batches.
type mode struct {
	name     string
	reencode bool
	codec    string
}

var modes = []mode{{name: "forward"}, {name: "reencode", reencode: true}, {name: "codec zstd", codec: "zstd"}}

// enginePair is a source and a target cluster in this process.
type enginePair struct {
	src, dst         *kfake.Cluster
	srcOpts, dstOpts []kgo.Opt
	mode             mode
	lanes            int // source clients, Config.MoreSources + 1
	// pauseFirst pauses the pipeline before it starts, checks that it
	// copies nothing, then resumes it.
	pauseFirst bool
}

func newEnginePair(t *testing.T, m mode, dstBrokers int) *enginePair {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := kfake.NewCluster(kfake.NumBrokers(dstBrokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	t.Cleanup(dst.Close)
	return &enginePair{src: src, dst: dst, mode: m,
		srcOpts: []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		dstOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}}
}

func newClient(t *testing.T, opts []kgo.Opt, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// topics creates topic with n partitions on the source, its remote topic
// A.topic and the offset-syncs topic syncs on the target.
func (f *enginePair) topics(t *testing.T, topic string, n int32, syncs string) {
	t.Helper()
	ctx := context.Background()
	if _, err := kadm.NewClient(newClient(t, f.srcOpts)).CreateTopic(ctx, n, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	dadm := kadm.NewClient(newClient(t, f.dstOpts))
	if _, err := dadm.CreateTopic(ctx, n, 1, nil, "A."+topic); err != nil {
		t.Fatal(err)
	}
	if _, err := dadm.CreateTopic(ctx, 1, 1, nil, syncs); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
}

// produce writes records from..to-1 round robin over n partitions, keyed
// by their number, each in its own (zstd) batch.
func (f *enginePair) produce(t *testing.T, topic string, n int32, from, to int) {
	t.Helper()
	cl := newClient(t, f.srcOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	for i := from; i < to; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % n, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint("v", i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func readTopic(t *testing.T, opts []kgo.Opt, topic string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	if err := readlog.ToEnd(context.Background(), opts, topic, func(r *kgo.Record) { out = append(out, r) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// pipeline makes the engine of f's mode for partitions 0..n-1 of topic,
// with its progress store and offset syncs on the target.
func (f *enginePair) pipeline(ctx context.Context, t *testing.T, topic string, n int32, syncs string, m *metrics.Metrics) (*Pipeline, *progress.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	dstCl := newClient(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	store, err := progress.Open(ctx, kadm.NewClient(dstCl), f.dstOpts, dstCl,
		progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 1, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	var sources []*kgo.Client
	for range max(f.lanes, 1) {
		sources = append(sources, newClient(t, f.srcOpts))
	}
	pl := New(Config{
		SourceAlias: "A", TargetAlias: "B",
		Source: sources[0], MoreSources: sources[1:], SourceAdmin: kadm.NewClient(newClient(t, f.srcOpts)),
		Target: dstCl, Progress: store,
		Syncs:       offsetsync.New(newClient(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner())), syncs, 100, log, nil),
		ReencodeAll: f.mode.reencode, Codec: f.mode.codec,
		Metrics: m, Log: log,
	})
	var ps []datapath.Partition
	for p := range n {
		ps = append(ps, datapath.Partition{TP: progress.TP{Topic: topic, Partition: p}, Remote: "A." + topic})
	}
	if f.pauseFirst {
		pl.Pause(true)
	}
	pl.Assign(ps)
	return pl, store
}

// runOnce copies topic until the target holds want records, committing
// progress as the flow does, then stops the engine cleanly.
func (f *enginePair) runOnce(t *testing.T, topic string, n int32, want int, syncs string) *metrics.Metrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := metrics.New()
	pl, _ := f.pipeline(ctx, t, topic, n, syncs, m)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	if f.pauseFirst {
		time.Sleep(300 * time.Millisecond)
		if got := len(readTopic(t, f.dstOpts, "A."+topic)); got != 0 {
			t.Fatalf("paused engine copied %d records", got)
		}
		pl.Pause(false)
	}
	// Commits as the flow makes them, ended before Run's last one.
	cctx, ccancel := context.WithCancel(rctx)
	commits := make(chan struct{})
	go func() {
		defer close(commits)
		for cctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			_ = pl.Commit(cctx)
		}
	}()
	for len(readTopic(t, f.dstOpts, "A."+topic)) < want {
		if ctx.Err() != nil {
			t.Fatalf("target never reached %d records", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ccancel()
	<-commits
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEngineResumesFromProgress copies, stops cleanly, copies more: the
// target holds every record once, in its partition, with its key, value
// and header; the saved progress is each partition's last source offset;
// offset syncs name the source topic and pair offsets record for record.
func TestEngineResumesFromProgress(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newEnginePair(t, m, 1)
			const syncs = "mm2-offset-syncs.B.internal"
			f.topics(t, "orders", 3, syncs)
			f.produce(t, "orders", 3, 0, 90)
			f.runOnce(t, "orders", 3, 90, syncs)
			f.produce(t, "orders", 3, 90, 150)
			f.runOnce(t, "orders", 3, 150, syncs)

			got := readTopic(t, f.dstOpts, "A.orders")
			if len(got) != 150 {
				t.Fatalf("target has %d records, want 150 (no duplicates after a clean restart)", len(got))
			}
			seen := map[string]bool{}
			for _, r := range got {
				if seen[string(r.Key)] {
					t.Errorf("record %s copied twice", r.Key)
				}
				seen[string(r.Key)] = true
				var i int
				fmt.Sscan(string(r.Key), &i)
				if r.Partition != int32(i)%3 || string(r.Value) != fmt.Sprint("v", i) || len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i) {
					t.Errorf("record %s: partition %d, value %q, headers %v; want %d, v%d, h=%d", r.Key, r.Partition, r.Value, r.Headers, i%3, i, i)
				}
			}
			last := map[int32]int64{}
			for _, r := range readTopic(t, f.dstOpts, "mm2-offsets.A.internal") {
				if strings.Contains(string(r.Key), "kmirror-topic-id") {
					continue // topic identity, not progress
				}
				_, _, topic, p, err := wire.DecodeSourceOffsetKey(r.Key)
				if err != nil {
					t.Fatal(err)
				}
				v, err := wire.DecodeOffsetValue(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				if topic != "orders" {
					t.Errorf("progress record for topic %q, want orders", topic)
				}
				last[p] = v
			}
			for p := int32(0); p < 3; p++ {
				if o, ok := last[p]; !ok || o != 49 {
					t.Errorf("partition %d: last progress %d (present %v), want 49", p, o, ok)
				}
			}
			ss := readTopic(t, f.dstOpts, syncs)
			if len(ss) == 0 {
				t.Fatal("no offset syncs written")
			}
			for _, r := range ss {
				s, err := wire.DecodeOffsetSync(r.Key, r.Value)
				if err != nil {
					t.Fatal(err)
				}
				if s.Topic != "orders" || s.UpstreamOffset != s.DownstreamOffset {
					t.Errorf("offset sync %+v: want topic orders and equal offsets", s)
				}
			}
		})
	}
}

// TestEngineReportsGap: records deleted upstream before the engine saw
// them are counted as lost, and copying goes on after them.
func TestEngineReportsGap(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newEnginePair(t, m, 1)
			ctx := context.Background()
			f.topics(t, "events", 1, "syncs")
			f.produce(t, "events", 1, 0, 10)
			f.runOnce(t, "events", 1, 10, "syncs")
			f.produce(t, "events", 1, 10, 30)
			var o kadm.Offsets
			o.Add(kadm.Offset{Topic: "events", Partition: 0, At: 15})
			if _, err := kadm.NewClient(newClient(t, f.srcOpts)).DeleteRecords(ctx, o); err != nil {
				t.Fatal(err)
			}
			mt := f.runOnce(t, "events", 1, 25, "syncs")
			if got := testutil.ToFloat64(mt.RecordsLost.WithLabelValues("A", "B", "events", "0")); got != 5 {
				t.Errorf("records lost metric = %v, want 5", got)
			}
			got := readTopic(t, f.dstOpts, "A.events")
			if len(got) != 25 || string(got[10].Key) != "15" {
				t.Errorf("target has %d records, 11th key %q; want 25 and 15", len(got), got[min(10, len(got)-1)].Key)
			}
		})
	}
}

// TestEngineLanesPauseResume starts paused over two source clients,
// copies nothing while paused and everything once resumed; three lanes
// spread four partitions and keep each in order.
func TestEngineLanesPauseResume(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newEnginePair(t, m, 1)
			f.lanes, f.pauseFirst = 2, true
			f.topics(t, "paused", 4, "syncs")
			f.produce(t, "paused", 4, 0, 80)
			f.runOnce(t, "paused", 4, 80, "syncs")
			next := map[int32]int{0: 0, 1: 1, 2: 2, 3: 3}
			got := readTopic(t, f.dstOpts, "A.paused")
			for _, r := range got {
				if want := fmt.Sprint(next[r.Partition]); string(r.Key) != want {
					t.Fatalf("partition %d offset %d: key %s, want %s", r.Partition, r.Offset, r.Key, want)
				}
				next[r.Partition] += 4
			}
			if len(got) != 80 {
				t.Errorf("target holds %d records, want 80", len(got))
			}
		})
	}
}

// TestEngineModesUnderFaults copies in each mode with faults the engine
// meets: retriable produce errors and a lost producer ID, exactly-once
// transactions, three fetch lanes. The target holds every record once, in
// order (faultCopy.run).
func TestEngineModesUnderFaults(t *testing.T) {
	for _, m := range modes {
		for _, tc := range []struct {
			name string
			fc   func() *faultCopy
		}{
			{"retriable errors", func() *faultCopy {
				return &faultCopy{inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
					switch n % 7 {
					case 2:
						return errorResponse(pr, kerr.NotLeaderForPartition.Code), nil, true
					case 4:
						return errorResponse(pr, kerr.NotEnoughReplicas.Code), nil, true
					}
					return nil, nil, false
				}}
			}},
			{"exactly-once", func() *faultCopy { return &faultCopy{records: 2000, txnID: "kmirror-test"} }},
			{"three lanes", func() *faultCopy { return &faultCopy{lanes: 3} }},
		} {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				fc := tc.fc()
				fc.reencode, fc.codec = m.reencode, m.codec
				fc.run(t)
			})
		}
	}
}

// TestEngineStopSavesAcknowledged: when the target never acknowledges one
// partition's batches (its leader hangs), a stopping engine gives up on
// them after drain and still saves the progress of the partition the
// target did acknowledge, so a restart copies only the rest again.
func TestEngineStopSavesAcknowledged(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newEnginePair(t, m, 2)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the clusters close
			const topic, syncs = "t", "syncs"
			f.topics(t, topic, 2, syncs)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const offsets = "mm2-offsets.A.internal"
			compact := "compact"
			if _, err := kadm.NewClient(newClient(t, f.dstOpts)).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, offsets); err != nil {
				t.Fatal(err)
			}
			// Node 1 leads A.t partition 1 only, and never answers a produce.
			for _, tp := range []struct {
				topic     string
				partition int32
				node      int32
			}{{"A." + topic, 0, 0}, {"A." + topic, 1, 1}, {offsets, 0, 0}, {syncs, 0, 0}} {
				if err := f.dst.MoveTopicPartition(tp.topic, tp.partition, tp.node); err != nil {
					t.Fatal(err)
				}
			}
			var hung atomic.Bool
			f.dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				f.dst.KeepControl()
				if f.dst.CurrentNode() == 1 {
					hung.Store(true)
					f.dst.SleepControl(func() { <-release })
				}
				return nil, nil, false
			})
			f.produce(t, topic, 2, 0, 20) // 10 records per partition
			pl, _ := f.pipeline(ctx, t, topic, 2, syncs, metrics.New())
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- pl.Run(rctx, time.Second) }()
			for {
				n := 0
				for _, rec := range readTopic(t, f.dstOpts, "A."+topic) {
					if rec.Partition == 0 {
						n++
					}
				}
				if n == 10 && hung.Load() {
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
					t.Error("Run = nil, want the batches in flight it gave up on")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return 30s after its context ended")
			}
			dstCl := newClient(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			reopened, err := progress.Open(ctx, kadm.NewClient(dstCl), f.dstOpts, dstCl,
				progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 1, ReplicationFactor: 1}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if off, ok := reopened.Get(progress.TP{Topic: topic, Partition: 0}); !ok || off < 9 {
				t.Errorf("saved progress of partition 0 = %d (saved %v), want its 10 acknowledged records", off, ok)
			}
			if off, ok := reopened.Get(progress.TP{Topic: topic, Partition: 1}); ok && off >= 0 {
				t.Errorf("saved progress of partition 1 = %d, want none: the target acknowledged nothing", off)
			}
		})
	}
}

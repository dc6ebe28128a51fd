package replicate

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

// fakePair is a source and a target cluster in this process.
type fakePair struct {
	src, dst         *kfake.Cluster
	srcOpts, dstOpts []kgo.Opt
	// lanes is the number of source clients (Config.MoreSources + 1);
	// fetches counts each one's fetch requests.
	lanes   int
	fetches []atomic.Int64
	// pauseFirst pauses the replicator before it starts, checks that it
	// copies nothing, then resumes it.
	pauseFirst bool
}

// fetchCounter counts the fetch requests a client writes.
type fetchCounter struct{ n *atomic.Int64 }

func (c fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		c.n.Add(1)
	}
}

func newFakePair(t testing.TB) *fakePair {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	t.Cleanup(dst.Close)
	return &fakePair{src: src, dst: dst,
		srcOpts: []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		dstOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}}
}

// topics creates topic with n partitions on the source and its remote
// topic A.topic on the target.
func (f *fakePair) topics(t *testing.T, topic string, n int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := kadm.NewClient(client(t, f.srcOpts)).CreateTopic(ctx, n, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(client(t, f.dstOpts)).CreateTopic(ctx, n, 1, nil, "A."+topic); err != nil {
		t.Fatal(err)
	}
}

func client(t *testing.T, opts []kgo.Opt, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runOnce replicates topic (partitions 0..n-1) until the target has want
// records in all, then stops the replicator cleanly.
func (f *fakePair) runOnce(t *testing.T, topic string, n int32, want int, syncs string) *metrics.Metrics {
	return f.run(t, topic, n, want, syncs, false)
}

func (f *fakePair) run(t *testing.T, topic string, n int32, want int, syncs string, eos bool) *metrics.Metrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := testLog()
	dstAdm := kadm.NewClient(client(t, f.dstOpts))
	popts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if eos {
		popts = append(popts, kgo.TransactionalID("kmirror-test"))
	}
	producer := client(t, f.dstOpts, popts...)
	store, err := progress.Open(ctx, dstAdm, f.dstOpts, producer, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dstAdm.CreateTopic(ctx, 1, 1, nil, syncs); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	m := metrics.New()
	w := offsetsync.New(client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner())), syncs, 100, log, nil)
	f.fetches = make([]atomic.Int64, max(f.lanes, 1))
	var sources []*kgo.Client
	for i := range f.fetches {
		sources = append(sources, client(t, f.srcOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
			kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.WithHooks(fetchCounter{&f.fetches[i]})))
	}
	r := New(Config{
		SourceAlias: "A", TargetAlias: "B",
		Source:        sources[0],
		MoreSources:   sources[1:],
		SourceAdmin:   kadm.NewClient(client(t, f.srcOpts)),
		Target:        producer,
		Progress:      store,
		Syncs:         w,
		Metrics:       m,
		Log:           log,
		Transactional: eos,
	})
	var ps []datapath.Partition
	for p := int32(0); p < n; p++ {
		ps = append(ps, datapath.Partition{TP: progress.TP{Topic: topic, Partition: p}, Remote: "A." + topic})
	}
	if f.pauseFirst {
		r.Pause()
	}
	r.Assign(ps)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, 10*time.Second) }()
	if f.pauseFirst {
		time.Sleep(500 * time.Millisecond)
		if n := len(readAll(t, f.dstOpts, "A."+topic)); n != 0 {
			t.Fatalf("paused replicator copied %d records", n)
		}
		r.Resume()
	}
	go func() { // as the flow does
		for rctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			r.Commit(rctx)
		}
	}()
	for {
		if got := len(readAll(t, f.dstOpts, "A."+topic)); got >= want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("target never reached %d records", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return m
}

func readAll(t *testing.T, opts []kgo.Opt, topic string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	if err := readlog.ToEnd(context.Background(), opts, topic, func(r *kgo.Record) { out = append(out, r) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func produce(t *testing.T, opts []kgo.Opt, topic string, n int32, from, to int) {
	t.Helper()
	cl := client(t, opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := from; i < to; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % n, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint("v", i))}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplicateResumesFromProgress(t *testing.T) {
	f := newFakePair(t)
	adm := kadm.NewClient(client(t, f.srcOpts))
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	kadm.NewClient(client(t, f.dstOpts)).CreateTopic(context.Background(), 3, 1, nil, "A.orders")
	produce(t, f.srcOpts, "orders", 3, 0, 90)
	f.runOnce(t, "orders", 3, 90, "mm2-offset-syncs.A.internal")
	produce(t, f.srcOpts, "orders", 3, 90, 150)
	f.runOnce(t, "orders", 3, 150, "mm2-offset-syncs.A.internal")

	got := readAll(t, f.dstOpts, "A.orders")
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
		if r.Partition != int32(i)%3 {
			t.Errorf("record %s in partition %d, want %d", r.Key, r.Partition, i%3)
		}
	}
	// Progress holds the last source offset of each partition: 50 records
	// each, so offset 49. The same offset may be saved more than once (a
	// timed save and the save on stop); the newest record per key counts.
	last := map[int32]int64{}
	var offs []int64
	for _, r := range readAll(t, f.dstOpts, "mm2-offsets.A.internal") {
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
		offs = append(offs, v)
		last[p] = v
	}
	for p := int32(0); p < 3; p++ {
		if o, ok := last[p]; !ok || o != 49 {
			t.Errorf("partition %d: last progress %d (present %v), want 49; all records %v", p, o, ok, offs)
		}
	}
	// Offset syncs: each names the source topic and pairs offsets that
	// match record for record (upstream n -> downstream n here).
	syncs := readAll(t, f.dstOpts, "mm2-offset-syncs.A.internal")
	if len(syncs) == 0 {
		t.Fatal("no offset syncs written")
	}
	for _, r := range syncs {
		s, err := wire.DecodeOffsetSync(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if s.Topic != "orders" || s.UpstreamOffset != s.DownstreamOffset {
			t.Errorf("offset sync %+v: want topic orders and equal offsets", s)
		}
	}
}

func TestReplicateReportsGap(t *testing.T) {
	f := newFakePair(t)
	ctx := context.Background()
	adm := kadm.NewClient(client(t, f.srcOpts))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	kadm.NewClient(client(t, f.dstOpts)).CreateTopic(ctx, 1, 1, nil, "A.events")
	produce(t, f.srcOpts, "events", 1, 0, 10)
	f.runOnce(t, "events", 1, 10, "syncs")
	produce(t, f.srcOpts, "events", 1, 10, 30)
	// Records 10..14 vanish upstream before kmirror sees them.
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "events", Partition: 0, At: 15})
	if _, err := adm.DeleteRecords(ctx, o); err != nil {
		t.Fatal(err)
	}
	m := f.runOnce(t, "events", 1, 25, "syncs")
	if got := testutil.ToFloat64(m.RecordsLost.WithLabelValues("A", "B", "events", "0")); got != 5 {
		t.Errorf("records lost metric = %v, want 5", got)
	}
	got := readAll(t, f.dstOpts, "A.events")
	if len(got) != 25 || string(got[10].Key) != "15" {
		t.Errorf("target has %d records, 11th key %q; want 25 and 15", len(got), got[min(10, len(got)-1)].Key)
	}
}

func TestReplicateExactlyOnce(t *testing.T) {
	f := newFakePair(t)
	adm := kadm.NewClient(client(t, f.srcOpts))
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "txn"); err != nil {
		t.Fatal(err)
	}
	kadm.NewClient(client(t, f.dstOpts)).CreateTopic(context.Background(), 2, 1, nil, "A.txn")
	produce(t, f.srcOpts, "txn", 2, 0, 40)
	f.run(t, "txn", 2, 40, "syncs", true)
	produce(t, f.srcOpts, "txn", 2, 40, 70)
	f.run(t, "txn", 2, 70, "syncs", true)
	got := readAll(t, f.dstOpts, "A.txn")
	if len(got) != 70 {
		t.Fatalf("target has %d committed records, want 70", len(got))
	}
	// Progress was written inside the transactions: committed, readable.
	var saved int
	for _, r := range readAll(t, f.dstOpts, "mm2-offsets.A.internal") {
		if _, err := wire.DecodeOffsetValue(r.Value); err == nil {
			saved++
		}
	}
	if saved == 0 {
		t.Error("no committed progress records")
	}
}

// TestReplicateLanes copies four partitions over three source clients:
// the partitions are spread over them, and every record arrives once, in
// order, in its partition.
func TestReplicateLanes(t *testing.T) {
	f := newFakePair(t)
	f.lanes = 3
	f.topics(t, "lanes", 4)
	produce(t, f.srcOpts, "lanes", 4, 0, 400)
	f.runOnce(t, "lanes", 4, 400, "mm2-offset-syncs.B.internal")
	next := map[int32]int{0: 0, 1: 1, 2: 2, 3: 3}
	got := readAll(t, f.dstOpts, "A.lanes")
	for _, r := range got {
		if want := fmt.Sprint(next[r.Partition]); string(r.Key) != want {
			t.Fatalf("partition %d offset %d: key %s, want %s", r.Partition, r.Offset, r.Key, want)
		}
		next[r.Partition] += 4
	}
	if len(got) != 400 {
		t.Errorf("target holds %d records, want 400", len(got))
	}
	busy := 0
	for i := range f.fetches {
		if f.fetches[i].Load() > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("%d of 3 source clients fetched; want the partitions spread", busy)
	}
}

// TestReplicateLanesPauseResume starts paused over two source clients and
// copies everything once resumed.
func TestReplicateLanesPauseResume(t *testing.T) {
	f := newFakePair(t)
	f.lanes, f.pauseFirst = 2, true
	f.topics(t, "paused", 3)
	produce(t, f.srcOpts, "paused", 3, 0, 60)
	f.runOnce(t, "paused", 3, 60, "mm2-offset-syncs.B.internal")
	if got := len(readAll(t, f.dstOpts, "A.paused")); got != 60 {
		t.Errorf("target holds %d records, want 60", got)
	}
}

// TestReplicateRewind copies a topic, then rewinds it as the flow does for
// a re-created source topic: every record is copied again from the log
// start, even with StartAtEnd, and the progress follows.
func TestReplicateRewind(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			f := newFakePair(t)
			f.topics(t, "rw", 2)
			produce(t, f.srcOpts, "rw", 2, 0, 40)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tps := []progress.TP{{Topic: "rw", Partition: 0}, {Topic: "rw", Partition: 1}}
			r, store := twoPartitionReplicator(ctx, t, f, "rw", group, !group)
			if group {
				r.Assign([]datapath.Partition{{TP: tps[0], Remote: "A.rw"}, {TP: tps[1], Remote: "A.rw"}})
			} else {
				// Saved progress, so that StartAtEnd does not apply yet.
				if err := store.Save(ctx, map[progress.TP]int64{tps[0]: 0, tps[1]: 4}); err != nil {
					t.Fatal(err)
				}
				r.Assign([]datapath.Partition{{TP: tps[0], Remote: "A.rw"}, {TP: tps[1], Remote: "A.rw"}})
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx, 10*time.Second) }()
			waitPositions := func(want int64) {
				t.Helper()
				for {
					pos := r.Positions()
					if pos[tps[0]] == want && pos[tps[1]] == want {
						return
					}
					if ctx.Err() != nil {
						t.Fatalf("positions %v, want %d", pos, want)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			waitPositions(19)
			first := len(readAll(t, f.dstOpts, "A.rw"))
			if err := store.Save(ctx, map[progress.TP]int64{tps[0]: -1, tps[1]: -1}); err != nil {
				t.Fatal(err)
			}
			if err := r.Rewind(ctx, "rw"); err != nil {
				t.Fatal(err)
			}
			waitPositions(19)
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := len(readAll(t, f.dstOpts, "A.rw")); got != first+40 {
				t.Errorf("target holds %d records, want %d", got, first+40)
			}
			for _, tp := range tps {
				if got, _ := store.Get(tp); got != 19 {
					t.Errorf("%s saved at %d, want 19", tp, got)
				}
			}
		})
	}
}

// TestReplicateRestart stands for what the watchdog meets: a partition
// that stopped fetching (here its fetching is stopped by hand) while its
// source grows. Restart gets it copying again from its progress, and the
// target holds every record once.
func TestReplicateRestart(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			f := newFakePair(t)
			f.topics(t, "rs", 2)
			produce(t, f.srcOpts, "rs", 2, 0, 40)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tps := []progress.TP{{Topic: "rs", Partition: 0}, {Topic: "rs", Partition: 1}}
			r, _ := twoPartitionReplicator(ctx, t, f, "rs", group, false)
			r.Assign([]datapath.Partition{{TP: tps[0], Remote: "A.rs"}, {TP: tps[1], Remote: "A.rs"}})
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx, 10*time.Second) }()
			waitPosition := func(tp progress.TP, want int64) {
				t.Helper()
				for r.Positions()[tp] != want {
					if ctx.Err() != nil {
						t.Fatalf("%s at %d, want %d", tp, r.Positions()[tp], want)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			waitPosition(tps[0], 19)
			waitPosition(tps[1], 19)
			r.stopFetching(tps[0])
			produce(t, f.srcOpts, "rs", 2, 40, 80)
			waitPosition(tps[1], 39)
			time.Sleep(300 * time.Millisecond)
			if got := r.Positions()[tps[0]]; got != 19 {
				t.Fatalf("%s at %d while not fetching, want 19", tps[0], got)
			}
			if r.Restart(ctx, progress.TP{Topic: "gone", Partition: 0}) {
				t.Error("Restart of a partition not assigned reported true")
			}
			if !r.Restart(ctx, tps[0]) {
				t.Fatal("Restart of an idle partition reported false")
			}
			waitPosition(tps[0], 39)
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := len(readAll(t, f.dstOpts, "A.rs")); got != 80 {
				t.Errorf("target holds %d records, want 80", got)
			}
		})
	}
}

// twoPartitionReplicator makes a Replicator of the two partitions of topic
// on f with a progress store on f's target. With group, its source client
// stands for the group consumer of group mode: the partitions are set on it
// directly.
func twoPartitionReplicator(ctx context.Context, t *testing.T, f *fakePair, topic string, group, startAtEnd bool) (*Replicator, *progress.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	dstAdm := kadm.NewClient(client(t, f.dstOpts))
	producer := client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	store, err := progress.Open(ctx, dstAdm, f.dstOpts, producer, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 1, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	copts := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NoResetOffset())}
	if group {
		copts = append(copts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	}
	r := New(Config{SourceAlias: "A", TargetAlias: "B", Source: client(t, f.srcOpts, copts...), SourceAdmin: kadm.NewClient(client(t, f.srcOpts)),
		Target: producer, Progress: store, Metrics: metrics.New(), Log: log, StartAtEnd: startAtEnd, Group: group})
	return r, store
}

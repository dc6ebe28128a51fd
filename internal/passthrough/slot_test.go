package passthrough

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/slots"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

// eosWorker is one transactional Pipeline between two real clusters, as
// one kmirror worker runs it: its own progress store, metrics and log.
type eosWorker struct {
	pl    *Pipeline
	store *progress.Store
	m     *metrics.Metrics
	logs  *lockedBuffer
	ctx   context.Context // Run's
	stop  context.CancelFunc
	done  chan error
}

// startEOSWorker starts a transactional Pipeline from topic on a to its
// remote on b, with the transactional ID txnID spread over n slots (0:
// one transaction), its target client made with targetOpts. It runs until
// halt.
func startEOSWorker(ctx context.Context, t *testing.T, a, b *testkafka.Cluster, topic, txnID string, n int, targetOpts ...kgo.Opt) *eosWorker {
	t.Helper()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	adm := b.Admin(t)
	store, err := progress.Open(ctx, adm, []kgo.Opt{kgo.SeedBrokers(b.Bootstrap...)}, b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), progress.Options{
		Topic: "mm2-offsets." + topic + ".internal", Source: "A", Partitions: 3, ReplicationFactor: 1,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: a.Client(t), SourceAdmin: a.Admin(t),
		Target: b.Client(t, targetOpts...), TargetAdmin: adm, Progress: store, Metrics: m, Log: log, TransactionalID: txnID, Slots: n})
	rctx, stop := context.WithCancel(ctx)
	w := &eosWorker{pl: pl, store: store, m: m, logs: logs, ctx: rctx, stop: stop, done: make(chan error, 1)}
	go func() { w.done <- pl.Run(rctx, 10*time.Second) }()
	return w
}

// take does what datapath.Group does on an assignment: fence the
// previous owners of tps' slots, read the progress, assign.
func (w *eosWorker) take(ctx context.Context, t *testing.T, remote string, tps []progress.TP) {
	t.Helper()
	if failed := w.pl.Fence(ctx, tps); len(failed) > 0 {
		t.Fatalf("Fence: %v", failed)
	}
	if err := w.store.CatchUpStable(ctx); err != nil {
		t.Fatal(err)
	}
	w.pl.Assign(partitionsOf(tps, remote))
}

// halt stops the worker cleanly and returns what Run returned.
func (w *eosWorker) halt() error {
	w.stop()
	return <-w.done
}

// waitCopied waits until the worker's progress of every partition of tps
// is at least last; -1 means the source's last offset now.
func (w *eosWorker) waitCopied(ctx context.Context, t *testing.T, a *testkafka.Cluster, tps []progress.TP, last int64) {
	t.Helper()
	want := map[progress.TP]int64{}
	for _, tp := range tps {
		want[tp] = last
	}
	if last < 0 {
		ends, err := a.Admin(t).ListEndOffsets(ctx, tps[0].Topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range tps {
			o, _ := ends.Lookup(tp.Topic, tp.Partition)
			want[tp] = o.Offset - 1
		}
	}
	for {
		pos, all := w.pl.Positions(), true
		for _, tp := range tps {
			all = all && pos[tp] >= want[tp]
		}
		if all {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("positions %v, want %v; log:\n%s", pos, want, tail(w.logs.String(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// produceSeq writes records from..to-1 to each partition, keyed by
// partition and sequence number.
func produceSeq(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, parts int32, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for p := range parts {
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "%d-%d", p, i), Value: []byte("v")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// uncommitted counts the records of topic per partition as a
// read_uncommitted consumer sees them: committed and aborted.
func uncommitted(ctx context.Context, t *testing.T, c *testkafka.Cluster, topic string) map[int32]int {
	t.Helper()
	ends, err := c.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	for _, o := range ends[topic] {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	}
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())
	out := map[int32]int{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s uncommitted: %v left", topic, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				// Markers take offsets but are not records.
			} else {
				out[r.Partition]++
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// checkOnce checks that a read_committed reader of remote sees each
// source record of topic once, in order.
func checkOnce(t *testing.T, a, b *testkafka.Cluster, topic, remote string) map[int32]int {
	t.Helper()
	src, dst := a.ReadAll(t, topic), b.ReadAll(t, remote)
	got := map[int32]int{}
	for _, r := range dst {
		got[r.Partition]++
	}
	if len(dst) != len(src) {
		t.Errorf("target holds %d records (read_committed), source %d", len(dst), len(src))
	}
	for i := range min(len(src), len(dst)) {
		if src[i].Partition != dst[i].Partition || string(src[i].Key) != string(dst[i].Key) {
			t.Errorf("record %d: target %d/%s, source %d/%s", i, dst[i].Partition, dst[i].Key, src[i].Partition, src[i].Key)
			break
		}
	}
	return got
}

// TestSlotFencedOnBroker runs two workers of one exactly-once flow with
// two slots on real brokers. The first holds both slots, commits, and
// then has a transaction open in each when the second takes one slot
// over: Fence bumps the slot's epoch, which aborts the first worker's
// open transaction of that slot. The first worker learns it at its next
// commit, or at its next produce: that slot's partitions stop, with the
// reason in the status and the fencing counted, while its other slot goes
// on copying. Learning it must not abort the new owner's transaction,
// open at that moment (an InitProducerID with the old epoch would). A
// read_committed reader sees every record once; on the target the first
// worker's open transaction is aborted, and nothing else.
func TestSlotFencedOnBroker(t *testing.T) {
	for _, learn := range []string{"commit", "produce"} {
		t.Run("learns at "+learn, func(t *testing.T) { slotFenced(t, learn) })
	}
}

func slotFenced(t *testing.T, learn string) {
	const parts, nslots = 4, 2
	a, b, all := sharedPair(t, "ptslot", parts)
	topic, remote := all[0].Topic, "A."+all[0].Topic
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var moved, kept []progress.TP
	for _, tp := range all {
		if slots.Of(topic, tp.Partition, nslots) == 0 {
			moved = append(moved, tp)
		} else {
			kept = append(kept, tp)
		}
	}
	if len(moved) == 0 || len(kept) == 0 {
		t.Fatalf("slots of %s: %v and %v; want both used", topic, moved, kept)
	}
	pcl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txnID := "kmirror-test-" + topic

	w1 := startEOSWorker(ctx, t, a, b, topic, txnID, nslots)
	var w2 *eosWorker
	defer func() {
		// Whatever check failed, say what each worker was doing.
		if !t.Failed() {
			return
		}
		for i, w := range []*eosWorker{w1, w2} {
			if w != nil {
				t.Logf("worker %d: positions %v, status %+v, fenced %v; log:\n%s", i+1, w.pl.Positions(), w.pl.Status(nil),
					testutil.ToFloat64(w.m.Fenced.WithLabelValues("A", "B")), tail(w.logs.String(), 6000))
			}
		}
	}()
	w1.take(ctx, t, remote, all)
	produceSeq(ctx, t, pcl, topic, parts, 0, 50)
	w1.waitCopied(ctx, t, a, all, 49)
	if err := w1.pl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Both slots' transactions open, with records in them.
	produceSeq(ctx, t, pcl, topic, parts, 50, 100)
	w1.waitCopied(ctx, t, a, all, 99)

	w2 = startEOSWorker(ctx, t, a, b, topic, txnID, nslots)
	w2.take(ctx, t, remote, moved)
	if !strings.Contains(w2.logs.String(), "exactly-once: slot taken") {
		t.Error("the second worker does not log the slot taken")
	}
	for _, tp := range moved {
		if saved, _ := w2.store.Get(tp); saved != 49 {
			t.Errorf("the second worker resumes %s after %d, want after 49 (the first worker's last commit)", tp, saved)
		}
	}
	// The new owner has its own transaction under way when the old one
	// learns it was fenced: that must not abort it.
	w2.waitCopied(ctx, t, a, moved, 99)
	switch learn {
	case "commit":
		if err := w1.pl.Commit(ctx); err != nil {
			t.Errorf("Commit of the fenced worker: %v; want nil (the fenced slot is reported, the other commits)", err)
		}
	case "produce":
		produceSeq(ctx, t, pcl, topic, parts, 100, 110)
	}
	stopped := func() bool {
		n := 0
		for _, st := range w1.pl.Status(nil) {
			if slots.Of(st.Topic, st.Partition, nslots) == 0 && st.State == datapath.Stopped && strings.Contains(st.Error, "fenced") {
				n++
			}
		}
		return n == len(moved)
	}
	for !stopped() {
		if ctx.Err() != nil {
			t.Fatalf("the fenced slot's partitions did not stop: %+v; log:\n%s", w1.pl.Status(nil), tail(w1.logs.String(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, st := range w1.pl.Status(nil) {
		if slots.Of(st.Topic, st.Partition, nslots) == 1 && st.State == datapath.Stopped {
			t.Errorf("partition %d of the slot kept stopped: %s", st.Partition, st.Error)
		}
	}
	// fence counts and logs it after the partitions show stopped (a
	// loaded run checked the log in between).
	testwait.For(t, 10*time.Second, "the fenced worker to log it", func() bool {
		return strings.Contains(w1.logs.String(), "exactly-once: this worker was fenced")
	})
	if n := testutil.ToFloat64(w1.m.Fenced.WithLabelValues("A", "B")); n != 1 {
		t.Errorf("kmirror_exactly_once_fenced_total %v, want 1", n)
	}
	if err := w1.pl.Fatal(); err != nil {
		t.Errorf("a fenced slot stopped the whole Pipeline: %v", err)
	}
	if n := testutil.ToFloat64(w2.m.Fenced.WithLabelValues("A", "B")); n != 0 {
		t.Errorf("the new owner was fenced %v times by the old one learning it was fenced; log:\n%s", n, tail(w2.logs.String(), 3000))
	}
	// The group takes the fenced slot away: a clean revoke.
	if err := w1.pl.Revoke(ctx, moved); err != nil {
		t.Errorf("Revoke of the fenced slot: %v", err)
	}

	produceSeq(ctx, t, pcl, topic, parts, 110, 150)
	w1.waitCopied(ctx, t, a, kept, -1)
	w2.waitCopied(ctx, t, a, moved, -1)
	for i, w := range []*eosWorker{w1, w2} {
		if err := w.halt(); err != nil {
			t.Errorf("worker %d stopped with %v", i+1, err)
		}
	}
	got := checkOnce(t, a, b, topic, remote)
	raw := uncommitted(ctx, t, b, remote)
	// The first worker's open transaction (records 50 to 99) was
	// aborted, and nothing else.
	for _, tp := range moved {
		if aborted := raw[tp.Partition] - got[tp.Partition]; aborted != 50 {
			t.Errorf("%s: %d records read uncommitted, %d committed: %d aborted, want the 50 of the first worker's open transaction", tp, raw[tp.Partition], got[tp.Partition], aborted)
		}
	}
	for _, tp := range kept {
		if raw[tp.Partition] != got[tp.Partition] {
			t.Errorf("%s: %d records read uncommitted, %d committed; want no aborted record", tp, raw[tp.Partition], got[tp.Partition])
		}
	}
	t.Logf("per partition: committed %v, with aborted %v", got, raw)
}

// stopAtEndTxn cancels the context it is armed with as soon as its
// client has written an EndTxn request: a stop while a commit ends its
// transaction.
type stopAtEndTxn struct {
	armed atomic.Pointer[context.CancelFunc]
}

func (h *stopAtEndTxn) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.EndTxn) && err == nil {
		if stop := h.armed.Swap(nil); stop != nil {
			(*stop)()
		}
	}
}

// TestStopDuringCommitOnBroker stops an exactly-once Pipeline again and
// again while a commit loop commits, as the flow's does with the same
// context as Run: every other stop comes exactly while a commit's EndTxn
// is on its way, the others at a random moment. A commit under way must
// finish: each stop must be clean (Run returns nil, nothing is aborted
// or logged as an error), and no record may be copied twice (the target
// holds no aborted record at the end).
func TestStopDuringCommitOnBroker(t *testing.T) {
	const parts = 3
	a, b, all := sharedPair(t, "ptstop", parts)
	topic, remote := all[0].Topic, "A."+all[0].Topic
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pctx, stopProducing := context.WithCancel(ctx)
	var produced sync.WaitGroup
	produced.Add(1)
	go func() {
		defer produced.Done()
		cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		for i := 0; pctx.Err() == nil; i++ {
			produceSeq(ctx, t, cl, topic, parts, i*20, i*20+20)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	txnID := "kmirror-test-" + topic
	const rounds = 10
	for round := range rounds {
		hook := &stopAtEndTxn{}
		w := startEOSWorker(ctx, t, a, b, topic, txnID, 0, kgo.WithHooks(hook))
		w.pl.Assign(partitionsOf(all, remote))
		loop := make(chan struct{})
		go func() {
			defer close(loop)
			for w.ctx.Err() == nil {
				_ = w.pl.Commit(w.ctx)
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
		if round%2 == 0 {
			hook.armed.Store(&w.stop)
			<-w.ctx.Done()
		}
		err := w.halt()
		<-loop
		if err != nil {
			t.Errorf("round %d: Run returned %v", round, err)
		}
		for _, l := range strings.Split(w.logs.String(), "\n") {
			if strings.Contains(l, "level=ERROR") || strings.Contains(l, "abort") {
				t.Errorf("round %d: %s", round, l)
			}
		}
	}
	stopProducing()
	produced.Wait()
	w := startEOSWorker(ctx, t, a, b, topic, txnID, 0)
	w.pl.Assign(partitionsOf(all, remote))
	w.waitCopied(ctx, t, a, all, -1)
	if err := w.halt(); err != nil {
		t.Errorf("last run: %v", err)
	}
	got := checkOnce(t, a, b, topic, remote)
	raw := uncommitted(ctx, t, b, remote)
	for p, n := range got {
		if raw[p] != n {
			t.Errorf("partition %d: %d records read uncommitted, %d committed: %d copied twice (an aborted transaction)", p, raw[p], n, raw[p]-n)
		}
	}
	t.Logf("%d stops, %d of them while an EndTxn was on its way; committed %v", rounds, (rounds+1)/2, got)
}

// sharedPair makes a topic of parts partitions on the first shared
// cluster and its remote topic "A.<topic>" on the second, and returns the
// clusters and the source partitions.
func sharedPair(t *testing.T, prefix string, parts int32) (a, b *testkafka.Cluster, tps []progress.TP) {
	cs := testkafka.Shared(t, 2)
	a, b = cs[0], cs[1]
	topic := testkafka.Topic(t, prefix)
	a.CreateTopic(t, topic, parts, nil)
	b.CreateTopic(t, "A."+topic, parts, nil)
	for p := range parts {
		tps = append(tps, progress.TP{Topic: topic, Partition: p})
	}
	return a, b, tps
}

func partitionsOf(tps []progress.TP, remote string) []datapath.Partition {
	var ps []datapath.Partition
	for _, tp := range tps {
		ps = append(ps, datapath.Partition{TP: tp, Remote: remote})
	}
	return ps
}

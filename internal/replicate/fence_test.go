package replicate

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/slots"
)

// TestFencedSlot plays a worker that lost its slot while it was paused
// (a zombie): a new owner initialises the slot's transactional ID while the
// zombie has a transaction open. The zombie's commit must fail, it must
// stop writing the slot, and a read_committed reader of the target must not
// see what it copied in that transaction.
func TestFencedSlot(t *testing.T) {
	f := newFakePair(t)
	const topic = "fenced"
	f.topics(t, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := testLog()
	dstAdm := kadm.NewClient(client(t, f.dstOpts))
	store, err := progress.Open(ctx, dstAdm, f.dstOpts, client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner())),
		progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 5, ReplicationFactor: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	txnID := func(n int) string { return slots.TransactionalID("kmirror-test", n) }
	slotProducer := func(n int) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.TransactionalID(txnID(n)), kgo.RecordPartitioner(kgo.ManualPartitioner())}, f.dstOpts...)...)
	}
	m := metrics.New()
	r := New(Config{
		SourceAlias: "A", TargetAlias: "B",
		Source: client(t, f.srcOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
			kgo.ConsumeResetOffset(kgo.NoResetOffset())),
		SourceAdmin:   kadm.NewClient(client(t, f.srcOpts)),
		Target:        client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner())),
		Progress:      store,
		Metrics:       m,
		Log:           log,
		Transactional: true,
		SlotProducer:  slotProducer,
		Slots:         1, // both partitions in slot 0
	})
	tps := []progress.TP{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}}
	if failed := r.Fence(ctx, tps); len(failed) > 0 {
		t.Fatal(failed)
	}
	var ps []datapath.Partition
	for _, tp := range tps {
		ps = append(ps, datapath.Partition{TP: tp, Remote: "A." + topic})
	}
	r.Assign(ps)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, 5*time.Second) }()

	src := client(t, f.srcOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := src.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	committed := func() int {
		n := 0
		cl := client(t, f.dstOpts, kgo.ConsumeTopics("A."+topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		for pctx.Err() == nil {
			n += cl.PollFetches(pctx).NumRecords()
		}
		return n
	}
	acked := func(off int64) func() bool {
		return func() bool { pos := r.Positions(); return pos[tps[0]] >= off && pos[tps[1]] >= off }
	}
	produce(0, 10)
	waitTrue(t, acked(4), "the first records acknowledged")
	if err := r.Commit(ctx); err != nil {
		t.Fatalf("commit before the fence: %v", err)
	}
	waitTrue(t, func() bool { return committed() == 10 }, "the first 10 records committed")

	// More records go out in a transaction left open...
	produce(10, 20)
	waitTrue(t, acked(9), "the next records acknowledged")
	// ... when a new owner takes the slot.
	owner, err := slotProducer(0)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, _, err := owner.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(ctx); err == nil {
		t.Fatal("the fenced worker's commit succeeded")
	} else {
		t.Logf("fenced worker's commit: %v", err)
	}
	produce(20, 30)
	time.Sleep(500 * time.Millisecond)
	_ = r.Commit(ctx)
	if got := committed(); got != 10 {
		t.Errorf("read_committed reader sees %d records, want the 10 committed before the fence", got)
	}
	if n := testutil.ToFloat64(m.Fenced.WithLabelValues("A", "B")); n != 1 {
		t.Errorf("kmirror_exactly_once_fenced_total %v, want 1", n)
	}
	stop()
	if err := <-done; err != nil {
		t.Logf("Run: %v", err)
	}
}

// testLog logs to stderr with -v, nowhere otherwise.
func testLog() *slog.Logger {
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

func waitTrue(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

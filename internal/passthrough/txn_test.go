package passthrough

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/kmirror/kmirror/internal/progress"
)

// checkCommitted checks, after an exactly-once copy of n records, that a
// read_committed reader sees no record beyond them and that the
// committed progress covers them all.
func (fc *faultCopy) checkCommitted(ctx context.Context, t *testing.T, rd *kgo.Client, dst *kfake.Cluster, n int) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	extra := 0
	rd.PollFetches(pctx).EachRecord(func(*kgo.Record) { extra++ })
	cancel()
	if extra > 0 {
		t.Errorf("%d records beyond the %d copied: written twice", extra, n)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	saved, err := progress.Read(ctx, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, "mm2-offsets.A.internal", "A", log)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if got := saved[progress.TP{Topic: "t", Partition: p}]; got != int64(n/2-1) {
			t.Errorf("committed progress of t-%d is %d, want %d", p, got, n/2-1)
		}
	}
}

// TestTransactionalCopy copies exactly-once between two kfake clusters,
// with commits every 50 ms, while the target answers some produce requests
// with errors: retriable ones are sent again in the transaction, a lost
// producer aborts it and the partitions go back to the committed progress.
// A read_committed reader sees every record once, in order.
func TestTransactionalCopy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int16 // answered to every 7th produce request; 0 none
		aborts bool
	}{
		{"clean", 0, false},
		{"retriable errors", kerr.NotEnoughReplicas.Code, false},
		{"lost producer", kerr.UnknownProducerID.Code, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &faultCopy{records: 4000, txnID: "kmirror-test"}
			switch {
			case tc.aborts:
				// UNKNOWN_PRODUCER_ID means a lost producer only on
				// the oldest unacknowledged batch of a partition; on
				// a later one it is retried in the transaction. Which
				// batches a request carries depends on timing, so
				// from the 3rd request on every request is answered
				// with it until one comes with a new epoch: the
				// oldest batch is among them by then. (Waiting for a
				// first commit instead is not sure: under load the
				// only commit may be the last one.)
				var first struct { // producer of the 3rd request
					pid   int64
					epoch int16
				}
				fc.inject = func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
					pid, epoch := producerOf(t, pr)
					switch {
					case n < 3:
						return nil, nil, false
					case n == 3:
						first.pid, first.epoch = pid, epoch
					case pid != first.pid || epoch != first.epoch:
						return nil, nil, false
					}
					return errorResponse(pr, tc.code), nil, true
				}
			case tc.code != 0:
				fc.inject = func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
					if n%7 != 3 || n > 40 {
						return nil, nil, false
					}
					return errorResponse(pr, tc.code), nil, true
				}
			}
			st, _ := fc.run(t)
			if tc.aborts && st.pids < 2 {
				t.Errorf("%d producer epochs; want the lost producer to abort the transaction with a new one", st.pids)
			}
			if !tc.aborts && st.pids != 1 {
				t.Errorf("%d producer epochs; want 1", st.pids)
			}
		})
	}
}

// producerOf returns the producer ID and epoch of the first batch of pr.
func producerOf(t *testing.T, pr *kmsg.ProduceRequest) (int64, int16) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(pr.Topics[0].Partitions[0].Records); err != nil {
		t.Errorf("produce request with a batch that does not parse: %v", err)
	}
	return b.ProducerID, b.ProducerEpoch
}

// TestFencedStops: a second producer with the same transactional ID
// fences the Pipeline, which stops with errFenced and writes nothing more.
func TestFencedStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srcCl, dst := twoPartitions(ctx, t, 200)
	dstCl, store := openTarget(ctx, t, dst, 2)
	m := metrics.New()
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), TransactionalID: "kmirror-fence"})
	pl.Assign([]datapath.Partition{{TP: progress.TP{Topic: "t", Partition: 0}, Remote: "A.t"}, {TP: progress.TP{Topic: "t", Partition: 1}, Remote: "A.t"}})
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx, 5*time.Second) }()
	for pos := pl.Positions(); pos[progress.TP{Topic: "t", Partition: 0}] < 99; pos = pl.Positions() {
		time.Sleep(10 * time.Millisecond)
	}
	if err := pl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.TransactionalID("kmirror-fence"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: "A.t", Partition: 0, Value: []byte("other")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := other.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// More source records: the fenced Pipeline must not write them.
	for i := range 50 {
		if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "late %d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, errFenced) {
			t.Fatalf("Run returned %v, want %v", err, errFenced)
		}
	case <-ctx.Done():
		t.Fatal("the fenced Pipeline did not stop")
	}
	if err := pl.Commit(ctx); !errors.Is(err, errFenced) {
		t.Errorf("Commit after fencing returned %v, want %v", err, errFenced)
	}
	if n := testutil.ToFloat64(m.Fenced.WithLabelValues("A", "B")); n != 1 {
		t.Errorf("kmirror_exactly_once_fenced_total %v, want 1", n)
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.ConsumeTopics("A.t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	late := 0
	for got := 0; got < 201; {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := rd.PollFetches(pctx)
		pcancel()
		if pctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if len(r.Value) > 4 && string(r.Value[:4]) == "late" {
				late++
			}
		})
	}
	if late > 0 {
		t.Errorf("%d records written after fencing", late)
	}
}

// TestCommitDueExactlyOnce: in exactly-once mode CommitDue is ready
// once a transaction has been open txnCommitAge, whatever the flush
// interval (a flow with offset.flush.interval.ms = 60000 still ends its
// transactions every second), and not while none is open.
func TestCommitDueExactlyOnce(t *testing.T) {
	a, b, all := sharedPair(t, "ptdue", 2)
	topic, remote := all[0].Topic, "A."+all[0].Topic
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startEOSWorker(ctx, t, a, b, topic, "kmirror-test-"+topic, 0)
	defer w.halt()
	due := w.pl.CommitDue(1 << 40) // the count does not apply here
	w.take(ctx, t, remote, all)
	pcl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for round := range 2 {
		select {
		case <-due:
			t.Fatalf("round %d: ready with no transaction open", round)
		case <-time.After(2 * txnCommitAge):
		}
		start := time.Now()
		produceSeq(ctx, t, pcl, topic, 2, round*10, round*10+10)
		w.waitCopied(ctx, t, a, all, int64(round*10+9))
		select {
		case <-due:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: not ready 30 s after the transaction opened", round)
		}
		if d := time.Since(start); d < txnCommitAge {
			t.Errorf("round %d: ready %v after the first record, before the transaction was %v old", round, d, txnCommitAge)
		}
		if err := w.pl.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

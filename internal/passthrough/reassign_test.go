package passthrough

import (
	"context"
	"fmt"
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

// TestReassignedPartitionKeepsSequences: a partition revoked and given
// back to the same Pipeline goes on with its producer's sequences. The
// target still holds that producer's state for the partition, so batches
// numbered from 0 again would be taken for retries of the first ones
// (DUPLICATE_SEQUENCE_NUMBER, answered as written) and silently dropped:
// a robustness run lost 2 records this way after a rebalance gave a
// worker back a partition it had held for 2 seconds. Exactly-once goes
// through the same path: the revocation commits, and the transactional
// producer keeps its ID and epoch, so its sequences must go on too.
func TestReassignedPartitionKeepsSequences(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { reassign(t, m, "") })
	}
	t.Run("exactly-once", func(t *testing.T) { reassign(t, mode{name: "forward"}, "kmirror-reassign") })
}

func reassign(t *testing.T, m mode, txnID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srcCl, dst := twoPartitions(ctx, t, 0)
	n := 0
	// produce writes three batches of two records: a few batches, so the
	// target's window of a producer's last five still holds the first.
	produce := func() {
		t.Helper()
		for range 3 {
			if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: fmt.Append(nil, n)}, &kgo.Record{Topic: "t", Key: fmt.Append(nil, n+1)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n += 2
		}
	}
	dstCl, store := openTarget(ctx, t, dst, 1)
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ReencodeAll: m.reencode, Codec: m.codec,
		TransactionalID: txnID})
	tp := progress.TP{Topic: "t", Partition: 0}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	copied := func() {
		t.Helper()
		for pl.Positions()[tp] != int64(n-1) {
			if ctx.Err() != nil {
				t.Fatalf("position %v, want %d", pl.Positions(), n-1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	produce()
	pl.Assign([]datapath.Partition{{TP: tp, Remote: "A.t"}})
	copied()
	if err := pl.Revoke(ctx, []progress.TP{tp}); err != nil {
		t.Fatal(err)
	}
	produce()
	pl.Assign([]datapath.Partition{{TP: tp, Remote: "A.t"}})
	copied()
	if err := pl.Revoke(ctx, []progress.TP{tp}); err != nil { // commits, with exactly-once
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Read everything the target holds (read_committed: with exactly-once
	// only committed records count): n records, then one poll more that
	// finds nothing. Fewer than n fail at the test's deadline.
	rd, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.ConsumeTopics("A.t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var keys []string
	for more := true; more; {
		pctx, pcancel := ctx, context.CancelFunc(func() {})
		if len(keys) >= n {
			pctx, pcancel = context.WithTimeout(ctx, time.Second)
		}
		fs := rd.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("target holds %d records %v, want %d", len(keys), keys, n)
		}
		before := len(keys)
		fs.EachRecord(func(r *kgo.Record) { keys = append(keys, string(r.Key)) })
		more = len(keys) < n || len(keys) > before
	}
	if len(keys) != n {
		t.Fatalf("target holds %d records %v, want %d", len(keys), keys, n)
	}
	for i, k := range keys {
		if k != fmt.Sprint(i) {
			t.Fatalf("target record %d has key %s, want %d: %v", i, k, i, keys)
		}
	}
}

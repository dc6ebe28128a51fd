package passthrough

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestRevokeAfterAbortedCommit: a commit fails while writing its progress
// in the transaction (the offsets topic deleted on the target:
// AddPartitionsToTxn answers UNKNOWN_TOPIC_OR_PARTITION), and the
// partitions are revoked (a rebalance) before the abort is through. The
// aborted transaction took the records acknowledged in it, so the
// revocation's final commit must save the committed progress, not the
// positions of those records. Robustness seed 3 lost 111 records so: a
// worker's revocation committed, in the new epoch's otherwise empty
// transaction, the progress of the batches the abort had taken back.
func TestRevokeAfterAbortedCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srcCl, dst := twoPartitions(ctx, t, 100)
	var failAdd, holdAbort atomic.Bool
	aborting, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	dst.ControlKey(int16(kmsg.AddPartitionsToTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		r := req.(*kmsg.AddPartitionsToTxnRequest)
		if !failAdd.Load() || len(r.Topics) == 0 || r.Topics[0].Topic != "mm2-offsets.A.internal" {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// The abort waits until the partitions are revoked: the revocation's
	// commit then comes after the restart, as a commit waits for it.
	dst.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if !req.(*kmsg.EndTxnRequest).Commit && holdAbort.Load() {
			close(aborting)
			<-release
		}
		return nil, nil, false
	})
	dstCl, store := openTarget(ctx, t, dst, 2)
	logs := &lockedBuffer{}
	defer func() {
		if t.Failed() {
			t.Logf("pipeline log:\n%s", tail(logs.String(), 6000))
		}
	}()
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(logs, nil)), TransactionalID: "kmirror-revoke"})
	tps := []progress.TP{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	pl.Assign([]datapath.Partition{{TP: tps[0], Remote: "A.t"}, {TP: tps[1], Remote: "A.t"}})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 5*time.Second) }()
	defer func() {
		rcancel()
		<-done
	}()
	waitAt := func(off int64) {
		t.Helper()
		for pos := pl.Positions(); pos[tps[0]] < off || pos[tps[1]] < off; pos = pl.Positions() {
			if ctx.Err() != nil {
				t.Fatalf("positions %v, want %d", pos, off)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAt(49)
	if err := pl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: []byte("more")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitAt(99) // acknowledged in the open transaction
	failAdd.Store(true)
	holdAbort.Store(true)
	if err := pl.Commit(ctx); !kafkaerr.TopicGone(err) {
		t.Fatalf("commit with the offsets topic unknown returned %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	failAdd.Store(false)
	<-aborting // the restart holds the transaction now
	pl.mu.Lock()
	p0, p1 := pl.parts[tps[0]], pl.parts[tps[1]]
	pl.mu.Unlock()
	revoked := make(chan error, 1)
	go func() { revoked <- pl.Revoke(ctx, tps) }()
	for {
		pl.mu.Lock()
		both := p0.revoked && p1.revoked
		pl.mu.Unlock()
		if both {
			break
		}
		time.Sleep(time.Millisecond)
	}
	holdAbort.Store(false)
	releaseOnce.Do(func() { close(release) })
	if err := <-revoked; err != nil {
		t.Logf("revoke: %v", err)
	}
	saved, err := progress.Read(ctx, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, "mm2-offsets.A.internal", "A", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range tps {
		if got, _ := store.Get(tp); saved[tp] != 49 || got != 49 {
			t.Errorf("%v: progress committed %d, held %d after the abort and the revocation; want 49 (the records after it were aborted): %s",
				tp, saved[tp], got, (&faultCopy{txnID: "kmirror-revoke"}).targetState(ctx, dst))
		}
	}
}

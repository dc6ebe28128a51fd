package passthrough

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestFetchEndsWithoutTableLock: the fetcher owns its lock. While the
// partition table's lock (pl.mu) is held, fetches in flight still end
// and bring their lane's session up to date; only what they fetched
// waits for pl.mu. The source is empty, so an answer holds no batch.
func TestFetchEndsWithoutTableLock(t *testing.T) {
	f := newEnginePair(t, modes[0], 1)
	const topic = "locks"
	f.topics(t, topic, 2, "syncs")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl, _ := f.pipeline(ctx, t, topic, 2, "syncs", metrics.New())
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 5*time.Second) }()
	defer func() {
		stop()
		<-done
	}()

	// inFlight returns the fetches out and the answers taken so far
	// (the session epochs of the lanes, or 1 per answer without one).
	inFlight := func() (n, answered int) {
		pl.fetcher.mu.Lock()
		defer pl.fetcher.mu.Unlock()
		for _, ls := range pl.fetcher.lanes {
			answered += int(ls.epoch)
		}
		return pl.fetcher.fetchesIn, answered
	}
	for {
		if n, answered := inFlight(); n > 0 && answered > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no fetch in flight in a session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, before := inFlight()
	pl.mu.Lock()
	// An idle lane's fetch waits up to idleFetchWait on the broker.
	deadline := time.Now().Add(idleFetchWait + 3*time.Second)
	for {
		n, answered := inFlight()
		if n == 0 && answered > before {
			break
		}
		if time.Now().After(deadline) {
			pl.mu.Unlock()
			t.Fatalf("with pl.mu held: %d fetches still in flight, sessions at %d (were %d)", n, answered, before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pl.mu.Unlock()
}

// TestFillKeepsBrokerLimit: a line (target broker and transaction) has at
// most brokerInflight produce requests in flight; fillLocked builds only
// as many as the requests already out leave room for, one batch of a
// partition per request.
func TestFillKeepsBrokerLimit(t *testing.T) {
	tp := progress.TP{Topic: "t", Partition: 0}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Progress: new(progress.Store), Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	pl.Assign([]datapath.Partition{{TP: tp, Remote: "A.t"}})
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.pid = 7
	p := pl.parts[tp]
	p.tgtLeader = 1
	p.ackPID, p.ackAt = pl.pid, time.Now() // acknowledged before: partInflight at a time
	k := lineKey{broker: 1}
	for out := range brokerInflight + 1 {
		p.queue, p.inflight = nil, 0
		for i := range int64(partInflight) {
			p.queue = append(p.queue, &outBatch{raw: make([]byte, 100), first: 10 * i, last: 10*i + 9, count: 10, advanceTo: -1, dstBase: -1})
		}
		pl.producer.producing[k] = out
		byKey := map[lineKey][]*building{}
		pl.fillLocked(p, time.Now(), byKey)
		want := min(partInflight, brokerInflight-out)
		if got := len(byKey[k]); got != want || p.inflight != want {
			t.Errorf("%d requests out: built %d requests with %d batches sent, want %d", out, got, p.inflight, want)
		}
	}
}

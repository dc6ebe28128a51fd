package passthrough

import (
	"context"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/metrics"
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

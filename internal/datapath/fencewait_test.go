package datapath

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// fenceEngine is a fakeEngine whose Fence fails for a partition as many
// times as fails says.
type fenceEngine struct {
	fakeEngine
	fmu   sync.Mutex
	fails map[progress.TP]int
	calls int
}

func (e *fenceEngine) Fence(_ context.Context, tps []progress.TP) map[progress.TP]error {
	e.fmu.Lock()
	defer e.fmu.Unlock()
	e.calls++
	failed := map[progress.TP]error{}
	for _, tp := range tps {
		if e.fails[tp] > 0 {
			e.fails[tp]--
			failed[tp] = errors.New("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
		}
	}
	return failed
}

func (e *fakeEngine) has(tp progress.TP) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.assigned {
		if p.TP == tp {
			return true
		}
	}
	return false
}

// TestGroupFenceRetry: a partition whose previous owner cannot be fenced
// is not started, shows as fencing with the reason and in the metrics,
// and starts once a retry succeeds; revoked while it waits, it is never
// started and retries stop.
func TestGroupFenceRetry(t *testing.T) {
	a0, a1 := progress.TP{Topic: "a", Partition: 0}, progress.TP{Topic: "a", Partition: 1}
	for _, tt := range []struct {
		name        string
		revoke      bool
		wantStarted bool
	}{
		{"retried until fenced", false, true},
		{"revoked while waiting", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New()
			eng := &fenceEngine{fails: map[progress.TP]int{a1: 1}}
			store := newStore(t)
			g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
				Log: slog.New(slog.DiscardHandler), Metrics: m, SourceAlias: "A", TargetAlias: "B"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g.Assigned(ctx, nil, map[string][]int32{"a": {0, 1}})
			if !eng.has(a0) || eng.has(a1) {
				t.Fatalf("started %v, want a:0 only", eng.assigned)
			}
			w := g.Table.Merge(nil)
			if len(w) != 1 || w[0].Partition != 1 || w[0].State != Fencing || !strings.Contains(w[0].Error, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") {
				t.Fatalf("waiting %+v", w)
			}
			if n := NotReady(w); n != 1 {
				t.Errorf("not ready %d, want 1", n)
			}
			if v := testutil.ToFloat64(m.Unfenced.WithLabelValues("A", "B")); v != 1 {
				t.Errorf("waiting gauge %v, want 1", v)
			}
			if v := testutil.ToFloat64(m.FenceFailures.WithLabelValues("A", "B")); v != 1 {
				t.Errorf("failures %v, want 1", v)
			}
			if tt.revoke {
				g.Revoked(ctx, nil, map[string][]int32{"a": {1}})
			}
			deadline := time.Now().Add(2500 * time.Millisecond) // the first retry comes after 1 s
			for time.Now().Before(deadline) && !eng.has(a1) {
				time.Sleep(50 * time.Millisecond)
			}
			if eng.has(a1) != tt.wantStarted {
				t.Errorf("a:1 started %v, want %v", eng.has(a1), tt.wantStarted)
			}
			if w := g.Table.Merge(nil); len(w) != 0 {
				t.Errorf("still waiting %+v", w)
			}
			if v := testutil.ToFloat64(m.Unfenced.WithLabelValues("A", "B")); v != 0 {
				t.Errorf("waiting gauge %v, want 0", v)
			}
			eng.fmu.Lock()
			calls := eng.calls
			eng.fmu.Unlock()
			if want := map[bool]int{true: 2, false: 1}[tt.wantStarted]; calls != want {
				t.Errorf("Fence called %d times, want %d", calls, want)
			}
		})
	}
}

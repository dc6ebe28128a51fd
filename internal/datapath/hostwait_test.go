package datapath

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/kmirror/kmirror/internal/progress"
)

// hostMap is a Group.Hosting: partitions listed wait, with their reason.
type hostMap struct {
	mu   sync.Mutex
	wait map[progress.TP]string
}

func (h *hostMap) hosting(tp progress.TP) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	why, ok := h.wait[tp]
	return ok, why
}

func (h *hostMap) set(tp progress.TP, wait bool, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if wait {
		h.wait[tp] = why
	} else {
		delete(h.wait, tp)
	}
}

// TestGroupHostWait: an assigned partition the target does not host yet
// is not started; it shows as waiting in the table, which fails readiness
// only with an error (the reason as of the last Release), and starts at the first Release after it is hosted; revoked
// while it waits, it is never started.
func TestGroupHostWait(t *testing.T) {
	a0, a1 := progress.TP{Topic: "a", Partition: 0}, progress.TP{Topic: "a", Partition: 1}
	for _, revoke := range []bool{false, true} {
		eng := &fakeEngine{}
		hosts := &hostMap{wait: map[progress.TP]string{a1: ""}}
		store := newStore(t)
		g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
			Log: slog.New(slog.DiscardHandler), Hosting: hosts.hosting}
		ctx := context.Background()
		g.Assigned(ctx, nil, map[string][]int32{"a": {0, 1}})
		if !eng.has(a0) || eng.has(a1) || !g.Unhosted() {
			t.Fatalf("started %v (unhosted %v), want a:0 only", eng.assigned, g.Unhosted())
		}
		w := g.Table.Merge(nil)
		if len(w) != 1 || w[0].Partition != 1 || w[0].State != Waiting || w[0].Error != "" || w[0].Remote != "A.a" {
			t.Fatalf("waiting %+v", w)
		}
		if n := NotReady(w); n != 0 {
			t.Errorf("waiting for hosting: not ready %d, want 0", n)
		}
		// The next topic sync cannot make it; the flow releases after
		// each sync.
		hosts.set(a1, true, "cannot add partitions to the remote topic: POLICY_VIOLATION")
		g.Release(ctx)
		if eng.has(a1) {
			t.Fatal("started while not hosted")
		}
		if w := g.Table.Merge(nil); len(w) != 1 || w[0].Error == "" || NotReady(w) != 1 {
			t.Errorf("waiting with an error: %+v, want it not ready", w)
		}
		if revoke {
			g.Revoked(ctx, nil, map[string][]int32{"a": {1}})
		}
		hosts.set(a1, false, "")
		g.Release(ctx)
		if eng.has(a1) == revoke || g.Unhosted() || len(g.Table.Merge(nil)) != 0 {
			t.Errorf("revoked %v: a:1 started %v, unhosted %v, waiting %+v", revoke, eng.has(a1), g.Unhosted(), g.Table.Merge(nil))
		}
	}
}

func TestNotReady(t *testing.T) {
	for _, tt := range []struct {
		state, err string
		want       int
	}{
		{Running, "", 0}, {Lagging, "", 0}, {Paused, "", 0}, {Restarting, "x", 0},
		{Stalled, "", 1}, {Stopped, "x", 1}, {Fencing, "x", 1},
		{Waiting, "", 0}, {Waiting, "cannot create the remote topic", 1},
	} {
		if got := NotReady([]PartitionStatus{{State: tt.state, Error: tt.err}}); got != tt.want {
			t.Errorf("%s %q: not ready %d, want %d", tt.state, tt.err, got, tt.want)
		}
	}
}

package datapath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
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

// TestGroupProgressUnread: when the progress other workers saved cannot be
// read as partitions are assigned (the progress topic deleted, say), an
// exactly-once worker does not start them from older progress, which
// would copy records again: they wait, shown as waiting with the reason
// (not ready), and start from the saved progress once it can be read. An
// at-least-once worker starts them at once.
func TestGroupProgressUnread(t *testing.T) {
	a0 := progress.TP{Topic: "a", Partition: 0}
	for _, exact := range []bool{true, false} {
		t.Run(map[bool]string{true: "exactly-once", false: "at-least-once"}[exact], func(t *testing.T) {
			store, c := newStoreOn(t)
			var refuse atomic.Bool
			refuse.Store(true)
			c.ControlKey(int16(kmsg.ListOffsets), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if !refuse.Load() {
					return nil, nil, false
				}
				return testkafka.ListOffsetsAnswer(kr.(*kmsg.ListOffsetsRequest), func(string, int32) (int16, int64) {
					return kerr.TopicAuthorizationFailed.Code, -1
				}), nil, true
			})
			m := metrics.New()
			var eng interface {
				Engine
				has(progress.TP) bool
			} = &fakeEngine{}
			fe := &fenceEngine{}
			if exact {
				eng = fe
			}
			g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
				Log: slog.New(slog.DiscardHandler), Metrics: m, SourceAlias: "A", TargetAlias: "B"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g.Assigned(ctx, nil, map[string][]int32{"a": {0}})
			if !exact {
				if !eng.has(a0) {
					t.Fatal("at-least-once: not started")
				}
				return
			}
			if eng.has(a0) {
				t.Fatal("exactly-once: started from older progress")
			}
			w := g.Table.Merge(nil)
			if len(w) != 1 || w[0].State != Waiting || !strings.Contains(w[0].Error, "progress other workers saved") || NotReady(w) != 1 {
				t.Fatalf("waiting %+v", w)
			}
			if v := testutil.ToFloat64(m.Unfenced.WithLabelValues("A", "B")); v != 0 {
				t.Errorf("unfenced gauge %v, want 0: nothing waits for a fence", v)
			}
			time.Sleep(1500 * time.Millisecond) // a retry fails again
			if eng.has(a0) {
				t.Fatal("started while the progress cannot be read")
			}
			refuse.Store(false)
			testwait.For(t, 5*time.Second, "a:0 started", func() bool { return eng.has(a0) })
			fe.mu.Lock()
			from := fe.assigned[0]
			fe.mu.Unlock()
			if saved, _ := store.Get(a0); saved != 41 || from.TP != a0 {
				t.Errorf("started %+v with saved progress %d, want a:0 from 41", from, saved)
			}
			if w := g.Table.Merge(nil); len(w) != 0 {
				t.Errorf("still held: %+v", w)
			}
		})
	}
}

// TestGroupUnreadBackoff: a partition held because its progress cannot be
// read (the catch-up fails, or Recover does) is retried with a doubling
// wait, as a fence is: held at 1 s, re-held at 2 s after the first retry
// fails, at 4 s after the second. (The retry loop used to forget the wait
// before the retry, so each re-hold started at 1 s again.)
func TestGroupUnreadBackoff(t *testing.T) {
	a1 := progress.TP{Topic: "a", Partition: 1} // no progress: Recover is asked
	for _, tt := range []struct {
		name    string
		catchUp bool // the catch-up fails, else Recover
	}{
		{"catch-up fails", true},
		{"recover fails", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, c := newStoreOn(t)
			if tt.catchUp {
				c.ControlKey(int16(kmsg.ListOffsets), func(kr kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					return testkafka.ListOffsetsAnswer(kr.(*kmsg.ListOffsetsRequest), func(string, int32) (int16, int64) {
						return kerr.TopicAuthorizationFailed.Code, -1
					}), nil, true
				})
			}
			recov := func(context.Context, []progress.TP) error { return errors.New("offset syncs unreadable") }
			eng := &fenceEngine{}
			g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
				Log: slog.New(slog.DiscardHandler), Recover: recov}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			every := func() string {
				w := g.Table.Merge(nil)
				if len(w) != 1 || w[0].State != Waiting {
					return fmt.Sprintf("%+v", w)
				}
				_, after, _ := strings.Cut(w[0].Error, "retried every ")
				d, _, _ := strings.Cut(after, ")")
				return d
			}
			g.Assigned(ctx, nil, map[string][]int32{"a": {1}})
			if got := every(); got != "1s" {
				t.Fatalf("first hold retried every %q, want 1s", got)
			}
			at := map[string]time.Time{}
			for _, want := range []string{"2s", "4s"} {
				var got string
				testwait.Every(t, 6*time.Second, 20*time.Millisecond, "a re-hold retried every "+want, func() bool {
					got = every()
					return got == want || (got != "1s" && got != "2s" && got != "4s")
				})
				if got != want {
					t.Fatalf("re-held: retried every %q, want %s", got, want)
				}
				at[want] = time.Now()
			}
			if gap := at["4s"].Sub(at["2s"]); gap < 1500*time.Millisecond {
				t.Errorf("second retry %v after the first, want about 2s", gap)
			}
			if eng.has(a1) {
				t.Error("started while its progress cannot be read")
			}
		})
	}
}

package datapath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
)

// newStore opens a progress store on a kfake cluster, with tp a:0 saved at
// 41.
func newStore(t *testing.T) *progress.Store {
	t.Helper()
	store, _ := newStoreOn(t)
	return store
}

// newStoreOn is newStore, with its cluster.
func newStoreOn(t *testing.T) (*progress.Store, *kfake.Cluster) {
	t.Helper()
	c, cl := testkafka.Fake(t, kfake.NumBrokers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	store, err := progress.Open(ctx, kadm.NewClient(cl), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, cl, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(ctx, map[progress.TP]int64{{Topic: "a", Partition: 0}: 41}); err != nil {
		t.Fatal(err)
	}
	return store, c
}

func TestGroupOffsets(t *testing.T) {
	store := newStore(t)
	for _, tt := range []struct {
		name       string
		own, atEnd bool
		tp         progress.TP
		want       kgo.Offset
	}{
		{"saved", false, false, progress.TP{Topic: "a", Partition: 0}, kgo.NewOffset().At(42).WithEpoch(-1)},
		{"saved, start at end", false, true, progress.TP{Topic: "a", Partition: 0}, kgo.NewOffset().At(42).WithEpoch(-1)},
		{"none", false, false, progress.TP{Topic: "a", Partition: 1}, kgo.NewOffset().AtStart()},
		{"none, start at end", false, true, progress.TP{Topic: "a", Partition: 1}, kgo.NewOffset().AtEnd()},
		{"own fetches", true, false, progress.TP{Topic: "a", Partition: 0}, kgo.NewOffset().AtStart()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &Group{Progress: store, OwnFetches: tt.own, StartAtEnd: tt.atEnd}
			got, err := g.Offsets(context.Background(), map[string]map[int32]kgo.Offset{tt.tp.Topic: {tt.tp.Partition: {}}})
			if err != nil {
				t.Fatal(err)
			}
			if o := got[tt.tp.Topic][tt.tp.Partition]; o.String() != tt.want.String() {
				t.Errorf("offset %s, want %s", o, tt.want)
			}
		})
	}
}

// fakeEngine records what a Group asks of it.
type fakeEngine struct {
	Engine
	mu       sync.Mutex
	assigned []Partition
	revoked  []progress.TP
}

func (e *fakeEngine) Assign(ps []Partition) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.assigned = append(e.assigned, ps...)
}

func (e *fakeEngine) Revoke(_ context.Context, tps []progress.TP) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.revoked = append(e.revoked, tps...)
	return nil
}

func TestGroupAssignedRevoked(t *testing.T) {
	store := newStore(t)
	var logs bytes.Buffer
	eng := &fakeEngine{}
	tracked := map[progress.TP]bool{}
	g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
		Track: func(m map[string][]int32, add bool) {
			for _, tp := range TPs(m) {
				tracked[tp] = add
			}
		},
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := context.Background()
	g.Assigned(ctx, nil, map[string][]int32{"a": {0, 1}})
	if len(eng.assigned) != 2 || eng.assigned[0].Remote != "A.a" {
		t.Fatalf("assigned %v", eng.assigned)
	}
	for _, want := range []string{"partition assigned to this worker", "partition=0 remote=A.a from=42", "partition=1 remote=A.a from=-1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	g.Revoked(ctx, nil, map[string][]int32{"a": {1}})
	if len(eng.revoked) != 1 || eng.revoked[0] != (progress.TP{Topic: "a", Partition: 1}) {
		t.Errorf("revoked %v", eng.revoked)
	}
	want := map[progress.TP]bool{{Topic: "a", Partition: 0}: true, {Topic: "a", Partition: 1}: false}
	if !maps.Equal(tracked, want) {
		t.Errorf("tracked %v, want %v", tracked, want)
	}
	if !strings.Contains(logs.String(), "partitions handed back to the group") {
		t.Errorf("log lacks the hand-back:\n%s", logs.String())
	}
}

// fakeParts is an engine's state for Release.
type fakeParts struct {
	mu       sync.Mutex
	parts    map[progress.TP]*Ledger
	inflight map[progress.TP]int
	revoked  map[progress.TP]bool
}

func (f *fakeParts) MarkRevoked(tps []progress.TP) []progress.TP {
	f.mu.Lock()
	defer f.mu.Unlock()
	var mine []progress.TP
	for _, tp := range tps {
		if f.parts[tp] != nil {
			f.revoked[tp] = true
			mine = append(mine, tp)
		}
	}
	return mine
}

func (f *fakeParts) InFlight(tp progress.TP) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.inflight[tp]
	if n > 0 {
		f.inflight[tp]-- // answered one
		f.parts[tp].Skip(f.parts[tp].Done + 1)
	}
	return n
}

func (f *fakeParts) Position(tp progress.TP) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[tp].Position()
}

func (f *fakeParts) Delete(tps []progress.TP) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tp := range tps {
		delete(f.parts, tp)
	}
}

// newSyncs returns an offset-sync writer on a kfake cluster and a function
// listing what it published, in order, as topic:partition up->down.
func newSyncs(t *testing.T) (*offsetsync.Writer, func() string) {
	t.Helper()
	c, cl := testkafka.Fake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "mm2-offset-syncs.B.internal"))
	w := offsetsync.New(cl, "mm2-offset-syncs.B.internal", 100, slog.New(slog.DiscardHandler), nil)
	return w, func() string {
		if err := cl.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("mm2-offset-syncs.B.internal"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		var out []string
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				s, err := wire.DecodeOffsetSync(r.Key, r.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%s:%d %d->%d", s.Topic, s.Partition, s.UpstreamOffset, s.DownstreamOffset))
			})
		}
		return fmt.Sprint(out)
	}
}

func TestRelease(t *testing.T) {
	a0, a1, b0, gone := progress.TP{Topic: "a", Partition: 0}, progress.TP{Topic: "a", Partition: 1}, progress.TP{Topic: "b", Partition: 0}, progress.TP{Topic: "c", Partition: 0}
	for _, tt := range []struct {
		name string
		save bool
		want map[progress.TP]int64 // saved after
	}{
		{"save", true, map[progress.TP]int64{a0: 12, a1: -1}},
		{"no save", false, map[progress.TP]int64{a0: 41}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			reset := NewLedger()
			reset.Restart(0)
			l0 := Ledger{Done: 10}
			none := NewLedger()
			f := &fakeParts{
				parts:    map[progress.TP]*Ledger{a0: &l0, a1: &reset, b0: &none},
				inflight: map[progress.TP]int{a0: 2},
				revoked:  map[progress.TP]bool{},
			}
			syncs, published := newSyncs(t)
			// a0 was copied up to 10 (at 100..110): 10 waits for the next save.
			for up := int64(0); up <= 10; up++ {
				syncs.Acked("a", 0, up, 100+up)
			}
			syncs.Acked("b", 0, 5, 7)
			syncs.Acked("b", 0, 6, 8)
			c := &Core{Progress: store, Syncs: syncs}
			if err := c.Release(context.Background(), f, []progress.TP{a0, a1, gone}, tt.save); err != nil {
				t.Fatal(err)
			}
			// Saved, a0's newest pair is published for the next owner; b0
			// stays (its pair waits for b0's own save).
			wantSyncs := "[a:0 0->100 b:0 5->7]"
			if tt.save {
				wantSyncs = "[a:0 0->100 b:0 5->7 a:0 10->110]"
			}
			if got := published(); got != wantSyncs {
				t.Errorf("offset syncs published: %s, want %s", got, wantSyncs)
			}
			if len(f.parts) != 1 || f.parts[b0] == nil || !f.revoked[a0] || !f.revoked[a1] {
				t.Errorf("left %v, revoked %v", f.parts, f.revoked)
			}
			for tp, want := range tt.want {
				if got, _ := store.Get(tp); got != want {
					t.Errorf("%s saved at %d, want %d", tp, got, want)
				}
			}
			if _, ok := store.Get(b0); ok {
				t.Errorf("%s saved", b0)
			}
		})
	}
}

func TestAfterGap(t *testing.T) {
	tp := progress.TP{Topic: "a", Partition: 3}
	for _, tt := range []struct {
		name   string
		want   int64
		r      LogRange
		resume int64
		lost   float64
		log    string
	}{
		{"in range", 5, LogRange{0, 10}, 5, -1, ""},
		{"removed", 3, LogRange{7, 10}, 7, 4, "source records lost before replication"},
		{"truncated", 12, LogRange{2, 5}, 2, 0, "source partition is shorter than what was replicated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := &Core{SourceAlias: "A", TargetAlias: "B", Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(&logs, nil))}
			if got := c.AfterGap(tp, tt.want, tt.r); got != tt.resume {
				t.Errorf("resume at %d, want %d", got, tt.resume)
			}
			n := testutil.CollectAndCount(c.Metrics.RecordsLost)
			if tt.lost < 0 {
				if n != 0 || logs.Len() != 0 {
					t.Errorf("%d lost series, log %q; want none", n, logs.String())
				}
				return
			}
			if got := testutil.ToFloat64(c.Metrics.RecordsLost.WithLabelValues("A", "B", "a", "3")); got != tt.lost {
				t.Errorf("lost %v, want %v", got, tt.lost)
			}
			if !strings.Contains(logs.String(), tt.log) {
				t.Errorf("log %q lacks %q", logs.String(), tt.log)
			}
		})
	}
}

func TestAcked(t *testing.T) {
	var c Core
	c.Acked(3)
	c.Acked(2)
	if got := c.AckedSinceCommit(); got != 5 {
		t.Errorf("AckedSinceCommit = %d, want 5", got)
	}
	c.CommitStarted()
	if got := c.AckedSinceCommit(); got != 0 {
		t.Errorf("after CommitStarted: %d, want 0", got)
	}
	c.SetPaused(true)
	if !c.Paused() {
		t.Error("not paused")
	}
}

// TestReleaseFailedStillDeletes: a Revoke whose wait ends with its context
// still lets go of the partitions, so that a later Assign takes them again.
func TestReleaseFailedStillDeletes(t *testing.T) {
	a0 := progress.TP{Topic: "a", Partition: 0}
	l0 := Ledger{Done: 10}
	f := &fakeParts{parts: map[progress.TP]*Ledger{a0: &l0}, inflight: map[progress.TP]int{a0: 1 << 30}, revoked: map[progress.TP]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	c := &Core{Progress: newStore(t)}
	if err := c.Release(ctx, f, []progress.TP{a0}, true); err == nil {
		t.Fatal("no error though records stayed in flight")
	}
	if len(f.parts) != 0 {
		t.Errorf("partitions still held after a failed release: %v", f.parts)
	}
}

// TestAckedReached: the channel is ready once the acknowledged count
// reaches the mark, once per commit, whatever the steps it grows by.
func TestAckedReached(t *testing.T) {
	for _, tt := range []struct {
		name  string
		acks  []int64 // -1: a commit begins
		ready []bool  // after each step
	}{
		{"below", []int64{1, 3}, []bool{false, false}},
		{"exactly", []int64{2, 3}, []bool{false, true}},
		{"past at once", []int64{9}, []bool{true}},
		{"once until a commit", []int64{5, 1, 1}, []bool{true, false, false}},
		{"again after a commit", []int64{5, -1, 2, 3}, []bool{true, false, false, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c Core
			reached := c.AckedReached(5)
			for i, n := range tt.acks {
				if n < 0 {
					c.CommitStarted()
				} else {
					c.Acked(n)
				}
				got := false
				select {
				case <-reached:
					got = true
				default:
				}
				if got != tt.ready[i] {
					t.Errorf("after step %d (%d): ready %v, want %v", i, n, got, tt.ready[i])
				}
			}
		})
	}
}

// TestGroupRecoversUnsaved: of the partitions assigned, those without
// progress once it is read go to Recover, before they start, and start
// from what it saved; a Recover that fails holds them back in
// exactly-once mode and lets them start in at-least-once mode.
func TestGroupRecoversUnsaved(t *testing.T) {
	a0, a1 := progress.TP{Topic: "a", Partition: 0}, progress.TP{Topic: "a", Partition: 1}
	for _, tt := range []struct {
		name        string
		exact, fail bool
		wantStarted bool
	}{
		{"recovered", false, false, true},
		{"recovered, exactly-once", true, false, true},
		{"failed", false, true, true},
		{"failed, exactly-once", true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t) // a:0 saved at 41
			var eng interface {
				Engine
				has(progress.TP) bool
			} = &fakeEngine{}
			if tt.exact {
				eng = &fenceEngine{}
			}
			var asked []progress.TP
			recov := func(ctx context.Context, tps []progress.TP) error {
				asked = append(asked, tps...)
				if tt.fail {
					return errors.New("offset syncs unreadable")
				}
				return store.Save(ctx, map[progress.TP]int64{a1: 9})
			}
			g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
				Log: slog.New(slog.DiscardHandler), Recover: recov}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g.Assigned(ctx, nil, map[string][]int32{"a": {0, 1}})
			if len(asked) != 1 || asked[0] != a1 {
				t.Errorf("Recover asked for %v, want a:1 only", asked)
			}
			if eng.has(a0) != tt.wantStarted || eng.has(a1) != tt.wantStarted {
				t.Errorf("a:0 started %v, a:1 %v, want %v", eng.has(a0), eng.has(a1), tt.wantStarted)
			}
			if saved, ok := store.Get(a1); !tt.fail && (!ok || saved != 9) {
				t.Errorf("a:1 progress %d %v, want the recovered 9", saved, ok)
			}
		})
	}
}

// TestGroupRecoverFailedSaysWhere: at-least-once, a Recover that fails lets
// the partitions without progress start, and the warning says where they
// start: the log start, or the log end with auto.offset.reset = latest
// (StartAtEnd). It used to say "copied from the start" in both cases.
func TestGroupRecoverFailedSaysWhere(t *testing.T) {
	a1 := progress.TP{Topic: "a", Partition: 1}
	for _, tt := range []struct {
		name      string
		atEnd     bool
		want, not string
	}{
		{"log start", false, "they start at the log start", "log end"},
		{"log end", true, "they start at the log end (auto.offset.reset = latest)", "log start"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			var logs bytes.Buffer
			eng := &fakeEngine{}
			g := &Group{Engine: eng, Progress: store, Table: NewTable(store), Remote: func(s string) string { return "A." + s },
				StartAtEnd: tt.atEnd, Log: slog.New(slog.NewTextHandler(&logs, nil)),
				Recover: func(context.Context, []progress.TP) error { return errors.New("offset syncs unreadable") }}
			g.Assigned(context.Background(), nil, map[string][]int32{"a": {1}})
			if !eng.has(a1) {
				t.Fatal("a:1 not started")
			}
			var warn string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "recovering the position") {
					warn = l
				}
			}
			if !strings.Contains(warn, tt.want) || strings.Contains(warn, tt.not) || strings.Contains(warn, "copied from the start") {
				t.Errorf("warning %q, want it to say %q", warn, tt.want)
			}
		})
	}
}

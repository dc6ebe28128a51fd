package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
)

func TestGroupLeader(t *testing.T) {
	tests := []struct {
		name       string
		subscribed []string
		owned      []progress.TP
		want       bool
	}{
		{"nothing subscribed", nil, []progress.TP{{Topic: "a", Partition: 0}}, false},
		{"owns partition 0 of the first topic", []string{"b", "a"}, []progress.TP{{Topic: "a", Partition: 0}}, true},
		{"owns another partition of it", []string{"b", "a"}, []progress.TP{{Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}, false},
		{"owns nothing", []string{"a"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &groupHooks{subscribed: map[string]bool{}}
			for _, s := range tt.subscribed {
				h.subscribed[s] = true
			}
			m := map[string][]int32{}
			for _, tp := range tt.owned {
				m[tp.Topic] = append(m[tp.Topic], tp.Partition)
			}
			h.track(m, true)
			if got := h.leads(); got != tt.want {
				t.Errorf("leads() = %v, want %v", got, tt.want)
			}
			h.track(m, false)
			if h.leads() {
				t.Error("still leads after its partitions were revoked")
			}
		})
	}
}

// TestPeriodicFollowsLead runs a job that only the leading worker may run:
// nothing while it does not lead, at once and then every interval while it
// does, nothing again after it stopped leading.
func TestPeriodicFollowsLead(t *testing.T) {
	var leading atomic.Bool
	var runs atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic(ctx, 30*time.Millisecond, 5*time.Millisecond, leading.Load, func() { runs.Add(1) })
	}()
	time.Sleep(100 * time.Millisecond)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d runs while not leading", n)
	}
	leading.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runs.Load(); n < 3 {
		t.Fatalf("%d runs in 5 s while leading, want it every 30 ms", n)
	}
	leading.Store(false)
	time.Sleep(200 * time.Millisecond) // a run already under way may end
	n := runs.Load()
	time.Sleep(100 * time.Millisecond)
	if m := runs.Load(); m != n {
		t.Errorf("%d more runs after leading ended", m-n)
	}
	cancel()
	<-done

	// Without a lead function it runs at once, whoever leads.
	runs.Store(0)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go periodic(ctx, time.Hour, time.Millisecond, nil, func() { runs.Add(1) })
	deadline = time.Now().Add(5 * time.Second)
	for runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs without a lead function, want 1 at once", runs.Load())
	}
}

// commitEngine counts commits; with watch it says when enough records
// were acknowledged (datapath.AckWatcher), as datapath.Core does.
type commitEngine struct {
	datapath.Engine
	core    datapath.Core
	commits atomic.Int64
	fail    error // every Commit fails with it
}

func (e *commitEngine) AckedSinceCommit() int64 { return e.core.AckedSinceCommit() }

func (e *commitEngine) Commit(context.Context) error {
	e.commits.Add(1)
	if e.fail != nil {
		return e.fail // what was acknowledged stays to be saved
	}
	e.core.CommitStarted()
	return nil
}

type watchingEngine struct{ *commitEngine }

func (e watchingEngine) AckedReached(n int64) <-chan struct{} { return e.core.AckedReached(n) }

// TestCommitLoop: progress is saved every flush interval, and soon after
// CommitRecords records were acknowledged, whether the engine says when
// (AckWatcher) or is asked.
func TestCommitLoop(t *testing.T) {
	for _, watch := range []bool{true, false} {
		for _, tt := range []struct {
			name     string
			interval time.Duration
			acks     int64
			want     int64 // commits at least, within 5 s; 0: none at all
		}{
			{"interval", 20 * time.Millisecond, 0, 3},
			{"records", time.Hour, CommitRecords, 1},
			{"too few records", time.Hour, CommitRecords - 1, 0},
		} {
			t.Run(fmt.Sprintf("%s, watching %v", tt.name, watch), func(t *testing.T) {
				e := &commitEngine{}
				r := &running{f: &Flow{log: slog.New(slog.DiscardHandler)}, c: &config.Flow{OffsetFlushInterval: tt.interval}, rep: e}
				if watch {
					r.rep = watchingEngine{e}
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); r.commitLoop(ctx) }()
				time.Sleep(10 * time.Millisecond) // the loop has started
				e.core.Acked(tt.acks)
				wait := 5 * time.Second
				if tt.want == 0 {
					wait = 300 * time.Millisecond // nothing is to come
				}
				deadline := time.Now().Add(wait)
				for e.commits.Load() < max(tt.want, 1) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
				<-done
				if n := e.commits.Load(); n < tt.want || tt.want == 0 && n > 0 {
					t.Errorf("%d commits, want %d", n, tt.want)
				}
			})
		}
	}
}

// TestCommitLoopRetriesFailedSave: a save that fails while CommitRecords
// records wait is tried again every commitRetry, not at once in a loop
// (an exactly-once worker under load logged 580 failed saves in 30 s).
func TestCommitLoopRetriesFailedSave(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watching %v", watch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := &commitEngine{fail: errors.New("the transaction is aborted")}
				r := &running{f: &Flow{log: slog.New(slog.DiscardHandler)}, c: &config.Flow{OffsetFlushInterval: time.Hour}, rep: e}
				if watch {
					r.rep = watchingEngine{e}
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); r.commitLoop(ctx) }()
				synctest.Wait()
				e.core.Acked(CommitRecords)
				time.Sleep(10*commitRetry - time.Millisecond)
				cancel()
				<-done
				// One at once, then one per commitRetry (an engine that is
				// asked is asked every 50 ms, so it may come up to then).
				if n := e.commits.Load(); n < 9 || n > 11 {
					t.Errorf("%d saves in %v of failures, want about 10 (one per %v)", n, 10*commitRetry, commitRetry)
				}
			})
		})
	}
}

package flow

import (
	"context"
	"errors"
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

// commitEngine counts commits and says when CommitRecords records were
// acknowledged, as datapath.Core does.
type commitEngine struct {
	datapath.Engine
	core    datapath.Core
	commits atomic.Int64
	fail    error // every Commit fails with it
}

func (e *commitEngine) CommitDue(n int64) <-chan struct{} { return e.core.AckedReached(n) }

func (e *commitEngine) Commit(context.Context) error {
	e.commits.Add(1)
	if e.fail != nil {
		return e.fail
	}
	e.core.CommitStarted()
	return nil
}

// TestCommitLoop: progress is saved every flush interval, and at once
// when the engine says CommitRecords records were acknowledged.
func TestCommitLoop(t *testing.T) {
	for _, tt := range []struct {
		name     string
		interval time.Duration
		acks     int64
		want     int64 // commits in 10 s
	}{
		{"interval", time.Second, 0, 9}, // at 1 s ... 9 s
		{"records", time.Hour, CommitRecords, 1},
		{"too few records", time.Hour, CommitRecords - 1, 0},
		{"records and interval", 4 * time.Second, CommitRecords, 3}, // at 0, 4 s, 8 s
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := &commitEngine{}
				r := &running{f: &Flow{log: slog.New(slog.DiscardHandler)}, c: &config.Flow{OffsetFlushInterval: tt.interval}, rep: e}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); r.commitLoop(ctx) }()
				synctest.Wait()
				e.core.Acked(tt.acks)
				time.Sleep(10*time.Second - time.Millisecond)
				cancel()
				<-done
				if n := e.commits.Load(); n != tt.want {
					t.Errorf("%d commits in 10 s, want %d", n, tt.want)
				}
			})
		})
	}
}

// TestCommitLoopRetriesFailedSave: a save that fails while CommitRecords
// records wait is tried again every commitRetry, not at once in a loop
// (an exactly-once worker under load logged 580 failed saves in 30 s).
func TestCommitLoopRetriesFailedSave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &commitEngine{fail: errors.New("the transaction is aborted")}
		r := &running{f: &Flow{log: slog.New(slog.DiscardHandler)}, c: &config.Flow{OffsetFlushInterval: time.Hour}, rep: e}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.commitLoop(ctx) }()
		synctest.Wait()
		e.core.Acked(CommitRecords)
		time.Sleep(10*commitRetry - time.Millisecond)
		cancel()
		<-done
		// One at once, then one per commitRetry.
		if n := e.commits.Load(); n != 10 {
			t.Errorf("%d saves in %v of failures, want 10 (one per %v)", n, 10*commitRetry, commitRetry)
		}
	})
}

// TestCommitTimes: when the commit loop saves, step by step. A failed
// save at the flush interval waits for the next interval, without
// waking before it (it woke at once, over and over, from the retry time
// to the next interval).
func TestCommitTimes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	fail := errors.New("save failed")
	type step struct {
		now  time.Duration
		ask  bool          // the engine asks for a commit
		due  bool          // want
		err  error         // of the commit, when due
		wait time.Duration // want, after the step
	}
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"interval", []step{
			{now: 0, wait: 10 * time.Second},
			{now: 10 * time.Second, due: true, wait: 10 * time.Second},
			{now: 15 * time.Second, wait: 5 * time.Second},
		}},
		{"asked", []step{
			{now: 2 * time.Second, ask: true, due: true, wait: 10 * time.Second},
			{now: 3 * time.Second, wait: 9 * time.Second},
		}},
		{"asked, failed: retried after commitRetry", []step{
			{now: 2 * time.Second, ask: true, due: true, err: fail, wait: commitRetry},
			{now: 2*time.Second + commitRetry/2, wait: commitRetry / 2},
			{now: 2*time.Second + commitRetry, due: true, wait: 10 * time.Second},
		}},
		{"interval failed: next interval, no wake before", []step{
			{now: 10 * time.Second, due: true, err: fail, wait: 10 * time.Second},
			{now: 10*time.Second + commitRetry, wait: 10*time.Second - commitRetry},
			{now: 20 * time.Second, due: true, wait: 10 * time.Second},
		}},
		{"asked during the retry wait", []step{
			{now: 10 * time.Second, due: true, err: fail, wait: 10 * time.Second},
			{now: 10*time.Second + commitRetry/2, ask: true, wait: commitRetry / 2},
			{now: 10*time.Second + commitRetry, due: true, wait: 10 * time.Second},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := commitTimes{interval: 10 * time.Second, last: t0}
			for i, s := range tt.steps {
				now := at(s.now)
				if s.ask {
					c.early = true
				}
				if got := c.due(now); got != s.due {
					t.Fatalf("step %d (%v): due %v, want %v", i, s.now, got, s.due)
				}
				if s.due {
					c.committed(now, s.err)
				}
				if got := c.wait(now); got != s.wait {
					t.Fatalf("step %d (%v): wait %v, want %v", i, s.now, got, s.wait)
				}
			}
		})
	}
}

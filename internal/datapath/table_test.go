package datapath

import (
	"context"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/progress"
)

// statusEngine is an Engine whose Status is st.
type statusEngine struct {
	Engine
	st []PartitionStatus
}

func (e *statusEngine) Status(buf []PartitionStatus) []PartitionStatus { return append(buf, e.st...) }

func tp(topic string, p int32) progress.TP { return progress.TP{Topic: topic, Partition: p} }

// TestTableStatus: Status merges the engine's partitions, the held ones
// (the engine's row wins for a partition in both) and health's checks,
// which name the state only where neither the engine nor the flow names
// one, and only of partitions checked.
func TestTableStatus(t *testing.T) {
	row := func(topic string, p int32, state string) PartitionStatus {
		return PartitionStatus{Topic: topic, Partition: p, Remote: "A." + topic, Done: 4, State: state, SourceEnd: -1}
	}
	heldRow := func(topic string, p int32, state, why string) PartitionStatus {
		return PartitionStatus{Topic: topic, Partition: p, Remote: "A." + topic, Done: -1, State: state, Error: why, SourceEnd: -1}
	}
	for _, tt := range []struct {
		name   string
		eng    []PartitionStatus
		held   []Held
		synced []Held
		checks []Check
		want   []PartitionStatus
	}{
		{name: "engine only, unchecked: its own state",
			eng:  []PartitionStatus{row("a", 0, Running), row("a", 1, Restarting)},
			want: []PartitionStatus{row("a", 0, Running), row("a", 1, Restarting)}},
		{name: "held rows sorted in",
			eng:    []PartitionStatus{row("a", 0, Running), row("c", 0, Running)},
			held:   []Held{{TP: tp("b", 1), Remote: "A.b", State: Fencing, Why: "x"}},
			synced: []Held{{TP: tp("b", 0), Remote: "A.b", State: Waiting}},
			want:   []PartitionStatus{row("a", 0, Running), heldRow("b", 0, Waiting, ""), heldRow("b", 1, Fencing, "x"), row("c", 0, Running)}},
		{name: "held and started: the engine's row",
			eng:  []PartitionStatus{row("a", 0, Running)},
			held: []Held{{TP: tp("a", 0), Remote: "A.a", State: Fencing, Why: "x"}},
			want: []PartitionStatus{row("a", 0, Running)}},
		{name: "checks give lag and refine running and restarting",
			eng:    []PartitionStatus{row("a", 0, Running), row("a", 1, Restarting), row("a", 2, Paused), row("a", 3, Running)},
			checks: []Check{{TP: tp("a", 0), State: Lagging, SourceEnd: 9, Lag: 4, LagSeconds: 31}, {TP: tp("a", 1), State: Stalled, SourceEnd: 9, Lag: 4}, {TP: tp("a", 2), State: Stalled, SourceEnd: 9, Lag: 4}},
			want: []PartitionStatus{
				{Topic: "a", Partition: 0, Remote: "A.a", Done: 4, State: Lagging, SourceEnd: 9, Lag: 4, LagSeconds: 31},
				{Topic: "a", Partition: 1, Remote: "A.a", Done: 4, State: Stalled, SourceEnd: 9, Lag: 4},
				{Topic: "a", Partition: 2, Remote: "A.a", Done: 4, State: Paused, SourceEnd: 9, Lag: 4},
				row("a", 3, Running)}},
		{name: "a check older than the engine's own state",
			eng:    []PartitionStatus{row("a", 0, Running)},
			checks: []Check{{TP: tp("a", 0), State: Paused, SourceEnd: 4}},
			want:   []PartitionStatus{{Topic: "a", Partition: 0, Remote: "A.a", Done: 4, State: Running, SourceEnd: 4}}},
		{name: "a held partition checked",
			held:   []Held{{TP: tp("a", 0), Remote: "A.a", State: Fencing, Why: "x"}},
			checks: []Check{{TP: tp("a", 0), State: Fencing, SourceEnd: 7, Lag: 7, LagSeconds: 2}},
			want:   []PartitionStatus{{Topic: "a", Partition: 0, Remote: "A.a", Done: -1, State: Fencing, Error: "x", SourceEnd: 7, Lag: 7, LagSeconds: 2}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(nil)
			for _, h := range tt.held {
				tab.Hold(h)
			}
			tab.SetWaiting(tt.synced)
			tab.SetChecks(tt.checks)
			got := tab.Status(&statusEngine{st: tt.eng})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestTableRows: SetWaiting replaces only the rows of the last
// SetWaiting, Unhold drops any row, Count counts by state, SetChecks
// replaces every check.
func TestTableRows(t *testing.T) {
	tab := NewTable(nil)
	tab.Hold(Held{TP: tp("a", 0), State: Fencing})
	tab.Hold(Held{TP: tp("a", 1), State: Waiting})
	tab.SetWaiting([]Held{{TP: tp("b", 0), State: Waiting}, {TP: tp("b", 1), State: Waiting}})
	if n, m := tab.Count(Waiting), tab.Count(Fencing); n != 3 || m != 1 {
		t.Fatalf("waiting %d fencing %d, want 3 and 1", n, m)
	}
	tab.SetWaiting([]Held{{TP: tp("c", 0), State: Waiting}})
	tab.Unhold([]progress.TP{tp("a", 0)})
	var got []progress.TP
	for _, s := range tab.Merge(nil) {
		got = append(got, tp(s.Topic, s.Partition))
	}
	if want := []progress.TP{tp("a", 1), tp("c", 0)}; !reflect.DeepEqual(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	tab.SetChecks([]Check{{TP: tp("a", 1), State: Waiting, SourceEnd: 3}})
	tab.SetChecks([]Check{{TP: tp("c", 0), State: Waiting, SourceEnd: 5}})
	for _, s := range tab.Status(&statusEngine{}) {
		if want := map[string]int64{"a": -1, "c": 5}[s.Topic]; s.SourceEnd != want {
			t.Errorf("%s:%d source end %d, want %d (checks replaced)", s.Topic, s.Partition, s.SourceEnd, want)
		}
	}
}

// blockingFencer fails every partition's first Fence and blocks in the
// next until released.
type blockingFencer struct {
	fakeEngine
	calls   int
	entered chan struct{}
	release chan struct{}
}

func (e *blockingFencer) Fence(ctx context.Context, tps []progress.TP) map[progress.TP]error {
	e.calls++ // under Group.mu
	if e.calls == 1 {
		failed := map[progress.TP]error{}
		for _, tp := range tps {
			failed[tp] = context.DeadlineExceeded
		}
		return failed
	}
	close(e.entered)
	select {
	case <-e.release:
	case <-ctx.Done():
	}
	return nil
}

func (e *blockingFencer) Status(buf []PartitionStatus) []PartitionStatus { return buf }

// TestTableReadDuringFence: the partitions' state is read without waiting
// for a Fence, which holds Group.mu for up to fenceAttempt (15 s): REST
// /status, /ready and metric scrapes read the table.
func TestTableReadDuringFence(t *testing.T) {
	eng := &blockingFencer{entered: make(chan struct{}), release: make(chan struct{})}
	tab := NewTable(nil)
	g := &Group{Engine: eng, Progress: newStore(t), Table: tab, Remote: func(s string) string { return "A." + s },
		Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Assigned(ctx, nil, map[string][]int32{"a": {0}})
	select {
	case <-eng.entered: // the retry, after 1 s
	case <-time.After(5 * time.Second):
		t.Fatal("no retry of Fence")
	}
	defer close(eng.release)
	done := make(chan []PartitionStatus)
	go func() { done <- tab.Status(eng) }()
	select {
	case st := <-done:
		if len(st) != 1 || st[0].State != Fencing || NotReady(st) != 1 {
			t.Errorf("status during a Fence: %+v, want a:0 fencing", st)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reading the status waited for the Fence (Group.mu)")
	}
}

package datapath

import (
	"sync"

	"github.com/kmirror/kmirror/internal/progress"
)

// Table is where every reader of a flow's partition states reads them
// (REST /status and /ready, the dashboard, metrics, the Connect herder):
// Status merges the engine's own status with what the table keeps of the
// rest, namely
//   - the partitions held back from the engine, with why: waiting for the
//     target to host their remote partition (flow's topic sync and Group
//     put these), or fencing their slot's previous owner (Group);
//   - internal/health's last check of each partition: its lag, the
//     source's end, and running, lagging or stalled.
//
// Its lock is a leaf: no method calls out while holding it. Group and
// health write it under their own locks; a reader never waits for those
// (a Fence holds Group.mu for up to 15 s).
type Table struct {
	store *progress.Store // the Done of held partitions; may be nil

	mu     sync.Mutex
	held   map[progress.TP]held
	checks map[progress.TP]Check
}

// Held is a partition of the flow that is not in its engine.
type Held struct {
	TP     progress.TP
	Remote string
	State  string // Waiting or Fencing
	Why    string // what keeps it back; "" while its remote partition is on its way
}

type held struct {
	Held
	synced bool // put by SetWaiting
}

// Check is what health found of a partition at its last check.
type Check struct {
	TP    progress.TP
	State string
	// SourceEnd is the source's last stable offset (-1 unknown); Lag the
	// records not copied yet; LagSeconds at least how long the oldest of
	// them has waited.
	SourceEnd  int64
	Lag        int64
	LagSeconds float64
}

// NewTable returns an empty table; store, if not nil, gives the last
// copied offset (Done) of held partitions.
func NewTable(store *progress.Store) *Table {
	return &Table{store: store, held: make(map[progress.TP]held), checks: make(map[progress.TP]Check)}
}

// Hold shows h's partition in h.State until Unhold or until the engine
// reports it.
func (t *Table) Hold(h Held) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held[h.TP] = held{Held: h}
}

// Unhold drops the held rows of tps.
func (t *Table) Unhold(tps []progress.TP) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tp := range tps {
		delete(t.held, tp)
	}
}

// SetWaiting replaces the rows of the last SetWaiting with hs: the
// partitions a topic sync found the target does not host yet, which are
// not handed to the engine or the group.
func (t *Table) SetWaiting(hs []Held) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tp, h := range t.held {
		if h.synced {
			delete(t.held, tp)
		}
	}
	for _, h := range hs {
		t.held[h.TP] = held{Held: h, synced: true}
	}
}

// Count is the number of held partitions in state.
func (t *Table) Count(state string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, h := range t.held {
		if h.State == state {
			n++
		}
	}
	return n
}

// SetChecks replaces the checks with cs, health's last check of every
// partition it watches.
func (t *Table) SetChecks(cs []Check) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.checks)
	for _, c := range cs {
		t.checks[c.TP] = c
	}
}

// Merge appends to st, an engine's status, the held partitions it does
// not list, sorted when there are any. A partition both
// held and in the engine (for the moment between its start and its
// Unhold) is shown as the engine has it.
func (t *Table) Merge(st []PartitionStatus) []PartitionStatus {
	t.mu.Lock()
	if len(t.held) == 0 {
		t.mu.Unlock()
		return st
	}
	hs := make([]Held, 0, len(t.held))
	for _, h := range t.held {
		hs = append(hs, h.Held)
	}
	t.mu.Unlock()
	in := make(map[progress.TP]bool, len(st))
	for _, s := range st {
		in[progress.TP{Topic: s.Topic, Partition: s.Partition}] = true
	}
	for _, h := range hs {
		if !in[h.TP] {
			st = append(st, heldStatus(h.TP, h.Remote, t.store, h.State, h.Why))
		}
	}
	SortStatus(st)
	return st
}

// Status returns the state of every partition of eng and of every held
// one, with health's last check of each (when it has been checked): its
// lag and source end, and its state where neither the engine nor the
// flow names one of its own (OwnState).
func (t *Table) Status(eng Engine) []PartitionStatus {
	st := t.Merge(eng.Status(nil))
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range st {
		s := &st[i]
		c, ok := t.checks[progress.TP{Topic: s.Topic, Partition: s.Partition}]
		if !ok {
			continue
		}
		s.SourceEnd, s.Lag, s.LagSeconds = c.SourceEnd, c.Lag, c.LagSeconds
		if !OwnState(s.State) && !OwnState(c.State) { // else the check is older than the state
			s.State = c.State
		}
	}
	return st
}

// heldStatus is the status of partition tp of remote topic remote that is
// not in the engine: in state, with why as its error, and the progress
// store's last copied offset (-1 without one, or without a store).
func heldStatus(tp progress.TP, remote string, store *progress.Store, state, why string) PartitionStatus {
	done := int64(-1)
	if store != nil {
		if saved, ok := store.Get(tp); ok {
			done = saved
		}
	}
	return PartitionStatus{Topic: tp.Topic, Partition: tp.Partition, Remote: remote, Done: done, State: state, Error: why, SourceEnd: -1}
}

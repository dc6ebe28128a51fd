package datapath

import "sort"

// PartitionStatus is what the status API shows of one partition.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Remote    string `json:"remote"`
	// Done is the last source offset known to be on the target; -1 none.
	Done     int64 `json:"done"`
	InFlight int   `json:"in_flight"`
	// State is running, lagging, stalled, paused, restarting, stopped,
	// waiting or fencing.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// SourceEnd is the source's last stable offset at the last health
	// check (-1 unknown); Lag the records from Done to it; LagSeconds at
	// least how long the oldest of them has waited (internal/health).
	SourceEnd  int64   `json:"source_end"`
	Lag        int64   `json:"lag"`
	LagSeconds float64 `json:"lag_seconds"`
}

// States of a partition.
const (
	Running    = "running"
	Paused     = "paused"
	Restarting = "restarting"
	Stopped    = "stopped"
	// Lagging and Stalled are named by internal/health: behind the source for
	// long, or behind with no progress.
	Lagging = "lagging"
	Stalled = "stalled"
	// Waiting and Fencing are partitions of the flow not in its engine
	// yet: the target does not host their remote partition yet (a new
	// topic or partition; Error says what keeps it from being created),
	// or, exactly-once in group mode, the progress other workers saved
	// could not be read yet (waiting, Error says why), or their slot's
	// previous owner could not be fenced yet (fencing, Error says why).
	Waiting = "waiting"
	Fencing = "fencing"
)

// StateOf names a partition's state; a stopped partition is stopped
// whatever else holds, then a restarting one.
func StateOf(stopped, restarting, paused bool) string {
	switch {
	case stopped:
		return Stopped
	case restarting:
		return Restarting
	case paused:
		return Paused
	}
	return Running
}

// OwnState reports whether state is one the engine or the flow names on
// its own (stopped, paused, waiting, fencing), which health keeps: it
// refines only running and restarting.
func OwnState(state string) bool {
	switch state {
	case Stopped, Paused, Waiting, Fencing:
		return true
	}
	return false
}

// SortStatus sorts partition states by topic, then partition.
func SortStatus(out []PartitionStatus) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
}

// NotReady counts the partitions in st that are stopped, stalled or
// fencing, or waiting with an error (their remote topic cannot be made).
// A partition waiting for the target to host it is not counted: that
// takes seconds, and at most a few minutes before it is copied anyway.
func NotReady(st []PartitionStatus) int {
	n := 0
	for _, s := range st {
		switch s.State {
		case Stopped, Stalled, Fencing:
			n++
		case Waiting:
			if s.Error != "" {
				n++
			}
		}
	}
	return n
}

package replicate

import (
	"sort"
)

// PartitionStatus is what the status API shows of one partition.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Remote    string `json:"remote"`
	// Done is the last source offset known to be on the target; -1 none.
	Done     int64  `json:"done"`
	InFlight int    `json:"in_flight"`
	State    string `json:"state"` // running, paused, restarting, stopped
	Error    string `json:"error,omitempty"`
}

// Status returns the state of every assigned partition, sorted.
func (r *Replicator) Status() []PartitionStatus {
	paused := r.paused.Load()
	r.mu.Lock()
	out := make([]PartitionStatus, 0, len(r.parts))
	for _, p := range r.parts {
		p.mu.Lock()
		st := PartitionStatus{Topic: p.tp.Topic, Partition: p.tp.Partition, Remote: p.remote, Done: p.done, InFlight: p.inflight, State: "running"}
		switch {
		case p.stopped:
			st.State = "stopped"
		case p.failed != nil:
			st.State = "restarting"
		case paused:
			st.State = "paused"
		}
		if p.failed != nil {
			st.Error = p.failed.Error()
		} else if p.lastErr != nil {
			st.Error = p.lastErr.Error()
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	r.mu.Unlock()
	SortStatus(out)
	return out
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

// Pause stops fetching from the source; records in flight still complete
// and progress is still saved. Resume undoes it.
func (r *Replicator) Pause() {
	r.paused.Store(true)
	for _, cl := range r.sources {
		cl.PauseFetchTopics(cl.GetConsumeTopics()...)
	}
}

// Resume fetches again after Pause.
func (r *Replicator) Resume() {
	r.paused.Store(false)
	for _, cl := range r.sources {
		cl.ResumeFetchTopics(cl.GetConsumeTopics()...)
	}
}

// Paused reports whether Pause is in effect.
func (r *Replicator) Paused() bool { return r.paused.Load() }

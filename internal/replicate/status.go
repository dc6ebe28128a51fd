package replicate

import "github.com/kmirror/kmirror/internal/datapath"

// Status returns the state of every assigned partition, sorted.
func (r *Replicator) Status() []datapath.PartitionStatus {
	paused := r.Paused()
	r.mu.Lock()
	out := make([]datapath.PartitionStatus, 0, len(r.parts))
	for _, p := range r.parts {
		p.mu.Lock()
		st := datapath.PartitionStatus{Topic: p.tp.Topic, Partition: p.tp.Partition, Remote: p.remote, Done: p.Done, InFlight: p.inflight,
			State: datapath.StateOf(p.stopped, p.failed != nil, paused), SourceEnd: -1}
		if p.failed != nil {
			st.Error = p.failed.Error()
		} else if p.lastErr != nil {
			st.Error = p.lastErr.Error()
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	r.mu.Unlock()
	datapath.SortStatus(out)
	return out
}

// Pause stops fetching from the source; records in flight still complete
// and progress is still saved. Resume undoes it.
func (r *Replicator) Pause() {
	r.SetPaused(true)
	for _, cl := range r.sources {
		cl.PauseFetchTopics(cl.GetConsumeTopics()...)
	}
}

// Resume fetches again after Pause.
func (r *Replicator) Resume() {
	r.SetPaused(false)
	for _, cl := range r.sources {
		cl.ResumeFetchTopics(cl.GetConsumeTopics()...)
	}
}

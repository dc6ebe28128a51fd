package passthrough

import "github.com/kmirror/kmirror/internal/datapath"

// Status returns the state of every assigned partition, sorted.
func (pl *Pipeline) Status() []datapath.PartitionStatus {
	paused := pl.Paused()
	pl.mu.Lock()
	out := make([]datapath.PartitionStatus, 0, len(pl.parts))
	for _, p := range pl.parts {
		if p.revoked {
			continue
		}
		st := datapath.PartitionStatus{Topic: p.tp.Topic, Partition: p.tp.Partition, Remote: p.remote, Done: p.Done, InFlight: p.inflight,
			State: datapath.StateOf(p.stopped, p.retries > 0 || p.badBatches > 0, paused), SourceEnd: -1}
		if p.lastErr != nil {
			st.Error = p.lastErr.Error()
		}
		out = append(out, st)
	}
	pl.mu.Unlock()
	datapath.SortStatus(out)
	return out
}

// Pause stops fetching from the source; batches already fetched still go
// to the target and progress is still saved. Resume undoes it.
func (pl *Pipeline) Pause() { pl.SetPaused(true) }

// Resume fetches again after Pause.
func (pl *Pipeline) Resume() {
	pl.SetPaused(false)
	pl.wake()
}

package passthrough

import "github.com/kmirror/kmirror/internal/replicate"

// Status returns the state of every assigned partition, sorted, as
// replicate.Replicator's Status does.
func (pl *Pipeline) Status() []replicate.PartitionStatus {
	paused := pl.paused.Load()
	pl.mu.Lock()
	out := make([]replicate.PartitionStatus, 0, len(pl.parts))
	for _, p := range pl.parts {
		if p.revoked {
			continue
		}
		st := replicate.PartitionStatus{Topic: p.tp.Topic, Partition: p.tp.Partition, Remote: p.remote, Done: p.done, InFlight: p.inflight, State: "running"}
		switch {
		case p.stopped:
			st.State = "stopped"
		case p.retries > 0:
			st.State = "restarting"
		case paused:
			st.State = "paused"
		}
		if p.lastErr != nil {
			st.Error = p.lastErr.Error()
		}
		out = append(out, st)
	}
	pl.mu.Unlock()
	replicate.SortStatus(out)
	return out
}

// Pause stops fetching from the source; batches already fetched still go
// to the target and progress is still saved. Resume undoes it.
func (pl *Pipeline) Pause() { pl.paused.Store(true) }

// Resume fetches again after Pause.
func (pl *Pipeline) Resume() {
	pl.paused.Store(false)
	pl.wake()
}

// Paused reports whether Pause is in effect.
func (pl *Pipeline) Paused() bool { return pl.paused.Load() }

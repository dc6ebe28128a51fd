package passthrough

import (
	"cmp"
	"slices"

	"github.com/kmirror/kmirror/internal/datapath"
)

// Status returns the state of every assigned partition, sorted. The
// order is kept between calls and sorted again only after partitions
// were added or deleted, so an idle flow's Status is a copy.
func (pl *Pipeline) Status() []datapath.PartitionStatus { return pl.AppendStatus(nil) }

// AppendStatus appends what Status returns to out
// (datapath.StatusAppender).
func (pl *Pipeline) AppendStatus(out []datapath.PartitionStatus) []datapath.PartitionStatus {
	paused := pl.Paused()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out = slices.Grow(out, len(pl.parts))
	for _, p := range pl.sortedLocked() {
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
	return out
}

// sortedLocked returns the partitions by topic, then partition.
func (pl *Pipeline) sortedLocked() []*partition {
	if pl.sorted == nil {
		pl.sorted = make([]*partition, 0, len(pl.parts))
		for _, p := range pl.parts {
			pl.sorted = append(pl.sorted, p)
		}
		slices.SortFunc(pl.sorted, func(a, b *partition) int {
			return cmp.Or(cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition))
		})
	}
	return pl.sorted
}

// Pause stops fetching from the source; batches already fetched still go
// to the target and progress is still saved. Resume undoes it.
func (pl *Pipeline) Pause() { pl.SetPaused(true) }

// Resume fetches again after Pause.
func (pl *Pipeline) Resume() {
	pl.SetPaused(false)
	pl.wake()
}

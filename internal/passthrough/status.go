package passthrough

import (
	"cmp"
	"slices"

	"github.com/kmirror/kmirror/internal/datapath"
)

// Status appends the state of every assigned partition to out, sorted.
// The order is kept between calls and sorted again only after partitions
// were added or deleted, so an idle flow's Status is a copy.
func (pl *Pipeline) Status(out []datapath.PartitionStatus) []datapath.PartitionStatus {
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

// Pause(true) stops fetching from the source; batches already fetched
// still go to the target and progress is still saved. Pause(false)
// fetches again.
func (pl *Pipeline) Pause(on bool) {
	pl.SetPaused(on)
	if !on {
		pl.wake()
	}
}

package flow

import (
	"sync"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// hosting keeps what the last topic sync said of the partitions whose
// remote partition the target does not host yet: they are not copied
// until it does (or until topicsync gives up waiting), and show as
// waiting meanwhile.
type hosting struct {
	mu      sync.Mutex
	topics  map[string]topicsync.Topic // by source name
	waiting []waitingPart              // not handed to the data path
}

// waitingPart is a partition not copied because its remote partition is
// not hosted: why says what keeps it from being created, if anything.
type waitingPart struct {
	tp          progress.TP
	remote, why string
}

// set keeps the topics of a sync and the partitions that wait.
func (h *hosting) set(ts []topicsync.Topic, waiting []waitingPart) {
	m := make(map[string]topicsync.Topic, len(ts))
	for _, t := range ts {
		m[t.Name] = t
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.topics, h.waiting = m, waiting
}

// wait reports whether tp waits for the target to host its remote
// partition, and why when it cannot be created (datapath.Group.Hosting).
// A partition the last sync did not know (its topic grew since) waits.
func (h *hosting) wait(tp progress.TP) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[tp.Topic]
	if !ok || tp.Partition >= t.Hosted {
		return true, t.Err
	}
	return false, ""
}

// count is the number of partitions that wait.
func (h *hosting) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// held returns the status of the partitions that wait, with the progress
// the store holds for them.
func (h *hosting) held(store *progress.Store) []datapath.PartitionStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]datapath.PartitionStatus, 0, len(h.waiting))
	for _, w := range h.waiting {
		out = append(out, datapath.HeldStatus(w.tp, w.remote, store, datapath.Waiting, w.why))
	}
	return out
}

package flow

import (
	"sync"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// hosting keeps what the last topic sync said of each topic: how many of
// its partitions the target hosts, and why the rest cannot be made. A
// partition whose remote partition is not hosted is not copied until it
// is (or until topicsync gives up waiting); the partition table shows it
// as waiting meanwhile.
type hosting struct {
	mu     sync.Mutex
	topics map[string]topicsync.Topic // by source name
}

// set keeps the topics of a sync.
func (h *hosting) set(ts []topicsync.Topic) {
	m := make(map[string]topicsync.Topic, len(ts))
	for _, t := range ts {
		m[t.Name] = t
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.topics = m
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

package checkpoint

import (
	"sort"
	"sync"

	"github.com/kmirror/kmirror/internal/wire"
)

// Mode selects how an upstream offset between two syncs is translated.
type Mode int

const (
	// Exact uses the run rule: between two consecutive syncs both sides
	// are contiguous for min(Δup, Δdown) records (kmirror's exact writer
	// emits a sync at every discontinuity of either side).
	Exact Mode = iota
	// MM2 uses MM2's rule: an offset past a sync translates to the
	// sync's downstream offset + 1.
	MM2
)

func (m Mode) String() string {
	if m == MM2 {
		return "mm2"
	}
	return "exact"
}

// DefaultMaxSyncs is the default number of syncs kept per partition.
const DefaultMaxSyncs = 4096

// entry is one retained sync. run is false once a sync between this one
// and the next was dropped: the interval then uses MM2's +1 rule.
type entry struct {
	up, down int64
	run      bool
	pid      int64 // the producer that wrote the sync; -1 unknown
}

type tp struct {
	topic     string
	partition int32
}

// Store keeps the offset syncs of every upstream partition and translates
// committed upstream offsets to downstream ones. It is safe for concurrent
// use. Memory is bounded by max entries per partition: when a partition
// has more, every other entry of its older half is dropped, so old history
// gets sparser (and translates with the +1 rule) while recent history stays
// dense.
type Store struct {
	mode Mode
	max  int

	mu    sync.RWMutex
	parts map[tp][]entry // sorted by up, strictly increasing up and down
	ready bool
}

// NewStore returns an empty store keeping at most maxSyncs syncs per
// partition (at least 4; <= 0 means DefaultMaxSyncs).
func NewStore(mode Mode, maxSyncs int) *Store {
	if maxSyncs <= 0 {
		maxSyncs = DefaultMaxSyncs
	}
	return &Store{mode: mode, max: max(maxSyncs, 4), parts: make(map[tp][]entry)}
}

// Mode returns the translation mode.
func (s *Store) Mode() Mode { return s.mode }

// SetReady opens translation; before it, Translate finds nothing, as MM2
// does before its store has read the offset-syncs topic to the end.
func (s *Store) SetReady() {
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
}

// Ready reports whether SetReady was called.
func (s *Store) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ready
}

// Len returns the number of syncs retained for a partition.
func (s *Store) Len(topic string, partition int32) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.parts[tp{topic, partition}])
}

// Has reports whether the store holds syncs for a partition.
func (s *Store) Has(topic string, partition int32) bool { return s.Len(topic, partition) > 0 }

// Apply adds a sync, in the order the writer emitted it. Rewinds follow
// MM2's meaning: an upstream rewind (a restart re-copying records)
// supersedes the syncs at or after its upstream offset; a downstream
// rewind (the target topic re-created) drops all history.
func (s *Store) Apply(o wire.OffsetSync) { s.ApplyFrom(o, -1) }

// ApplyFrom is Apply of a sync written by producer pid (the record's
// producer ID; -1 unknown). Two consecutive syncs of one writer bound a
// run: the records between them are contiguous up to a gap just before
// the second (a sync follows every gap), which Exact mode interpolates.
// Syncs of two writers (a worker stopped past its session goes on
// copying beside the partition's new owner, their syncs interleave) do
// not: a sync followed by another producer's ends its run, and an offset
// after it translates as MM2 does (its downstream + 1, behind the data,
// never ahead).
func (s *Store) ApplyFrom(o wire.OffsetSync, pid int64) {
	if o.UpstreamOffset < 0 || o.DownstreamOffset < 0 {
		return
	}
	k := tp{o.Topic, o.Partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts[k] = s.apply(s.parts[k], entry{up: o.UpstreamOffset, down: o.DownstreamOffset, run: true, pid: pid})
}

func (s *Store) apply(es []entry, e entry) []entry {
	i := sort.Search(len(es), func(i int) bool { return es[i].up >= e.up })
	if i < len(es) && es[i].up == e.up && es[i].down == e.down {
		return es // a sync read twice
	}
	es = es[:i] // upstream rewind: later syncs are superseded
	if i > 0 && es[i-1].down >= e.down {
		es = es[:0] // downstream rewind: history is void
	}
	if n := len(es); n > 0 && e.pid >= 0 && es[n-1].pid >= 0 && es[n-1].pid != e.pid {
		es[n-1].run = false // another writer: no run across them
	}
	if s.mode == Exact && len(es) >= 2 {
		// Three syncs on one diagonal: the middle one says nothing the
		// run rule does not already say.
		a, b := es[len(es)-2], es[len(es)-1]
		if a.run && b.run && b.up-a.up == b.down-a.down && e.up-b.up == e.down-b.down {
			es[len(es)-1] = e
			return es
		}
	}
	es = append(es, e)
	if len(es) > s.max {
		es = thin(es)
	}
	return es
}

// thin drops every other entry of the older half (never the oldest),
// marking the survivors before a gap as no longer exact.
func thin(es []entry) []entry {
	half := len(es) / 2
	out := es[:1]
	for i := 1; i < len(es); i++ {
		if i < half && i%2 == 1 {
			out[len(out)-1].run = false
			continue
		}
		out = append(out, es[i])
	}
	return out
}

// Translate returns the downstream offset a group committed at upstream
// offset up on topic/partition should use on the target. ok is false when
// there is no safe answer: the store is not ready, the partition has no
// syncs, or up is before the oldest retained sync (MM2's -1).
func (s *Store) Translate(topic string, partition int32, up int64) (down int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.ready {
		return -1, false
	}
	return translate(s.parts[tp{topic, partition}], s.mode, up)
}

func translate(es []entry, mode Mode, up int64) (int64, bool) {
	if len(es) == 0 || up < 0 {
		return -1, false
	}
	// i: the last sync at or before up.
	i := sort.Search(len(es), func(i int) bool { return es[i].up > up }) - 1
	if i < 0 {
		return -1, false
	}
	e := es[i]
	switch {
	case e.up == up:
		return e.down, true
	case mode == Exact && e.run && i+1 < len(es):
		n := es[i+1]
		return e.down + min(up-e.up, n.up-e.up, n.down-e.down), true
	default:
		return e.down + 1, true
	}
}

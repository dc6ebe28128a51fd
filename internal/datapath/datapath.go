// Package datapath is the core of kmirror's data path: the partition and
// status types, the per-partition progress ledger, gap handling, the
// Revoke sequence, pause state and the group consumer adapter. The
// engine (internal/passthrough, the batch engine) moves the records behind
// one interface, Engine, and keeps its own locking and hot paths.
package datapath

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
)

// OriginHeader is the provenance header: the alias of the cluster where a
// record was first written. It stops identity-named topics from looping
// between clusters that replicate both ways.
const OriginHeader = "kmirror.origin"

// Origin returns the value of OriginHeader among hs, if there is one.
func Origin(hs []kgo.RecordHeader) (string, bool) {
	for _, h := range hs {
		if h.Key == OriginHeader {
			return string(h.Value), true
		}
	}
	return "", false
}

// Partition is a source partition to replicate and the topic it goes to.
type Partition struct {
	TP     progress.TP
	Remote string
}

// Engine moves the records of assigned partitions: the batch engine
// (internal/passthrough). It has the calls flow makes, no more.
type Engine interface {
	// Run copies until ctx ends, then waits up to drain for what is in
	// flight and saves progress one last time.
	Run(ctx context.Context, drain time.Duration) error
	// Assign starts replicating ps from their saved progress (or the log
	// start, or end when so configured). Already assigned partitions are
	// left as they are.
	Assign(ps []Partition)
	// Revoke stops replicating tps, waits for their records in flight
	// and saves their progress.
	Revoke(ctx context.Context, tps []progress.TP) error
	// Rewind restarts the assigned partitions of topic, a source topic
	// that was deleted and re-created, from the log start (StartAtEnd
	// does not apply). Their old progress belongs to the old topic: the
	// engine ignores it and reports their progress as reset (-1 until
	// records of the new topic are copied). The caller saves the reset
	// progress of every partition of the topic.
	Rewind(ctx context.Context, topic string) error
	// Restart fetches tp again from its progress, as if just assigned,
	// when nothing of it is in flight or fetched and waiting; it reports
	// whether it did. The health watchdog (internal/health) calls it for
	// stalled partitions.
	Restart(ctx context.Context, tp progress.TP) bool
	// Commit saves the progress of every partition and publishes the
	// offset syncs that were held back.
	Commit(ctx context.Context) error
	// CommitDue returns a channel that is ready each time a Commit is
	// due before the flush interval: n records acknowledged since the
	// last Commit began (at-least-once), or an open transaction old
	// enough to end (exactly-once). It is called once, before Run.
	CommitDue(n int64) <-chan struct{}
	// Status appends the state of every assigned partition to dst,
	// sorted; a caller that asks often passes the same buffer again.
	Status(dst []PartitionStatus) []PartitionStatus
	// Pause(true) stops fetching from the source; what is in flight
	// still completes and progress is still saved. Pause(false) undoes
	// it.
	Pause(on bool)
}

// Lane spreads the partitions of a topic over n fetch lanes: consecutive
// partitions take turns, so that a topic's partitions split evenly.
func Lane(tp progress.TP, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261) // FNV-1a of the topic name
	for i := 0; i < len(tp.Topic); i++ {
		h = (h ^ uint32(tp.Topic[i])) * 16777619
	}
	return int((h + uint32(tp.Partition)) % uint32(n))
}

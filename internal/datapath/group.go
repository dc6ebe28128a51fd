package datapath

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// Group adapts an Engine to a Kafka consumer group on the source, through
// which several workers share a flow: the group coordinator hands out the
// partitions, moves them when a worker joins or leaves, and takes them from
// a worker that stops answering. kmirror never commits offsets to that
// group; where a partition resumes is its progress on the target, read when
// the partition is assigned.
//
// Engine may be set after the group consumer is made with Options, as long
// as it is before the consumer subscribes to a topic.
type Group struct {
	Engine   Engine
	Progress *progress.Store
	// Remote names the remote topic of a source topic.
	Remote func(topic string) string
	// StartAtEnd starts partitions without progress at the log end.
	StartAtEnd bool
	// OwnFetches means the engine fetches on its own: the group consumer
	// only spreads the partitions, paused, and its positions are unused.
	OwnFetches bool
	// Track, if set, hears first of every assignment (add) and of every
	// partition taken away.
	Track func(m map[string][]int32, add bool)
	Log   *slog.Logger
	// Metrics and the aliases, if set, count failed fencing attempts.
	Metrics                  *metrics.Metrics
	SourceAlias, TargetAlias string
	// Hosting, if set, reports whether tp waits for the target to host
	// its remote partition (a new topic or partition), and why when
	// something keeps it from being created: such a partition is not
	// started until Release finds it hosted.
	Hosting func(tp progress.TP) (wait bool, why string)
	// Recover, if set, is given the newly assigned partitions that have
	// no progress once the progress other workers saved is read, before
	// they start: it may save a position for them (flow: from the last
	// offset sync, when their remote partition already holds records).
	// Only the worker a partition is assigned to recovers it, after its
	// previous owner is fenced and its saved progress read.
	Recover func(ctx context.Context, tps []progress.TP) error
	// Table must be set: the assigned partitions held back (fencing,
	// waiting for the target) are shown there, with why.
	Table *Table

	mu      sync.Mutex           // held by the callbacks and each retry of waiting
	waiting map[progress.TP]wait // assigned, but their previous owners not fenced yet
	retry   bool                 // the retry loop runs
	// retried holds, during a retry's admitLocked, the waits of the
	// partitions it took out of waiting: one whose progress still cannot
	// be read is held again with the wait doubled, not from the start.
	retried map[progress.TP]wait

	unhosted map[progress.TP]bool // assigned, but not hosted by the target yet; under mu
}

// wait is a partition assigned to this worker whose previous owner could
// not be fenced yet, or (unread) whose progress could not be read.
type wait struct {
	delay  time.Duration // the backoff before next
	next   time.Time     // next attempt
	unread bool
}

// Backoff of the attempts to fence the previous owners of waiting
// partitions.
const (
	fenceRetryMin = time.Second
	fenceRetryMax = 30 * time.Second
)

// Options are the group consumer's callbacks.
func (g *Group) Options() []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(g.Assigned),
		kgo.OnPartitionsRevoked(g.Revoked),
		kgo.OnPartitionsLost(g.Revoked),
		kgo.AdjustFetchOffsetsFn(g.Offsets),
	}
}

// Fencer is an Engine whose writes are transactional (exactly-once): a
// partition's previous owner must be fenced, so that nothing it still
// sends can commit, before the partition's progress is read.
// Fence returns the partitions whose previous owner it could not fence,
// with the reason: they must not be copied until a later Fence succeeds.
type Fencer interface {
	Fence(ctx context.Context, tps []progress.TP) map[progress.TP]error
}

// Assigned is kgo's OnPartitionsAssigned: the engine starts the newly
// assigned partitions from their progress. With a Fencer, partitions whose
// previous owner could not be fenced wait, shown in Waiting, and are
// retried with backoff until it succeeds or the group takes them away.
// Partitions the target does not host yet wait too (see Hosting).
func (g *Group) Assigned(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Track != nil {
		g.Track(m, true)
	}
	tps := TPs(m)
	if f, ok := g.Engine.(Fencer); ok {
		failed := f.Fence(ctx, tps)
		tps = g.holdLocked(ctx, tps, failed, fenceRetryMin)
	}
	g.admitLocked(ctx, tps)
}

// startLocked reads the progress other workers saved and has the engine
// start tps from it.
func (g *Group) startLocked(ctx context.Context, tps []progress.TP) {
	if len(tps) == 0 {
		return
	}
	// Another worker may have saved progress for these partitions since
	// this one last read it.
	catchUp := g.Progress.CatchUp
	_, exact := g.Engine.(Fencer)
	if exact {
		// Progress committed behind a transaction still open is read too.
		catchUp = g.Progress.CatchUpStable
	}
	if err := catchUp(ctx); err != nil {
		if exact {
			// Started from older progress, they would copy records
			// again: duplicates. They wait, retried with the fencing.
			g.holdUnreadLocked(ctx, tps, err)
			return
		}
		g.Log.Warn("reading the progress other workers saved failed; assigned partitions resume from older progress and copy some records again", "err", err)
	}
	if err := g.recoverLocked(ctx, tps); err != nil {
		if exact {
			g.holdUnreadLocked(ctx, tps, err)
			return
		}
		// They start where the engine starts a partition without
		// progress (auto.offset.reset).
		where := "at the log start: records already on the target are copied again"
		if g.StartAtEnd {
			where = "at the log end (auto.offset.reset = latest): records before it not copied yet are not copied"
		}
		g.Log.Warn("recovering the position of assigned partitions without progress failed; they start "+where, "err", err)
	}
	var ps []Partition
	for _, tp := range tps {
		remote := g.Remote(tp.Topic)
		ps = append(ps, Partition{TP: tp, Remote: remote})
		from := int64(-1)
		if saved, ok := g.Progress.Get(tp); ok && saved >= 0 {
			from = saved + 1
		}
		g.Log.Info("partition assigned to this worker", "topic", tp.Topic, "partition", tp.Partition, "remote", remote, "from", from)
	}
	// A repair of the progress topic writes back the progress of these
	// partitions now, and no longer that of partitions revoked.
	g.Progress.Own(tps)
	g.Engine.Assign(ps)
	g.Table.Unhold(tps) // after: the engine shows them now
}

// recoverLocked has Recover give the partitions of tps without progress a
// position.
func (g *Group) recoverLocked(ctx context.Context, tps []progress.TP) error {
	if g.Recover == nil {
		return nil
	}
	var none []progress.TP
	for _, tp := range tps {
		if _, ok := g.Progress.Get(tp); !ok {
			none = append(none, tp)
		}
	}
	if len(none) == 0 {
		return nil
	}
	return g.Recover(ctx, none)
}

// Revoked is kgo's OnPartitionsRevoked and OnPartitionsLost: the records
// in flight of the partitions finish and their progress is saved before
// another worker takes them.
func (g *Group) Revoked(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Track != nil {
		g.Track(m, false)
	}
	tps := TPs(m)
	for _, tp := range tps {
		delete(g.waiting, tp)
		delete(g.unhosted, tp)
	}
	g.Table.Unhold(tps)
	g.exportLocked()
	if len(tps) == 0 {
		return
	}
	err := g.Engine.Revoke(ctx, tps)
	// After their final save: a repair of the progress topic until then
	// writes it back.
	g.Progress.Disown(tps)
	if err != nil {
		g.Log.Warn("saving the progress of revoked partitions failed; the next owner copies some records again", "partitions", len(tps), "err", err)
		return
	}
	g.Log.Info("partitions handed back to the group", "partitions", len(tps))
}

// Offsets is kgo's AdjustFetchOffsetsFn: assigned partitions start after
// their progress on the target, whatever the group has committed.
func (g *Group) Offsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for topic, ps := range offsets {
		for part := range ps {
			ps[part] = g.offset(progress.TP{Topic: topic, Partition: part})
		}
	}
	return offsets, nil
}

func (g *Group) offset(tp progress.TP) kgo.Offset {
	if g.OwnFetches {
		return kgo.NewOffset().AtStart() // never used
	}
	if saved, ok := g.Progress.Get(tp); ok && saved >= 0 {
		return kgo.NewOffset().At(saved + 1).WithEpoch(-1)
	}
	if g.StartAtEnd {
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().AtStart()
}

// TPs lists the partitions of a group callback's map.
func TPs(m map[string][]int32) []progress.TP {
	var tps []progress.TP
	for topic, parts := range m {
		for _, part := range parts {
			tps = append(tps, progress.TP{Topic: topic, Partition: part})
		}
	}
	return tps
}

// Lists turns a map of partitions to anything into topic -> partitions.
func Lists[V any](m map[string]map[int32]V) map[string][]int32 {
	out := make(map[string][]int32, len(m))
	for topic, ps := range m {
		for p := range ps {
			out[topic] = append(out[topic], p)
		}
	}
	return out
}

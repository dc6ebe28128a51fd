package datapath

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/lograte"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
)

// Core is the state the engine keeps beside its own: progress and offset
// syncs, the acknowledged count, pause state and rate-limited logs. The
// engine embeds it.
type Core struct {
	SourceAlias, TargetAlias string
	// SourceAdmin lists offsets when a fetch position fell off the log.
	SourceAdmin *kadm.Client
	Progress    *progress.Store
	// Syncs receives every acknowledged (upstream, downstream) pair; nil
	// disables offset syncs.
	Syncs   *offsetsync.Writer
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Logs limits the warnings that repeat (a partition retried every
	// second, one error on many partitions) per cause; see lograte.
	Logs lograte.Limiter

	ackedSince atomic.Int64 // records acknowledged since the last Commit
	paused     atomic.Bool  // Pause is in effect
	// reached is ready once ackedSince reached reachAt (0: never).
	reachOnce sync.Once
	reached   chan struct{}
	reachAt   atomic.Int64
}

// Acked counts n records the target acknowledged.
func (c *Core) Acked(n int64) {
	v := c.ackedSince.Add(n)
	if at := c.reachAt.Load(); at > 0 && v >= at && v-n < at {
		select {
		case c.reached <- struct{}{}:
		default:
		}
	}
}

// AckedReached returns a channel that is ready each time AckedSinceCommit
// reaches n, so that the caller need not ask AckedSinceCommit over and
// over (AckWatcher).
func (c *Core) AckedReached(n int64) <-chan struct{} {
	c.reachOnce.Do(func() { c.reached = make(chan struct{}, 1) })
	c.reachAt.Store(n)
	return c.reached
}

// AckedSinceCommit returns how many records the target acknowledged since
// the last Commit began.
func (c *Core) AckedSinceCommit() int64 { return c.ackedSince.Load() }

// CommitStarted restarts the count of AckedSinceCommit.
func (c *Core) CommitStarted() { c.ackedSince.Store(0) }

// Save saves positions and publishes the offset syncs that were held
// back: a non-transactional Commit.
func (c *Core) Save(ctx context.Context, positions map[progress.TP]int64) error {
	c.CommitStarted()
	return c.Progress.SaveAndSync(ctx, positions, c.Syncs)
}

// SetPaused records whether Pause is in effect.
func (c *Core) SetPaused(on bool) { c.paused.Store(on) }

// Paused reports whether Pause is in effect.
func (c *Core) Paused() bool { return c.paused.Load() }

// Parts is an engine's side of Release, the Revoke sequence; each method takes the
// engine's own locks.
type Parts interface {
	// MarkRevoked stops sending the records of tps and returns those
	// that are assigned.
	MarkRevoked(tps []progress.TP) []progress.TP
	// InFlight returns how many sends of tp are not answered yet.
	InFlight(tp progress.TP) int
	// Position returns tp's progress to save, and whether there is any.
	Position(tp progress.TP) (int64, bool)
	// Delete forgets tps.
	Delete(tps []progress.TP)
}

// Release is the Revoke sequence: mark tps revoked, wait for their sends in
// flight, save their final progress and publish their held-back offset
// syncs (with save), forget their offset-sync state and delete them. They are deleted even when waiting or saving
// fails, so that a later Assign starts them afresh from their saved
// progress instead of finding them still held.
func (c *Core) Release(ctx context.Context, ps Parts, tps []progress.TP, save bool) error {
	mine := ps.MarkRevoked(tps)
	defer func() {
		c.Forget(mine)
		ps.Delete(mine)
	}()
	final := make(map[progress.TP]int64)
	for _, tp := range mine {
		if err := WaitIdle(ctx, func() bool { return ps.InFlight(tp) == 0 }); err != nil {
			return err
		}
		if off, ok := ps.Position(tp); ok {
			final[tp] = off
		}
	}
	if !save {
		return nil
	}
	if err := c.Progress.Save(ctx, final); err != nil {
		return err
	}
	// The offset syncs held back for the next save go out now: forgotten,
	// the newest pairs would be lost, and the next owner's checkpoints
	// would translate the offsets after the last published sync coarsely.
	return c.publish(ctx, mine)
}

// publish flushes the offset syncs held back for tps.
func (c *Core) publish(ctx context.Context, tps []progress.TP) error {
	if c.Syncs == nil || len(tps) == 0 {
		return nil
	}
	set := make(map[progress.TP]bool, len(tps))
	for _, tp := range tps {
		set[tp] = true
	}
	return c.Syncs.FlushOnly(ctx, func(topic string, partition int32) bool {
		return set[progress.TP{Topic: topic, Partition: partition}]
	})
}

// Forget drops the offset-sync state of tps.
func (c *Core) Forget(tps []progress.TP) {
	if c.Syncs == nil {
		return
	}
	for _, tp := range tps {
		c.Syncs.Forget(tp.Topic, tp.Partition)
	}
}

// WaitIdle polls idle every 5 ms until it reports true or ctx ends.
func WaitIdle(ctx context.Context, idle func() bool) error {
	for !idle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// LogRange is the start and end offsets of a source partition's log.
type LogRange struct{ Start, End int64 }

// ListRange lists the log start and end of tp after an out-of-range
// fetch; ok is false (and a warning logged) when that fails.
func (c *Core) ListRange(ctx context.Context, tp progress.TP) (LogRange, bool) {
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	starts, err1 := c.SourceAdmin.ListStartOffsets(rctx, tp.Topic)
	ends, err2 := c.SourceAdmin.ListEndOffsets(rctx, tp.Topic)
	if err := errors.Join(err1, err2); err != nil {
		c.Logs.Warn(c.Log, "list offsets after out of range|"+err.Error(), "cannot list offsets after offset out of range; retrying", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return LogRange{}, false
	}
	start, ok1 := starts.Lookup(tp.Topic, tp.Partition)
	end, ok2 := ends.Lookup(tp.Topic, tp.Partition)
	if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
		c.Logs.Warn(c.Log, "list offsets after out of range", "cannot list offsets after offset out of range; retrying", "topic", tp.Topic, "partition", tp.Partition)
		return LogRange{}, false
	}
	return LogRange{start.Offset, end.Offset}, true
}

// AfterGap decides where a partition whose fetch position want fell off
// its log r resumes. Records removed before they were copied, or a log
// that restarted below want, are reported (logged, and counted in
// kmirror_source_records_lost_total), never skipped silently.
func (c *Core) AfterGap(tp progress.TP, want int64, r LogRange) int64 {
	kind := gapOf(want, r)
	if kind == noGap {
		return want
	}
	lost := c.Metrics.RecordsLost.WithLabelValues(c.SourceAlias, c.TargetAlias, tp.Topic, strconv.Itoa(int(tp.Partition)))
	if kind == removed {
		n := r.Start - want
		c.Log.Error("source records lost before replication: removed upstream (retention or DeleteRecords) before kmirror copied them",
			"topic", tp.Topic, "partition", tp.Partition, "first_lost", want, "last_lost", r.Start-1, "count", n)
		lost.Add(float64(n))
		return r.Start
	}
	c.Log.Error("source partition is shorter than what was replicated: the topic was deleted and re-created, or its log truncated; records written after offset "+
		strconv.FormatInt(want-1, 10)+" of the old log and not yet copied are lost; continuing from the log start",
		"topic", tp.Topic, "partition", tp.Partition, "expected", want, "log_start", r.Start, "log_end", r.End)
	lost.Add(0)
	return r.Start
}

// Kinds of gap between a fetch position and the log.
const (
	noGap     = iota
	removed   // records before the log start were removed
	truncated // the log ends before the position: re-created or truncated
)

func gapOf(want int64, r LogRange) int {
	switch {
	case want < r.Start:
		return removed
	case want > r.End:
		return truncated
	}
	return noGap
}

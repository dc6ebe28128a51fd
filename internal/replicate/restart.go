package replicate

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
)

// Rewind restarts every partition of topic that this Replicator owns at
// the log start, for a source topic that was deleted and re-created: the
// old progress belongs to the old topic.
func (r *Replicator) Rewind(ctx context.Context, topic string) error {
	r.mu.Lock()
	var mine []*partition
	for tp, p := range r.parts {
		if tp.Topic == topic {
			mine = append(mine, p)
		}
	}
	r.mu.Unlock()
	for _, p := range mine {
		r.stopFetching(p.tp)
		if err := p.drain(ctx); err != nil {
			return err
		}
		r.Forget([]progress.TP{p.tp})
		p.mu.Lock()
		p.base, p.Reset = -1, true
		p.mu.Unlock()
		r.resume(ctx, p, 0, nil, 0)
	}
	return nil
}

// handleRestarts restarts or stops failed partitions once their records in
// flight are back. It runs in the poll loop.
func (r *Replicator) handleRestarts(ctx context.Context) {
	r.mu.Lock()
	ps := r.restarts
	r.restarts = nil
	r.mu.Unlock()
	for _, p := range ps {
		r.restart(ctx, p)
	}
}

func (r *Replicator) restart(ctx context.Context, p *partition) {
	r.stopFetching(p.tp)
	// Nothing of p may be in flight when p.Done is read.
	if p.drain(ctx) != nil {
		return
	}
	p.mu.Lock()
	err := p.failed
	from := p.Done + 1
	p.mu.Unlock()
	r.resume(ctx, p, from, err, time.Second)
}

// resume restarts p at source offset from after err, or stops it when err
// is fatal. p must have nothing in flight.
func (r *Replicator) resume(ctx context.Context, p *partition, from int64, err error, delay time.Duration) {
	p.mu.Lock()
	if from <= 0 && p.base > 0 {
		from = p.base // nothing copied yet: where this partition began
	}
	// Too large is fatal too, unless the records were not yet sent one
	// at a time.
	isFatal := datapath.Classify(err) != datapath.Retry
	if errors.Is(err, kerr.MessageTooLarge) && !p.failedCareful {
		// The target refused a whole batch: send what was fetched one
		// record at a time to copy the records before the large one and
		// stop exactly at it.
		isFatal = false
		p.carefulUntil = p.next - 1
	}
	p.gen++
	p.last = nil
	if err != nil {
		p.lastErr = err
	}
	p.failed = nil
	p.Done = from - 1
	p.next = from
	p.stopped = isFatal
	p.mu.Unlock()
	if err != nil {
		r.cfg.Metrics.PartitionErrors.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)), strconv.FormatBool(isFatal)).Inc()
	}
	if isFatal {
		r.cfg.Log.Error("partition stopped: the record cannot be written to the target; fix the cause and restart kmirror",
			"topic", p.tp.Topic, "partition", p.tp.Partition, "offset", from, "remote", p.remote, "err", err)
		return
	}
	if err != nil {
		r.Logs.Warn(r.cfg.Log, "produce error|"+err.Error(), "partition restarting after a produce error", "topic", p.tp.Topic, "partition", p.tp.Partition, "from", from, "err", err)
		// The error may come from stale metadata, e.g. partitions just added.
		for _, cl := range r.producers() {
			cl.ForceMetadataRefresh()
		}
	}
	if delay <= 0 {
		r.startFetching(p.tp, from)
		return
	}
	// Later, without holding up the poll loop (and so the other
	// partitions); a newer restart or rewind of p wins.
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()
	time.AfterFunc(delay, func() {
		p.mu.Lock()
		current := p.gen == gen
		p.mu.Unlock()
		if current && ctx.Err() == nil && r.lookup(p.tp) == p {
			r.startFetching(p.tp, from)
		}
	})
}

// Restart fetches tp again from its progress when nothing of it is in
// flight.
func (r *Replicator) Restart(ctx context.Context, tp progress.TP) bool {
	p := r.lookup(tp)
	if p == nil {
		return false
	}
	p.mu.Lock()
	busy := p.inflight > 0 || p.failed != nil || p.stopped
	from := p.Done + 1
	p.mu.Unlock()
	if busy {
		return false
	}
	r.stopFetching(tp)
	if p.drain(ctx) != nil {
		return false
	}
	r.resume(ctx, p, from, nil, 0)
	return true
}

// stopFetching stops fetching tp until startFetching.
func (r *Replicator) stopFetching(tp progress.TP) {
	if r.cfg.Group {
		r.cfg.Source.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		return
	}
	r.source(tp).RemoveConsumePartitions(map[string][]int32{tp.Topic: {tp.Partition}})
}

// startFetching fetches tp from source offset from (the log start when
// from is 0 or less).
func (r *Replicator) startFetching(tp progress.TP, from int64) {
	if r.cfg.Group {
		r.cfg.Source.SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.Topic: {tp.Partition: {Epoch: -1, Offset: max(from, 0)}}})
		if !r.Paused() {
			r.cfg.Source.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		}
		return
	}
	off := kgo.NewOffset().At(from)
	if from <= 0 {
		off = kgo.NewOffset().AtStart()
	}
	cl := r.source(tp)
	cl.RemoveConsumePartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: off}})
}

// fetchError handles an error fetching one partition. An offset out of
// range means records are gone from the source before they were copied:
// that is reported with the lost range, never skipped silently.
func (r *Replicator) fetchError(ctx context.Context, tp progress.TP, err error) {
	p := r.lookup(tp)
	if p == nil {
		return
	}
	if errors.Is(err, kgo.ErrMaxDecompress) { // franz-go fetches the partition no more
		p.mu.Lock()
		p.stopped, p.lastErr = true, err
		p.mu.Unlock()
		r.cfg.Metrics.PartitionErrors.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, tp.Topic, strconv.Itoa(int(tp.Partition)), "true").Inc()
		r.cfg.Log.Error("partition stopped: a source batch decompresses beyond kmirror's bound", "topic", tp.Topic, "partition", tp.Partition, "limit", clients.MaxDecompressedBatchBytes, "err", err)
		return
	}
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		r.Logs.Warn(r.cfg.Log, "fetch error|"+err.Error(), "fetch error", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return
	}
	lr, ok := r.ListRange(ctx, tp)
	if !ok {
		return
	}
	p.mu.Lock()
	want := p.next
	resume := r.AfterGap(tp, want, lr)
	if resume != want {
		p.next = resume
		p.skipLocked(resume - 1)
		if resume < want {
			// The log restarted below what was done: progress follows it.
			p.Restart(resume)
		}
	}
	p.mu.Unlock()
	r.startFetching(tp, resume)
}

package passthrough

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// partition is the state of one assigned source partition; pl.mu guards it.
type partition struct {
	tp     progress.TP
	remote string
	labels prometheus.Labels

	recordCount, byteCount prometheus.Counter
	recordAge, latency     *metrics.Window
	values                 valueSizer // value bytes for byteCount

	// The record buffer: what the fetch side adds to and the produce
	// side takes from.
	datapath.Ledger
	// queue holds the batches fetched and not yet done, in offset
	// order. queue[0] is never acknowledged: acknowledged batches at
	// its head are taken off at once, so progress only moves in order.
	queue     []*outBatch
	queued    int64 // bytes in queue
	stopped   bool  // a fatal error stopped the partition
	stopAfter error // stop with this error once the queue is sent
	revoked   bool
	retryAt   time.Time  // no fetch or produce of it before
	lastErr   error      // the last produce or source batch error, or what stopped the partition
	syncq     []syncAck  // acknowledged, for the offset-sync writer
	syncMu    sync.Mutex // keeps the offset-sync calls in order
	// txn is the transaction its batches go in (exactly-once), nil
	// otherwise; it never changes.
	txn *txnState
	// committed is the position the last successful Commit saved
	// (hasCommitted: there was one).
	committed    int64
	hasCommitted bool

	partFetch   // fetch.go, session.go
	partProduce // produce.go
}

// partFetch is a partition's state on the fetch side.
type partFetch struct {
	gen        int   // bumped when the fetch position jumps; older fetches are dropped
	next       int64 // next source offset to fetch; -1 until resolved
	base       int64 // first offset fetched without progress; -1 unknown
	fromStart  bool  // next resolves to the log start even with StartAtEnd
	outOfRange bool
	// badBatches counts the fetches in a row that held an unreadable batch.
	badBatches int
	lane       int // index of the source client that fetches it
	// member is the lane that counts p among the partitions it carries,
	// wantIn the one p may fetch on now (session.go); nil for none.
	member, wantIn      *laneState
	srcLeader, srcEpoch int32
	srcID               [16]byte
}

// partProduce is a partition's state on the produce side.
type partProduce struct {
	inflight int // batches of queue in produce requests
	// blocked stops sending after a failed batch until every batch in
	// flight has answered; then the unacknowledged ones are sent again
	// from the oldest, with the same sequences (renumber: from seqFrom).
	blocked  bool
	renumber bool
	seqFrom  int32
	// ackPID and ackAt tell when the target last acknowledged a batch of
	// this partition and under which producer ID. A broker takes the
	// first batch of a producer it has no state for whatever its
	// sequence, so until one batch is acknowledged only one is in flight:
	// a later one must not be written before an earlier one that failed.
	ackPID  int64
	ackAt   time.Time
	seq     int32 // next base sequence under the current producer ID
	retries int
	// aloneUntil: after a produce error, batches go one at a time until
	// one that completes this source offset is acknowledged; -1 none.
	aloneUntil int64
	tgtLeader  int32
	tgtID      [16]byte
	// maxBytes is the target's max.message.bytes; the fetcher reads it
	// without pl.mu.
	maxBytes atomic.Int64
}

// outBatch is one v2 batch on its way to the target.
type outBatch struct {
	raw       []byte  // complete batch; its header is stamped at each send
	first     int64   // source offset of the first record
	last      int64   // source offset the batch completes
	count     int32   // records
	offsets   []int64 // source offset of each record; nil means first+i
	advanceTo int64   // skipped source offsets that complete with this batch
	maxTS     int64
	seq       int32
	seqSet    bool
	tried     bool  // sent at least once
	state     uint8 // stUnsent, stSending or stAcked
	dstBase   int64 // target offset of the first record once acked; -1 unknown
}

// resetSeqLocked starts p's sequences at 0 for a new producer ID or epoch:
// the batches not acknowledged get theirs when sent again.
func (p *partition) resetSeqLocked() {
	p.seq, p.renumber = 0, false
	for _, b := range p.queue {
		if b.state != stAcked {
			b.seqSet = false
		}
	}
}

// States of an outBatch.
const (
	stUnsent uint8 = iota
	stSending
	stAcked
)

// syncAck is an acknowledged batch waiting for the offset-sync writer.
type syncAck struct {
	b    *outBatch
	base int64
}

func (b *outBatch) offset(i int) int64 {
	if b.offsets != nil {
		return b.offsets[i]
	}
	return b.first + int64(i)
}

// Assign starts replicating ps from their saved progress (or the log
// start, or end with StartAtEnd). Already assigned partitions are left as
// they are.
func (pl *Pipeline) Assign(ps []datapath.Partition) { pl.assign(ps, false) }

// assign is Assign; fromStart starts partitions without progress at the
// log start whatever StartAtEnd says.
func (pl *Pipeline) assign(ps []datapath.Partition, fromStart bool) {
	m := pl.cfg.Metrics
	var stale []progress.TP
	pl.mu.Lock()
	for _, a := range ps {
		if old, ok := pl.parts[a.TP]; ok {
			if old.txn == nil || old.txn.live() || !pl.slotted() {
				continue
			}
			// Stopped with its fenced slot and handed out again.
			pl.deleteLocked(old)
			stale = append(stale, a.TP)
		}
		l := prometheus.Labels{"source": pl.cfg.SourceAlias, "target": pl.cfg.TargetAlias, "topic": a.Remote, "partition": strconv.Itoa(int(a.TP.Partition))}
		p := &partition{
			tp: a.TP, remote: a.Remote, labels: l,
			recordCount: m.RecordCount.With(l), byteCount: m.ByteCount.With(l),
			recordAge: m.RecordAgeMs.With(l), latency: m.ReplicationLatencyMs.With(l),
			Ledger:      datapath.NewLedger(),
			partFetch:   partFetch{next: -1, base: -1, fromStart: fromStart, srcLeader: -1, lane: datapath.Lane(a.TP, len(pl.fetcher.sources))},
			partProduce: partProduce{tgtLeader: -1, aloneUntil: -1},
		}
		p.maxBytes.Store(defaultMaxMessageBytes)
		from := "log start"
		switch saved, ok := pl.cfg.Progress.Get(a.TP); {
		case fromStart:
			p.Reset = true // the saved progress was reset by the caller
		case ok && saved >= 0:
			p.Done, p.next = saved, saved+1
			from = strconv.FormatInt(saved+1, 10)
		case pl.cfg.StartAtEnd:
			from = "log end"
		}
		if pl.eos() {
			p.txn = pl.txnForLocked(a.TP)
			p.txn.members[p] = struct{}{}
		}
		// Given back (a rebalance, a rewind): the target still holds
		// this producer's state of the partition, and sequences from 0
		// again would be taken for retries of the first batches
		// (DUPLICATE_SEQUENCE_NUMBER, answered as written) and dropped.
		if m, ok := pl.seqs[a.TP]; ok {
			if pid, epoch := pl.producerLocked(p); pid >= 0 && m.pid == pid && m.epoch == epoch {
				p.seq = m.next
			}
		}
		pl.parts[a.TP] = p
		pl.sorted = nil
		pl.touchLocked(p)
		pl.moved[p] = struct{}{}
		if p.next < 0 {
			pl.unresolved[p] = struct{}{}
		}
		pl.needMeta.Store(true)
		pl.cfg.Log.Info("replicating partition (passthrough)", "topic", a.TP.Topic, "partition", a.TP.Partition, "remote", a.Remote, "from", from)
	}
	pl.mu.Unlock()
	pl.Forget(stale)
	pl.wake()
}

// Revoke stops replicating tps, waits for their batches in flight and
// saves their progress. Batches fetched and not yet sent are dropped.
func (pl *Pipeline) Revoke(ctx context.Context, tps []progress.TP) error {
	if pl.eos() {
		return pl.txnRevoke(ctx, tps)
	}
	return pl.Release(ctx, revoker{pl: pl, gone: true}, tps, true)
}

// Rewind restarts the partitions of topic that the Pipeline owns at the
// log start, for a source topic that was deleted and re-created.
func (pl *Pipeline) Rewind(ctx context.Context, topic string) error {
	pl.mu.Lock()
	var tps []progress.TP
	var ps []datapath.Partition
	for tp, p := range pl.parts {
		if tp.Topic == topic && !p.revoked {
			tps = append(tps, tp)
			ps = append(ps, datapath.Partition{TP: tp, Remote: p.remote})
		}
	}
	pl.mu.Unlock()
	if err := pl.Release(ctx, revoker{pl: pl}, tps, false); err != nil {
		return err
	}
	pl.assign(ps, true)
	return nil
}

// revoker is the Pipeline's side of datapath.Core.Release. With gone, the
// partitions leave the Pipeline (revoked, or their topic is gone): Delete
// also drops their metric series and what the Pipeline kept of them.
type revoker struct {
	pl   *Pipeline
	gone bool
}

func (v revoker) MarkRevoked(tps []progress.TP) []progress.TP {
	pl := v.pl
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var mine []progress.TP
	for _, tp := range tps {
		p := pl.parts[tp]
		if p == nil {
			continue
		}
		p.revoked = true
		p.gen++
		pl.dropQueueLocked(p, true)
		pl.touchLocked(p)
		mine = append(mine, tp)
	}
	return mine
}

func (v revoker) InFlight(tp progress.TP) int {
	v.pl.mu.Lock()
	defer v.pl.mu.Unlock()
	if p := v.pl.parts[tp]; p != nil {
		return p.inflight
	}
	return 0
}

func (v revoker) Position(tp progress.TP) (int64, bool) {
	v.pl.mu.Lock()
	defer v.pl.mu.Unlock()
	if p := v.pl.parts[tp]; p != nil {
		return p.Position()
	}
	return 0, false
}

func (v revoker) Delete(tps []progress.TP) {
	pl := v.pl
	var gone []*partition
	topics := make(map[string]bool) // those with no partition left
	pl.mu.Lock()
	for _, tp := range tps {
		if p := pl.parts[tp]; p != nil {
			pl.deleteLocked(p)
			gone = append(gone, p)
			topics[tp.Topic] = true
		}
	}
	for tp := range pl.parts {
		delete(topics, tp.Topic)
	}
	pl.mu.Unlock()
	if !v.gone {
		return
	}
	for _, p := range gone {
		pl.cfg.Metrics.ForgetPartition(p.labels, p.tp.Topic)
		pl.legacySeen.Delete(p.tp)
	}
	for topic := range topics {
		pl.cfg.Metrics.ForgetTopic(pl.cfg.SourceAlias, pl.cfg.TargetAlias, topic)
	}
}

// deleteLocked forgets p.
func (pl *Pipeline) deleteLocked(p *partition) {
	if pid, epoch := pl.producerLocked(p); pid >= 0 {
		pl.seqs[p.tp] = seqMark{pid, epoch, p.seq}
	}
	if p.txn != nil {
		delete(p.txn.members, p)
	}
	pl.dropQueueLocked(p, false)
	delete(pl.parts, p.tp)
	pl.sorted = nil
	delete(pl.sendable, p)
	delete(pl.moved, p)
	pl.touchLocked(p)
}

// producerLocked returns the producer ID and epoch p's batches go under:
// its transaction's, or the Pipeline's idempotent producer's (-1 none yet).
func (pl *Pipeline) producerLocked(p *partition) (int64, int16) {
	if p.txn != nil {
		return p.txn.pid, p.txn.epoch
	}
	return pl.pid, pl.epoch
}

// dropQueueLocked forgets p's queued batches, except, if keepSent, those
// up to the last one in flight: their answers still move progress.
func (pl *Pipeline) dropQueueLocked(p *partition, keepSent bool) {
	keep := 0
	if keepSent {
		for i, b := range p.queue {
			if b.state != stUnsent {
				keep = i + 1
			}
		}
	}
	for _, b := range p.queue[keep:] {
		p.queued -= int64(len(b.raw))
		pl.buffered -= int64(len(b.raw))
	}
	clear(p.queue[keep:])
	p.queue = p.queue[:keep]
	pl.touchLocked(p)
}

// Positions returns, for every assigned partition with progress, the last
// source offset that is safely on the target.
func (pl *Pipeline) Positions() map[progress.TP]int64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := make(map[progress.TP]int64, len(pl.parts))
	for tp, p := range pl.parts {
		if off, ok := p.Position(); ok {
			out[tp] = off
		}
	}
	return out
}

// Commit saves the progress of every partition and publishes the offset
// syncs that were held back.
func (pl *Pipeline) Commit(ctx context.Context) error {
	if pl.eos() {
		return pl.txnCommit(ctx, nil)
	}
	pos := pl.changedPositions()
	if err := pl.Save(ctx, pos); err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for tp, off := range pos {
		if p := pl.parts[tp]; p != nil {
			p.committed, p.hasCommitted = off, true
			if now, _ := p.Position(); now == off {
				delete(pl.moved, p)
			}
		}
	}
	return nil
}

// CommitDue returns a channel that is ready each time a Commit is due
// before the flush interval: n records acknowledged since the last Commit
// began (datapath.Core counts them); in exactly-once mode, an open
// transaction txnCommitAge old instead (txnAged).
func (pl *Pipeline) CommitDue(n int64) <-chan struct{} {
	if pl.eos() {
		return pl.txnDue
	}
	return pl.Core.AckedReached(n)
}

// changedPositions returns the positions that differ from what the last
// successful Commit saved of their partition: the progress store writes
// only those anyway. It looks only at the partitions whose progress moved
// since (pl.moved: every change of a Ledger adds its partition), so an
// idle flow's Commit costs nothing per partition.
func (pl *Pipeline) changedPositions() map[progress.TP]int64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out map[progress.TP]int64
	for p := range pl.moved {
		tp := p.tp
		off, ok := p.Position()
		if pl.parts[tp] != p || !ok || p.hasCommitted && p.committed == off {
			delete(pl.moved, p)
			continue
		}
		if out == nil {
			out = make(map[progress.TP]int64)
		}
		out[tp] = off
	}
	return out
}

// outOfRange handles a fetch position that is not in the source log: the
// records between it and the log start are gone and are reported, never
// skipped silently.
func (pl *Pipeline) outOfRange(ctx context.Context, p *partition) {
	lr, ok := pl.ListRange(ctx, p.tp)
	if !ok {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.outOfRange = false
	pl.touchLocked(p)
	want := p.next
	resume := pl.AfterGap(p.tp, want, lr)
	if resume != want {
		p.next = resume
		p.gen++
		pl.skipLocked(p, resume-1)
		if resume < want {
			// The log restarted below what was done: progress follows it.
			p.Restart(resume)
			pl.moved[p] = struct{}{}
		}
	}
}

// skipLocked marks source offsets up to off as handled without a record
// on the target: at once if nothing is queued, else with the last queued
// batch.
func (pl *Pipeline) skipLocked(p *partition, off int64) {
	if n := len(p.queue); n > 0 {
		p.queue[n-1].advanceTo = max(p.queue[n-1].advanceTo, off)
		return
	}
	p.Skip(off)
	pl.moved[p] = struct{}{}
}

// stopLocked stops p for good after an error that needs a person.
func (pl *Pipeline) stopLocked(p *partition, err error) {
	offset := p.Done + 1
	var tl *errTooLarge
	if errors.As(err, &tl) {
		offset = tl.offset
	} else if len(p.queue) > 0 {
		offset = p.queue[0].first
	}
	p.stopped, p.lastErr = true, err
	pl.touchLocked(p)
	if pl.eos() {
		for _, b := range p.queue {
			if b.tried || b.state != stUnsent {
				failTxnLocked(p.txn, fmt.Errorf("partition %s stopped with batches on the target beyond its progress: %w", p.tp, err))
			}
		}
	}
	pl.dropQueueLocked(p, false)
	pl.cfg.Metrics.PartitionErrors.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)), "true").Inc()
	msg := "partition stopped: the record cannot be written to the target; fix the cause and restart kmirror"
	if errors.Is(err, kgo.ErrMaxDecompress) { // a batch re-encoding would have to decompress
		msg = "partition stopped: a source batch decompresses beyond kmirror's bound; fix the cause and restart kmirror"
	}
	pl.cfg.Log.Error(msg, "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", offset, "remote", p.remote, "err", err)
}

// Restart fetches tp again from its progress when nothing of it is in
// flight or queued, with its source leader looked up again.
func (pl *Pipeline) Restart(_ context.Context, tp progress.TP) bool {
	pl.mu.Lock()
	p := pl.parts[tp]
	if p == nil || p.revoked || p.stopped || p.stopAfter != nil || p.inflight > 0 || len(p.queue) > 0 {
		pl.mu.Unlock()
		return false
	}
	// A fetch still out is dropped when it answers; p joins a fetch
	// session again once the one it was in forgot it.
	p.gen++
	if pos, ok := p.Position(); ok {
		p.next = pos + 1
	}
	p.outOfRange = false
	p.retryAt = time.Time{}
	p.srcLeader = -1
	pl.touchLocked(p)
	pl.needMeta.Store(true)
	pl.mu.Unlock()
	pl.wake()
	return true
}

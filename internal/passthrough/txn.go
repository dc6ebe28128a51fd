package passthrough

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/progress"
)

// Exactly-once mode (Config.TransactionalID set). The producer is
// transactional: between two commits, every forwarded batch goes to the
// target inside one transaction, with the transactional bit set, and the
// progress that covers them is written as a batch of the same transaction
// to the offsets topic. A read_committed reader of the target then sees
// every source record once, across crashes: InitProducerID by the next
// instance with the same transactional ID aborts what a crash left open,
// and the new instance resumes from the committed progress.
//
// With Config.Slots (several workers), the partitions are spread over
// slots (internal/slots), each with its own transactional ID, producer ID,
// epoch, sequences and transaction: a worker given a slot takes it with
// InitProducerID (Fence), which fences the slot's previous owner, before
// the slot's progress is read; a fenced slot stops only its partitions.
// Without slots there is one transaction, and being fenced stops the
// Pipeline.
//
// The transaction requests go to the transaction coordinator as kmsg
// requests capped at the versions of transaction protocol version 1
// (explicit AddPartitionsToTxn, no epoch bump at EndTxn), which every
// Kafka broker since 0.11 serves.
//
// A failed transaction (a batch the target lost, an unknown commit
// outcome) is aborted with EndTxn, then InitProducerID with the current
// producer ID and epoch (KIP-360) bumps the epoch, which starts the
// sequences again; the transaction's partitions go back to their
// committed progress. A producer another one fenced learns it from that
// EndTxn, which leaves the new owner's transaction alone.

// Highest request versions of transaction protocol version 1.
const (
	maxProduceTV1   = 11
	maxEndTxnTV1    = 4
	maxAddPartsTV1  = 3
	maxInitPIDTV1   = 4
	txnTimeout      = 60 * time.Second
	commitWait      = 30 * time.Second // for the transaction's batches before a commit gives up
	txnCommitAge    = time.Second      // a transaction this old asks the flow for a commit
	txnRequestTries = 50
	// commitGrace is how long a commit that is writing its progress or
	// ending its transaction goes on after its caller gave up.
	commitGrace = 10 * time.Second
	// slotInits bounds the slots Fence takes at once.
	slotInits = 16
)

// coordinatorRetry is the wait before a request to the transaction
// coordinator is tried again: CONCURRENT_TRANSACTIONS after an EndTxn
// passes in milliseconds, a coordinator that moved in seconds.
var coordinatorRetry = backoff.Policy{First: 20 * time.Millisecond, Max: 500 * time.Millisecond}

// capped caps the version franz-go negotiates for a request.
type capped struct {
	kmsg.Request
	max int16
}

func (c capped) MaxVersion() int16 { return min(c.max, c.Request.MaxVersion()) }

// errFenced reports that another producer took the transactional ID.
var errFenced = errors.New("another kmirror with the same transactional ID fenced this one; it stops writing")

// fencedErrs from the coordinator or a broker mean another producer with
// the same transactional ID started; TransactionalIDAuthorizationFailed
// cannot heal either.
var fencedErrs = []error{kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.TransactionalIDAuthorizationFailed, kerr.InvalidTransactionTimeout}

// txnState is one transactional producer and its transaction: the
// Pipeline's only one, or one slot's; pl.mu guards it.
type txnState struct {
	slot  int
	id    string
	pid   int64 // -1 until InitProducerID answered
	epoch int16
	open  bool // a partition was added since the last commit
	// started is when the open transaction began.
	started time.Time
	// added holds the target partitions added to the open transaction.
	added map[progress.TP]bool
	// committing holds new sends back while a commit waits for the
	// transaction's batches.
	committing bool
	// failed, when set, is why the open transaction must be aborted;
	// unsure, that its commit may have happened.
	failed error
	unsure bool
	// fenced: another producer took the transactional ID; nothing more
	// is written with it.
	fenced error
	// busy: a goroutine initialises or aborts it (restartTxn);
	// adding: one adds partitions to it (addPartitions).
	busy, adding bool
	// released: its slot was handed back.
	released bool
	members  map[*partition]struct{} // assigned partitions whose txn it is
	inflight int                     // batches of its partitions in produce requests
	// coordinator is the transaction coordinator's node ID; -1 unknown.
	// It is read and written without a lock.
	coordinator atomic.Int32

	// commitMu runs commits and aborts one at a time. It guards offSeq,
	// the next sequence of each offsets-topic partition: only commits
	// (writeProgress) and restarts (restartTxn) use it; Fence sets it
	// before t is published.
	commitMu sync.Mutex
	offSeq   map[int32]int32
}

func (t *txnState) live() bool { return t.fenced == nil && !t.released }

func (pl *Pipeline) eos() bool { return pl.cfg.TransactionalID != "" }

// coordinatorRequest sends req to t's transaction coordinator, finding it
// again when it moved, and retries CONCURRENT_TRANSACTIONS (a commit or
// abort still finishing). errOf extracts the response's error code.
func (pl *Pipeline) coordinatorRequest(ctx context.Context, t *txnState, req kmsg.Request, maxV int16, errOf func(kmsg.Response) error) (kmsg.Response, error) {
	var last error
	for try := 0; try < txnRequestTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(coordinatorRetry.Delay(try)):
			}
		}
		coord := t.coordinator.Load()
		if coord < 0 {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorType = 1
			fc.CoordinatorKeys = []string{t.id}
			fc.CoordinatorKey = t.id
			resp, err := fc.RequestWith(ctx, pl.cfg.Target)
			if err == nil {
				coord, err = coordinatorOf(resp)
			}
			if err != nil {
				last = fmt.Errorf("finding the transaction coordinator: %w", err)
				if isKafkaErr(err) && !kerr.IsRetriable(err) {
					return nil, last // e.g. TRANSACTIONAL_ID_AUTHORIZATION_FAILED
				}
				continue
			}
			t.coordinator.Store(coord)
		}
		resp, err := pl.cfg.Target.Broker(int(coord)).Request(ctx, capped{req, maxV})
		if err == nil {
			err = errOf(resp)
		}
		switch {
		case err == nil:
			return resp, nil
		case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable), !isKafkaErr(err):
			t.coordinator.Store(-1)
		case errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions):
		default:
			return resp, err
		}
		last = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, last
}

func isKafkaErr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

func coordinatorOf(r *kmsg.FindCoordinatorResponse) (int32, error) {
	if len(r.Coordinators) > 0 {
		c := r.Coordinators[0]
		return c.NodeID, kerr.ErrorForCode(c.ErrorCode)
	}
	return r.NodeID, kerr.ErrorForCode(r.ErrorCode)
}

// initTransactional gets the producer ID and epoch of t's transactional
// ID. With a producer ID already held, it asks for the next epoch of it:
// that aborts the open transaction, and fails if another producer fenced
// this one.
func (pl *Pipeline) initTransactional(ctx context.Context, t *txnState) (*kmsg.InitProducerIDResponse, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &t.id
	req.TransactionTimeoutMillis = int32(txnTimeout.Milliseconds())
	pl.mu.Lock()
	if t.pid >= 0 {
		req.ProducerID, req.ProducerEpoch = t.pid, t.epoch
	}
	pl.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 2*txnTimeout)
	defer cancel()
	resp, err := pl.coordinatorRequest(rctx, t, req, maxInitPIDTV1, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.InitProducerIDResponse).ErrorCode)
	})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.InitProducerIDResponse), nil
}

// fence gives t up after err, which says another producer took its
// transactional ID: with slots, the slot's partitions stop (until the
// group hands them out again); without, the Pipeline stops for good.
func (pl *Pipeline) fence(t *txnState, err error) {
	err = fmt.Errorf("transactional ID %s: %w: %w", t.id, errFenced, err)
	pl.mu.Lock()
	if t.fenced != nil {
		pl.mu.Unlock()
		return
	}
	t.fenced = err
	stopped := 0
	if pl.slotted() {
		for p := range t.members {
			if !p.revoked && !p.stopped {
				p.stopped, p.lastErr = true, err
				p.gen++
				pl.dropQueueLocked(p, false)
				stopped++
			}
		}
	} else {
		pl.fatal.CompareAndSwap(nil, &err)
	}
	pl.mu.Unlock()
	if m := pl.cfg.Metrics; m != nil {
		m.Fenced.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias).Inc()
	}
	if pl.slotted() {
		pl.cfg.Log.Error("exactly-once: this worker was fenced (another worker owns the transactional ID now); it writes nothing more for these partitions",
			"slot", t.slot, "transactional_id", t.id, "partitions", stopped, "err", err)
	} else {
		pl.cfg.Log.Error("exactly-once: this worker was fenced (another kmirror owns the transactional ID now); it writes nothing more", "transactional_id", t.id)
		pl.cfg.Log.Error("exactly-once: stopping", "err", err)
	}
	pl.wake()
}

// fenceIf is fence if err says t was fenced.
func (pl *Pipeline) fenceIf(t *txnState, err error) {
	if err != nil && kafkaerr.IsAny(err, fencedErrs) {
		pl.fence(t, err)
	}
}

// Fatal returns what stopped a transactional Pipeline for good, if anything.
func (pl *Pipeline) Fatal() error {
	if !pl.eos() {
		return nil
	}
	if err := pl.fatal.Load(); err != nil {
		return *err
	}
	return nil
}

// failTxnLocked marks t's open transaction for abort.
func failTxnLocked(t *txnState, err error) {
	if t.failed == nil {
		t.failed = err
	}
}

// restartsLocked returns the transactions maintain must (re)start: those
// that failed, once nothing of theirs is in flight, and those without a
// producer ID; each is marked busy, with catchUp telling whether its
// progress is read again first.
func (pl *Pipeline) restartsLocked() (ts []*txnState, catchUp []bool) {
	for _, t := range pl.txns {
		if t.busy || t.adding || !t.live() {
			continue
		}
		switch {
		case t.failed != nil && t.inflight == 0 && !t.committing:
			ts, catchUp = append(ts, t), append(catchUp, t.unsure)
		case t.failed == nil && t.pid < 0:
			// The first start reads the progress again: an
			// instance this one fenced may have committed since.
			ts, catchUp = append(ts, t), append(catchUp, true)
		default:
			continue
		}
		t.busy = true
	}
	return ts, catchUp
}

// addPartitions adds to their open transactions the target partitions
// that have batches to send and are not in them yet: one request per
// transaction, in the background, so that a transaction whose last
// commit is still finishing (CONCURRENT_TRANSACTIONS, retried) holds up
// no other.
func (pl *Pipeline) addPartitions(ctx context.Context) {
	type adding struct {
		pid   int64
		epoch int16
		tps   []progress.TP
	}
	pl.mu.Lock()
	byTxn := make(map[*txnState]*adding)
	for p := range pl.sendable {
		t := p.txn
		if t.pid < 0 || t.busy || t.adding || t.committing || t.failed != nil || !t.live() {
			continue
		}
		dst := progress.TP{Topic: p.remote, Partition: p.tp.Partition}
		if p.stopped || p.revoked || len(p.queue) == 0 || t.added[dst] || p.queue[0].state != stUnsent {
			continue
		}
		a := byTxn[t]
		if a == nil {
			a = &adding{pid: t.pid, epoch: t.epoch}
			byTxn[t] = a
		}
		a.tps = append(a.tps, dst)
	}
	for t := range byTxn {
		t.adding = true
	}
	pl.wg.Add(len(byTxn))
	pl.mu.Unlock()
	for t, a := range byTxn {
		go func() {
			defer pl.wg.Done()
			err := pl.addToTxn(ctx, t, a.pid, a.epoch, a.tps)
			pl.mu.Lock()
			t.adding = false
			pl.mu.Unlock()
			pl.wake()
			if err != nil && ctx.Err() == nil {
				pl.cfg.Log.Warn("exactly-once: adding partitions to the transaction failed; retrying", "transactional_id", t.id, "err", err)
			}
		}()
	}
}

// addToTxn sends AddPartitionsToTxn for tps and records those added.
func (pl *Pipeline) addToTxn(ctx context.Context, t *txnState, pid int64, epoch int16, tps []progress.TP) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = t.id, pid, epoch
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var added []progress.TP
	_, err := pl.coordinatorRequest(rctx, t, req, maxAddPartsTV1, func(r kmsg.Response) error {
		added = added[:0]
		var errs []error
		for _, rt := range r.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, p := range rt.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					if !errors.Is(err, kerr.OperationNotAttempted) {
						errs = append(errs, err)
					}
					continue
				}
				added = append(added, progress.TP{Topic: rt.Topic, Partition: p.Partition})
			}
		}
		if len(errs) > 0 {
			return errs[0] // the retriable ones are retried as a whole
		}
		return nil
	})
	pl.mu.Lock()
	if t.pid == pid && t.epoch == epoch {
		for _, tp := range added {
			t.added[tp] = true
		}
		if len(added) > 0 && !t.open {
			started := time.Now()
			t.open, t.started = true, started
			time.AfterFunc(txnCommitAge, func() { pl.txnAged(t, started) })
		}
	}
	pl.mu.Unlock()
	pl.fenceIf(t, err)
	pl.wake()
	return err
}

// txnAged asks the flow for a commit (CommitDue) once the transaction
// of t that began at started is txnCommitAge old and still open: commits
// by record count would end transactions far more often than their cost
// allows, and a transaction must end before the coordinator's timeout.
func (pl *Pipeline) txnAged(t *txnState, started time.Time) {
	pl.mu.Lock()
	due := t.live() && t.open && t.started.Equal(started)
	pl.mu.Unlock()
	if due {
		select {
		case pl.txnDue <- struct{}{}:
		default:
		}
	}
}

// txnSettledLocked reports whether every batch sent in t's open
// transaction has its answer and nothing waits to be sent again.
func (pl *Pipeline) txnSettledLocked(t *txnState) bool {
	if t.inflight > 0 {
		return false
	}
	for p := range t.members {
		if p.stopped || p.revoked {
			continue
		}
		for _, b := range p.queue {
			if b.tried {
				return false
			}
		}
	}
	return true
}

// txnCommit ends the open transactions that only reports true of (all
// with nil), at once, each with the progress of its partitions.
func (pl *Pipeline) txnCommit(ctx context.Context, only func(*txnState) bool) error {
	pl.mu.Lock()
	if err := pl.Fatal(); err != nil {
		pl.mu.Unlock()
		return err
	}
	var ts []*txnState
	for _, t := range pl.txns {
		if t.live() && (only == nil || only(t)) {
			ts = append(ts, t)
		}
	}
	pl.mu.Unlock()
	pl.CommitStarted()
	if len(ts) == 1 {
		return pl.commitTxn(ctx, ts[0])
	}
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pl.commitTxn(ctx, t)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// commitTxn ends t's open transaction: it waits for its batches, writes
// the progress that covers them in it and commits it. Once it writes the
// progress it goes on for up to commitGrace after ctx ends: cut short
// there, the transaction would have to be aborted.
func (pl *Pipeline) commitTxn(ctx context.Context, t *txnState) error {
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	pl.mu.Lock()
	if !t.live() {
		pl.mu.Unlock()
		return pl.Fatal() // a fenced slot was reported when it was fenced
	}
	if t.pid < 0 {
		pl.mu.Unlock()
		return nil // not started: nothing was sent in it
	}
	if !t.open && t.inflight == 0 {
		// Nothing sent since the last commit: an idle slot ends here,
		// without holding sends back and waking the request loop.
		pos := pl.txnPositionsLocked(t)
		pl.mu.Unlock()
		if len(pl.progressRecords(pos)) == 0 {
			return pl.flushSyncs(ctx, pos)
		}
		pl.mu.Lock()
	}
	t.committing = true
	pl.mu.Unlock()
	defer func() {
		pl.mu.Lock()
		t.committing = false
		pl.mu.Unlock()
		pl.wake()
	}()
	pl.wake()
	s, err := pl.settleTxn(ctx, t)
	if err != nil {
		return err
	}
	recs := pl.progressRecords(s.pos)
	if len(recs) == 0 && !s.open {
		return pl.flushSyncs(ctx, s.pos)
	}
	return pl.endTxn(ctx, t, s, recs)
}

// settled is what a commit takes from its transaction once every batch
// has its answer: the producer, whether anything was sent in it, and
// the positions of its partitions.
type settled struct {
	pid   int64
	epoch int16
	open  bool
	pos   map[progress.TP]int64
}

// settleTxn waits (up to commitWait) until every batch sent in t's open
// transaction has its answer, and returns what the commit needs. An
// error means there is nothing to commit: the caller gave up, t was
// fenced, or the transaction failed (a batch on the target beyond its
// partition's progress fails it here) and is to be aborted.
func (pl *Pipeline) settleTxn(ctx context.Context, t *txnState) (settled, error) {
	wctx, cancel := context.WithTimeout(ctx, commitWait)
	err := datapath.WaitIdle(wctx, func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return pl.txnSettledLocked(t) || t.failed != nil || t.fenced != nil
	})
	cancel()
	if err != nil && ctx.Err() != nil {
		// The caller gave up (a commit loop stopping while Run's last
		// commit comes): the transaction stays open for the next commit.
		return settled{}, fmt.Errorf("exactly-once: commit: %w", ctx.Err())
	}
	pl.mu.Lock()
	if err != nil {
		failTxnLocked(t, fmt.Errorf("waiting for the transaction's batches: %w", err))
	}
	// A batch on the target beyond a partition's progress (acknowledged
	// after one that was not, or of a partition stopped or revoked
	// meanwhile) cannot be committed without being copied again.
	for p := range t.members {
		for _, b := range p.queue {
			if b.tried || b.state != stUnsent {
				failTxnLocked(t, fmt.Errorf("partition %s has batches on the target beyond its progress", p.tp))
			}
		}
	}
	if t.fenced != nil {
		pl.mu.Unlock()
		return settled{}, pl.Fatal()
	}
	if t.failed != nil {
		pl.mu.Unlock()
		return settled{}, fmt.Errorf("exactly-once: the transaction is aborted: %w", t.failed)
	}
	s := settled{pid: t.pid, epoch: t.epoch, open: t.open, pos: pl.txnPositionsLocked(t)}
	pl.mu.Unlock()
	return s, nil
}

// endTxn writes recs, the progress at s.pos, in t's transaction and
// commits it, then marks the progress saved and sends the held offset
// syncs. It goes on for up to commitGrace after ctx ends: cut short,
// the transaction would have to be aborted.
func (pl *Pipeline) endTxn(ctx context.Context, t *txnState, s settled, recs []*kgo.Record) error {
	pid, epoch, pos := s.pid, s.epoch, s.pos
	fctx, fcancel := finishing(ctx, commitGrace)
	defer fcancel()
	// From the progress written in the transaction until it is Saved, a
	// repair of the progress topic must not rewrite the older progress
	// held in memory over it.
	done := pl.cfg.Progress.Writing()
	defer done()
	if err := pl.writeProgress(fctx, t, pid, epoch, recs); err != nil {
		return pl.commitFailed(t, fmt.Errorf("exactly-once: writing progress in the transaction: %w", err), false)
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.id, pid, epoch, true
	rctx, rcancel := context.WithTimeout(fctx, txnTimeout)
	_, err := pl.coordinatorRequest(rctx, t, req, maxEndTxnTV1, endTxnErr)
	rcancel()
	if err != nil {
		// The outcome is unknown: the abort (a new epoch) settles it,
		// and the progress is read again.
		return pl.commitFailed(t, fmt.Errorf("exactly-once: committing the transaction: %w", err), true)
	}
	pl.mu.Lock()
	t.open = false
	clear(t.added)
	pl.mu.Unlock()
	pl.cfg.Progress.Saved(pos)
	return pl.flushSyncs(fctx, pos)
}

// txnPositionsLocked returns the positions of t's partitions.
func (pl *Pipeline) txnPositionsLocked(t *txnState) map[progress.TP]int64 {
	pos := make(map[progress.TP]int64, len(t.members))
	for p := range t.members {
		if off, ok := p.Position(); ok {
			pos[p.tp] = off
		}
	}
	return pos
}

// progressRecords returns the progress records of the positions that
// differ from the saved ones.
func (pl *Pipeline) progressRecords(pos map[progress.TP]int64) []*kgo.Record {
	var recs []*kgo.Record
	for tp, off := range pos {
		if old, ok := pl.cfg.Progress.Get(tp); !ok || old != off {
			recs = append(recs, pl.cfg.Progress.Record(tp, off))
		}
	}
	return recs
}

// commitFailed marks t's transaction for abort after err, a failed step
// of its commit (unsure: the commit may have happened), and returns err;
// if err says t was fenced, it stops t's partitions, which reports it.
func (pl *Pipeline) commitFailed(t *txnState, err error, unsure bool) error {
	pl.mu.Lock()
	failTxnLocked(t, err)
	t.unsure = t.unsure || unsure
	pl.mu.Unlock()
	if kafkaerr.IsAny(err, fencedErrs) {
		pl.fence(t, err)
		return pl.Fatal()
	}
	return err
}

// finishing returns a context for work that must not be cut short when
// ctx is cancelled: it ends at ctx's deadline, or grace after ctx ends.
func finishing(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	base, stopDeadline := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		base, stopDeadline = context.WithDeadline(base, dl)
	}
	f, cancel := context.WithCancel(base)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return f, func() { stop(); cancel(); stopDeadline() }
}

// flushSyncs publishes the offset syncs held back for the partitions of
// pos, those of a committed transaction: with slots, another slot's may
// still be aborted.
func (pl *Pipeline) flushSyncs(ctx context.Context, pos map[progress.TP]int64) error {
	if pl.cfg.Syncs == nil {
		return nil
	}
	if !pl.slotted() {
		return pl.cfg.Syncs.Flush(ctx)
	}
	return pl.cfg.Syncs.FlushOnly(ctx, func(topic string, partition int32) bool {
		_, ok := pos[progress.TP{Topic: topic, Partition: partition}]
		return ok
	})
}

// writeProgress writes recs, progress records of the offsets topic, as
// transactional batches of t's open transaction, one per partition.
func (pl *Pipeline) writeProgress(ctx context.Context, t *txnState, pid int64, epoch int16, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	topic := recs[0].Topic
	byPart := map[int32][]*kgo.Record{}
	var tps []progress.TP
	now := time.Now()
	for _, r := range recs {
		r.Timestamp = now // as a producer stamps them
		if _, ok := byPart[r.Partition]; !ok {
			tps = append(tps, progress.TP{Topic: topic, Partition: r.Partition})
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	pl.mu.Lock()
	tps = slices.DeleteFunc(tps, func(tp progress.TP) bool { return t.added[tp] })
	pl.mu.Unlock()
	if len(tps) > 0 {
		if err := pl.addToTxn(ctx, t, pid, epoch, tps); err != nil {
			return err
		}
	}
	for try := 0; ; try++ {
		meta, err := pl.tadm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td, ok := meta.Topics[topic]
		if !ok || td.Err != nil {
			err := td.Err
			if err == nil {
				err = kerr.UnknownTopicOrPartition
			}
			// Wrapped: a deleted offsets topic is made again
			// (kafkaerr.TopicGone).
			return fmt.Errorf("metadata of %s: %w", topic, err)
		}
		var errs []error
		for part, rs := range byPart {
			if err := pl.produceProgress(ctx, t, td, part, rs, pid, epoch); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(byPart, part)
		}
		err = errors.Join(errs...)
		if err == nil || try >= 10 || ctx.Err() != nil || kafkaerr.IsAny(err, pidErrs) || kafkaerr.Classify(err) == kafkaerr.Fatal {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// produceProgress writes the progress records rs to one partition of the
// offsets topic in t's open transaction. A resend has the same sequence.
func (pl *Pipeline) produceProgress(ctx context.Context, t *txnState, td kadm.TopicDetail, part int32, rs []*kgo.Record, pid int64, epoch int16) error {
	d, ok := td.Partitions[part]
	if !ok || d.Leader < 0 {
		return fmt.Errorf("no leader for %s-%d", td.Topic, part)
	}
	raw, err := pl.enc.batch(rs, kgo.CodecNone)
	if err != nil {
		return err
	}
	seq := t.offSeq[part] // under commitMu
	if err := stamp(raw, pid, epoch, seq, true); err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	req.TransactionID = &t.id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = td.Topic, td.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	resp, err := pl.cfg.Target.Broker(int(d.Leader)).Request(rctx, capped{req, maxProduceTV1})
	if err != nil {
		return err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return errors.New("progress partition missing from the produce response")
	}
	if err := kerr.ErrorForCode(pr.Topics[0].Partitions[0].ErrorCode); err != nil && !errors.Is(err, kerr.DuplicateSequenceNumber) {
		return err
	}
	t.offSeq[part] = addSeq(seq, int32(len(rs)))
	return nil
}

// restartTxn aborts t's failed transaction, gets a new epoch of t's
// producer (or its first, which fences an older instance), and sends t's
// partitions back to their committed progress, read again first with
// catchUp. It runs in a
// goroutine of its own, started by maintain, which marked t busy.
func (pl *Pipeline) restartTxn(ctx context.Context, t *txnState, catchUp bool) {
	defer pl.wg.Done()
	defer func() {
		pl.mu.Lock()
		t.busy = false
		pl.mu.Unlock()
		pl.wake()
	}()
	if !t.commitMu.TryLock() {
		return // a commit is under way; it reports the failure first
	}
	defer t.commitMu.Unlock()
	pl.mu.Lock()
	cause := t.failed
	pl.mu.Unlock()
	if cause != nil {
		pl.cfg.Log.Warn("exactly-once: aborting the transaction; partitions go back to their committed progress", "transactional_id", t.id, "err", cause)
		if err := pl.abortOpen(ctx, t); err != nil {
			pl.retryLater(ctx, t, "cannot abort the transaction", err)
			return
		}
	}
	// A new epoch starts every sequence at 0 again.
	resp, err := pl.initTransactional(ctx, t)
	if err != nil {
		pl.fenceIf(t, err)
		pl.retryLater(ctx, t, "cannot get a new producer epoch", err)
		return
	}
	if catchUp {
		// With slots, progress another slot committed behind a
		// transaction still open is read too.
		read := pl.cfg.Progress.CatchUp
		if pl.slotted() {
			read = pl.cfg.Progress.CatchUpStable
		}
		if err := read(ctx); err != nil {
			pl.cfg.Log.Warn("exactly-once: reading committed progress failed; retrying", "err", err)
			pl.mu.Lock()
			// The new epoch aborted the transaction: only the
			// progress is to read again.
			pl.newTxnProducerLocked(t, resp.ProducerID, resp.ProducerEpoch)
			failTxnLocked(t, fmt.Errorf("reading committed progress: %w", err))
			t.unsure = true
			pl.mu.Unlock()
			return
		}
	}
	pl.mu.Lock()
	pl.newTxnProducerLocked(t, resp.ProducerID, resp.ProducerEpoch)
	t.failed, t.unsure = nil, false
	tps := pl.rewindTxnLocked(t)
	pl.mu.Unlock()
	// Offset syncs held back for the aborted batches point at offsets
	// no read_committed reader sees.
	pl.Forget(tps)
	pl.cfg.Log.Info("exactly-once passthrough: transactional producer ready", "transactional_id", t.id, "producer_id", resp.ProducerID, "epoch", resp.ProducerEpoch)
}

// rewindTxnLocked sends t's partitions back to their committed progress
// after an abort: Done goes back (a revoked partition's too), queued
// batches are dropped and fetching starts again after the progress. It
// returns the partitions not revoked, whose held offset syncs are to be
// forgotten.
func (pl *Pipeline) rewindTxnLocked(t *txnState) []progress.TP {
	var tps []progress.TP
	for p := range t.members {
		saved, ok := pl.cfg.Progress.Get(p.tp)
		if !ok {
			saved = -1
		}
		// The abort took the batches acknowledged in the transaction:
		// a revoked partition's progress goes back too, or the
		// revocation's final commit would save it ahead of the data.
		p.Done = saved
		if p.revoked {
			continue
		}
		tps = append(tps, p.tp)
		if p.stopped {
			continue
		}
		pl.dropQueueLocked(p, false)
		p.gen++
		p.blocked, p.renumber, p.retries = false, false, 0
		if saved >= 0 {
			p.next = saved + 1
		} else {
			p.next = p.base
		}
		pl.touchLocked(p)
		if p.next < 0 {
			pl.unresolved[p] = struct{}{}
		}
	}
	return tps
}

// abortOpen aborts t's open transaction with EndTxn. A producer that
// another one fenced learns it here (PRODUCER_FENCED) without harm to the
// new owner, which an InitProducerID with the old epoch would do: the
// coordinator aborts the transaction under way on the ID before it checks
// that epoch. INVALID_TXN_STATE means there was nothing to abort (none
// open, or its commit went through).
func (pl *Pipeline) abortOpen(ctx context.Context, t *txnState) error {
	pl.mu.Lock()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.id, t.pid, t.epoch, false
	pl.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, txnTimeout)
	defer cancel()
	_, err := pl.coordinatorRequest(rctx, t, req, maxEndTxnTV1, endTxnErr)
	switch {
	case errors.Is(err, kerr.InvalidTxnState):
		return nil
	case errors.Is(err, kerr.InvalidProducerIDMapping):
		// The ID has another producer ID now: a new owner's.
		pl.fence(t, err)
	default:
		pl.fenceIf(t, err)
	}
	return err
}

func endTxnErr(r kmsg.Response) error { return kerr.ErrorForCode(r.(*kmsg.EndTxnResponse).ErrorCode) }

// retryLater logs why restartTxn must try t again, unless t was fenced
// or the Pipeline stops.
func (pl *Pipeline) retryLater(ctx context.Context, t *txnState, what string, err error) {
	pl.mu.Lock()
	live := t.live()
	pl.mu.Unlock()
	if ctx.Err() == nil && live {
		pl.cfg.Log.Warn("exactly-once: "+what+"; retrying", "transactional_id", t.id, "err", err)
	}
}

// newTxnProducerLocked starts t's producer ID pid at epoch: the
// sequences of t's partitions start at 0 and none is in a transaction.
func (pl *Pipeline) newTxnProducerLocked(t *txnState, pid int64, epoch int16) {
	t.pid, t.epoch = pid, epoch
	pl.stats.pids++
	for p := range t.members {
		p.resetSeqLocked()
	}
	clear(t.added)
	clear(t.offSeq)
	t.open = false
}

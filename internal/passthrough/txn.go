package passthrough

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
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
// The transaction requests go to the transaction coordinator as kmsg
// requests capped at the versions of transaction protocol version 1
// (explicit AddPartitionsToTxn, no epoch bump at EndTxn), which every
// Kafka broker since 0.11 serves.
//
// A failed transaction (a batch the target lost, an unknown commit
// outcome) is aborted by InitProducerID with the current producer ID and
// epoch (KIP-360), which bumps the epoch; every partition then goes back
// to its committed progress. If the coordinator answers that another
// producer took the transactional ID, the Pipeline stops for good.

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
)

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

// txnState is the transaction of a transactional Pipeline; pl.mu guards it.
type txnState struct {
	id      string
	open    bool // a partition was added since the last commit
	started time.Time
	// added holds the target partitions added to the open transaction.
	added map[progress.TP]bool
	// committing holds new sends back while Commit waits for the
	// transaction's batches.
	committing bool
	// failed, when set, is why the open transaction must be aborted;
	// unsure, that its commit may have happened.
	failed error
	unsure bool
	// fatal stops the Pipeline for good.
	fatal error
	// offSeq is the next sequence of each offsets-topic partition.
	offSeq map[int32]int32
	// coordinator is the transaction coordinator's node ID; -1 unknown.
	coordinator int32
}

func (pl *Pipeline) eos() bool { return pl.txn != nil }

// coordinatorRequest sends req to the transaction coordinator, finding it
// again when it moved, and retries CONCURRENT_TRANSACTIONS (a commit or
// abort still finishing). errOf extracts the response's error code.
func (pl *Pipeline) coordinatorRequest(ctx context.Context, req kmsg.Request, maxV int16, errOf func(kmsg.Response) error) (kmsg.Response, error) {
	var last error
	for try := 0; try < txnRequestTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(min(time.Duration(try)*20*time.Millisecond, 500*time.Millisecond)):
			}
		}
		pl.mu.Lock()
		coord := pl.txn.coordinator
		pl.mu.Unlock()
		if coord < 0 {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorType = 1
			fc.CoordinatorKeys = []string{pl.txn.id}
			fc.CoordinatorKey = pl.txn.id
			resp, err := fc.RequestWith(ctx, pl.cfg.Target)
			if err == nil {
				coord, err = coordinatorOf(resp)
			}
			if err != nil {
				last = fmt.Errorf("finding the transaction coordinator: %w", err)
				continue
			}
			pl.mu.Lock()
			pl.txn.coordinator = coord
			pl.mu.Unlock()
		}
		resp, err := pl.cfg.Target.Broker(int(coord)).Request(ctx, capped{req, maxV})
		if err == nil {
			err = errOf(resp)
		}
		switch {
		case err == nil:
			return resp, nil
		case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable), !isKafkaErr(err):
			pl.mu.Lock()
			pl.txn.coordinator = -1
			pl.mu.Unlock()
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

// initTransactional gets the producer ID and epoch of the transactional ID.
// With a producer ID already held, it asks for the next epoch of it: that
// aborts the open transaction, and fails if another producer fenced this
// one.
func (pl *Pipeline) initTransactional(ctx context.Context) (*kmsg.InitProducerIDResponse, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &pl.txn.id
	req.TransactionTimeoutMillis = int32(txnTimeout.Milliseconds())
	pl.mu.Lock()
	if pl.pid >= 0 {
		req.ProducerID, req.ProducerEpoch = pl.pid, pl.epoch
	}
	pl.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 2*txnTimeout)
	defer cancel()
	resp, err := pl.coordinatorRequest(rctx, req, maxInitPIDTV1, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.InitProducerIDResponse).ErrorCode)
	})
	if err != nil {
		if datapath.IsAny(err, fencedErrs) {
			pl.setFatal(fmt.Errorf("transactional ID %s: %w: %w", pl.txn.id, errFenced, err))
		}
		return nil, err
	}
	return resp.(*kmsg.InitProducerIDResponse), nil
}

// setFatal stops the Pipeline for good.
func (pl *Pipeline) setFatal(err error) {
	pl.mu.Lock()
	if pl.txn.fatal == nil {
		pl.txn.fatal = err
		if errors.Is(err, errFenced) {
			if m := pl.cfg.Metrics; m != nil {
				m.Fenced.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias).Inc()
			}
			pl.cfg.Log.Error("exactly-once: this worker was fenced (another kmirror owns the transactional ID now); it writes nothing more", "transactional_id", pl.txn.id)
		}
		pl.cfg.Log.Error("exactly-once: stopping", "err", err)
	}
	pl.mu.Unlock()
	pl.wake()
}

// Fatal returns what stopped a transactional Pipeline for good, if anything.
func (pl *Pipeline) Fatal() error {
	if !pl.eos() {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.txn.fatal
}

// failTxnLocked marks the open transaction for abort.
func (pl *Pipeline) failTxnLocked(err error) {
	if pl.txn.failed == nil {
		pl.txn.failed = err
	}
}

// addPartitions adds to the open transaction the target partitions that
// have batches to send and are not in it yet.
func (pl *Pipeline) addPartitions(ctx context.Context) {
	pl.mu.Lock()
	if pl.pid < 0 || pl.needPID || pl.txn.committing || pl.txn.failed != nil || pl.txn.fatal != nil {
		pl.mu.Unlock()
		return
	}
	var tps []progress.TP
	for p := range pl.sendable {
		dst := progress.TP{Topic: p.remote, Partition: p.tp.Partition}
		if p.stopped || p.revoked || len(p.queue) == 0 || pl.txn.added[dst] || p.queue[0].state != stUnsent {
			continue
		}
		tps = append(tps, dst)
	}
	pid, epoch := pl.pid, pl.epoch
	pl.mu.Unlock()
	if len(tps) == 0 {
		return
	}
	if err := pl.addToTxn(ctx, pid, epoch, tps); err != nil && ctx.Err() == nil {
		pl.cfg.Log.Warn("exactly-once: adding partitions to the transaction failed; retrying", "err", err)
	}
}

// addToTxn sends AddPartitionsToTxn for tps and records those added.
func (pl *Pipeline) addToTxn(ctx context.Context, pid int64, epoch int16, tps []progress.TP) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = pl.txn.id, pid, epoch
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewAddPartitionsToTxnRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var added []progress.TP
	_, err := pl.coordinatorRequest(rctx, req, maxAddPartsTV1, func(r kmsg.Response) error {
		added = added[:0]
		var errs []error
		for _, t := range r.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					if !errors.Is(err, kerr.OperationNotAttempted) {
						errs = append(errs, err)
					}
					continue
				}
				added = append(added, progress.TP{Topic: t.Topic, Partition: p.Partition})
			}
		}
		if len(errs) > 0 {
			return errs[0] // the retriable ones are retried as a whole
		}
		return nil
	})
	pl.mu.Lock()
	if pl.pid == pid && pl.epoch == epoch {
		for _, tp := range added {
			pl.txn.added[tp] = true
		}
		if len(added) > 0 && !pl.txn.open {
			pl.txn.open, pl.txn.started = true, time.Now()
		}
	}
	pl.mu.Unlock()
	if err != nil && datapath.IsAny(err, fencedErrs) {
		pl.setFatal(fmt.Errorf("transactional ID %s: %w: %w", pl.txn.id, errFenced, err))
	}
	pl.wake()
	return err
}

// txnAckedSinceCommit asks the flow for a commit once the open
// transaction is txnCommitAge old: commits by record count would end
// transactions far more often than their cost allows, and the
// transaction must end before the coordinator's timeout.
func (pl *Pipeline) txnAckedSinceCommit() int64 {
	pl.mu.Lock()
	old := pl.txn.open && time.Since(pl.txn.started) >= txnCommitAge
	pl.mu.Unlock()
	if old {
		return 1 << 40
	}
	return 0
}

// txnSettledLocked reports whether every batch sent in the open
// transaction has its answer and nothing waits to be sent again.
func (pl *Pipeline) txnSettledLocked() bool {
	if pl.produceIn > 0 {
		return false
	}
	for p := range pl.sendable {
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

// txnCommit ends the open transaction: it waits for its batches, writes
// the progress that covers them in it and commits it.
func (pl *Pipeline) txnCommit(ctx context.Context) error {
	pl.commitMu.Lock()
	defer pl.commitMu.Unlock()
	pl.mu.Lock()
	if err := pl.txn.fatal; err != nil {
		pl.mu.Unlock()
		return err
	}
	pl.txn.committing = true
	pl.mu.Unlock()
	defer func() {
		pl.mu.Lock()
		pl.txn.committing = false
		pl.mu.Unlock()
		pl.wake()
	}()
	pl.wake()
	wctx, cancel := context.WithTimeout(ctx, commitWait)
	err := datapath.WaitIdle(wctx, func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return pl.txnSettledLocked() || pl.txn.failed != nil || pl.txn.fatal != nil
	})
	cancel()
	if err != nil && ctx.Err() != nil {
		// The caller gave up (a commit loop stopping while Run's last
		// commit comes): the transaction stays open for the next commit.
		return fmt.Errorf("exactly-once: commit: %w", ctx.Err())
	}
	pl.mu.Lock()
	if err != nil {
		pl.failTxnLocked(fmt.Errorf("waiting for the transaction's batches: %w", err))
	}
	// A batch on the target beyond a partition's progress (acknowledged
	// after one that was not, or of a partition stopped or revoked
	// meanwhile) cannot be committed without being copied again.
	for p := range pl.sendable {
		for _, b := range p.queue {
			if b.tried || b.state != stUnsent {
				pl.failTxnLocked(fmt.Errorf("partition %s has batches on the target beyond its progress", p.tp))
			}
		}
	}
	if err := errors.Join(pl.txn.fatal, pl.txn.failed); err != nil {
		pl.mu.Unlock()
		return fmt.Errorf("exactly-once: the transaction is aborted: %w", err)
	}
	pid, epoch, open := pl.pid, pl.epoch, pl.txn.open
	pl.mu.Unlock()

	pos := pl.Positions()
	var recs []*kgo.Record
	for tp, off := range pos {
		if old, ok := pl.cfg.Progress.Get(tp); !ok || old != off {
			recs = append(recs, pl.cfg.Progress.Record(tp, off))
		}
	}
	pl.CommitStarted()
	if len(recs) == 0 && !open {
		return pl.flushSyncs(ctx)
	}
	if err := pl.writeProgress(ctx, pid, epoch, recs); err != nil {
		pl.mu.Lock()
		pl.failTxnLocked(err)
		pl.mu.Unlock()
		return fmt.Errorf("exactly-once: writing progress in the transaction: %w", err)
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = pl.txn.id, pid, epoch, true
	rctx, rcancel := context.WithTimeout(ctx, txnTimeout)
	_, err = pl.coordinatorRequest(rctx, req, maxEndTxnTV1, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.EndTxnResponse).ErrorCode)
	})
	rcancel()
	pl.mu.Lock()
	if err != nil {
		// The outcome is unknown: the abort (a new epoch) settles it,
		// and the progress is read again.
		pl.failTxnLocked(err)
		pl.txn.unsure = true
		pl.mu.Unlock()
		if datapath.IsAny(err, fencedErrs) {
			pl.setFatal(fmt.Errorf("transactional ID %s: %w: %w", pl.txn.id, errFenced, err))
		}
		return fmt.Errorf("exactly-once: committing the transaction: %w", err)
	}
	pl.txn.open = false
	clear(pl.txn.added)
	pl.mu.Unlock()
	pl.cfg.Progress.Saved(pos)
	return pl.flushSyncs(ctx)
}

func (pl *Pipeline) flushSyncs(ctx context.Context) error {
	if pl.cfg.Syncs != nil {
		return pl.cfg.Syncs.Flush(ctx)
	}
	return nil
}

// writeProgress writes recs, progress records of the offsets topic, as
// transactional batches of the open transaction, one per partition.
func (pl *Pipeline) writeProgress(ctx context.Context, pid int64, epoch int16, recs []*kgo.Record) error {
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
	tps = slices.DeleteFunc(tps, func(tp progress.TP) bool { return pl.txn.added[tp] })
	pl.mu.Unlock()
	if len(tps) > 0 {
		if err := pl.addToTxn(ctx, pid, epoch, tps); err != nil {
			return err
		}
	}
	for try := 0; ; try++ {
		meta, err := pl.tadm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		t, ok := meta.Topics[topic]
		if !ok || t.Err != nil {
			return fmt.Errorf("metadata of %s: %v", topic, t.Err)
		}
		var errs []error
		for part, rs := range byPart {
			if err := pl.produceProgress(ctx, t, part, rs, pid, epoch); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(byPart, part)
		}
		err = errors.Join(errs...)
		if err == nil || try >= 10 || ctx.Err() != nil || datapath.IsAny(err, pidErrs) || datapath.Classify(err) == datapath.Fatal {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produceProgress writes the progress records rs to one partition of the
// offsets topic in the open transaction. A resend has the same sequence.
func (pl *Pipeline) produceProgress(ctx context.Context, t kadm.TopicDetail, part int32, rs []*kgo.Record, pid int64, epoch int16) error {
	d, ok := t.Partitions[part]
	if !ok || d.Leader < 0 {
		return fmt.Errorf("no leader for %s-%d", t.Topic, part)
	}
	raw, err := pl.enc.batch(rs, kgo.CodecNone)
	if err != nil {
		return err
	}
	pl.mu.Lock()
	seq := pl.txn.offSeq[part]
	pl.mu.Unlock()
	if err := stamp(raw, pid, epoch, seq, true); err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	req.TransactionID = &pl.txn.id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = t.Topic, t.ID
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
	pl.mu.Lock()
	pl.txn.offSeq[part] = addSeq(seq, int32(len(rs)))
	pl.mu.Unlock()
	return nil
}

// abortTxn aborts the failed transaction by bumping the producer's epoch,
// and sends every partition back to its committed progress. It runs in
// the request loop once nothing is in flight.
func (pl *Pipeline) abortTxn(ctx context.Context) {
	if !pl.commitMu.TryLock() {
		return // a commit is under way; it reports the failure first
	}
	defer pl.commitMu.Unlock()
	pl.mu.Lock()
	cause, unsure := pl.txn.failed, pl.txn.unsure
	pl.mu.Unlock()
	pl.cfg.Log.Warn("exactly-once: aborting the transaction; partitions go back to their committed progress", "err", cause)
	// If the commit may have happened, its progress is on the target.
	pl.startTxnProducer(ctx, unsure)
}

// startTxnProducer gets a new epoch of the transactional producer and
// sends every partition back to its committed progress, read again first
// with catchUp. The first start reads it again too: an instance this one
// fenced may have committed since the progress was read.
func (pl *Pipeline) startTxnProducer(ctx context.Context, catchUp bool) bool {
	resp, err := pl.initTransactional(ctx)
	if err != nil {
		if ctx.Err() == nil && pl.Fatal() == nil {
			pl.cfg.Log.Warn("exactly-once: cannot get a new producer epoch; retrying", "err", err)
		}
		return false
	}
	if catchUp {
		if err := pl.cfg.Progress.CatchUp(ctx); err != nil {
			pl.cfg.Log.Warn("exactly-once: reading committed progress failed; retrying", "err", err)
			return false
		}
	}
	pl.mu.Lock()
	pl.newProducerLocked(resp.ProducerID, resp.ProducerEpoch)
	pl.txn.failed, pl.txn.unsure = nil, false
	var tps []progress.TP
	for _, p := range pl.parts {
		if p.revoked {
			continue
		}
		tps = append(tps, p.tp)
		saved, ok := pl.cfg.Progress.Get(p.tp)
		if !ok {
			saved = -1
		}
		p.Done = saved
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
	pl.mu.Unlock()
	// Offset syncs held back for the aborted batches point at offsets
	// no read_committed reader sees.
	pl.Forget(tps)
	pl.cfg.Log.Info("exactly-once passthrough: transactional producer ready", "transactional_id", pl.txn.id, "producer_id", resp.ProducerID, "epoch", resp.ProducerEpoch)
	return true
}

// newProducerLocked starts producer ID pid at epoch: every sequence starts
// at 0 and no partition is in a transaction.
func (pl *Pipeline) newProducerLocked(pid int64, epoch int16) {
	pl.pid, pl.epoch, pl.needPID = pid, epoch, false
	pl.stats.pids++
	for _, p := range pl.parts {
		p.seq, p.renumber = 0, false
		for _, b := range p.queue {
			if b.state != stAcked {
				b.seqSet = false
			}
		}
	}
	if pl.eos() {
		clear(pl.txn.added)
		clear(pl.txn.offSeq)
		pl.txn.open = false
	}
}

// txnRevoke is Revoke in exactly-once mode: the partitions stop sending,
// their batches in flight answer, and the transaction with their final
// progress commits before they are forgotten.
func (pl *Pipeline) txnRevoke(ctx context.Context, tps []progress.TP) error {
	v := revoker{pl}
	mine := v.MarkRevoked(tps)
	defer func() {
		pl.Forget(mine)
		v.Delete(mine)
	}()
	for _, tp := range mine {
		if err := datapath.WaitIdle(ctx, func() bool { return v.InFlight(tp) == 0 }); err != nil {
			return err
		}
	}
	return pl.txnCommit(ctx)
}

// AckedSinceCommit returns how many records the target acknowledged since
// the last Commit began; in exactly-once mode, see txnAckedSinceCommit.
func (pl *Pipeline) AckedSinceCommit() int64 {
	if pl.eos() {
		return pl.txnAckedSinceCommit()
	}
	return pl.Core.AckedSinceCommit()
}

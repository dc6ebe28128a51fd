package replicate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/slots"
)

// Exactly-once mode. The target producer is transactional: the records
// copied since the last commit and the progress that says they are copied
// go to the target in one transaction. A reader of the target with
// isolation.level=read_committed then sees every source record once, across
// crashes: a transaction cut short by a crash is aborted when the next
// kmirror with the same transactional ID starts, and replication resumes
// after the last committed progress.
//
// One worker has one transactional producer (Config.Target). Several
// workers sharing a flow (group mode) have one per slot of partitions
// (internal/slots, Config.SlotProducer): a worker given a slot first
// initialises the slot's producer, which fences the slot's previous owner,
// and only then reads the slot's progress (Fence). A fenced worker drops
// the slot's partitions and writes nothing more for them.
//
// Transactions are driven by the poll loop: Commit asks the loop to end
// them at the next opportunity and waits for the outcome.

// txn is a transactional producer and its transaction.
type txn struct {
	slot int
	cl   *kgo.Client
	own  bool // made by SlotProducer: closed when its slot is handed back
	open bool // a transaction is open; poll loop only
	// fenced: another producer with the same transactional ID started, so
	// the slot belongs to another worker now. Guarded by Replicator.mu.
	fenced bool
}

// commitRequest asks the poll loop for a commit.
type commitRequest chan error

// eosCommit is Commit in exactly-once mode.
func (r *Replicator) eosCommit(ctx context.Context) error {
	req := make(commitRequest, 1)
	select {
	case r.commits <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopped:
		return nil // Run committed before it returned
	}
	r.wakePoll()
	select {
	case err := <-req:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopped:
		return nil
	}
}

func (r *Replicator) wakePoll() {
	r.mu.Lock()
	wake := r.wake
	r.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// slotOf is the slot of tp: 0 with one transactional producer.
func (r *Replicator) slotOf(tp progress.TP) int {
	if r.cfg.SlotProducer == nil {
		return 0
	}
	return slots.Of(tp.Topic, tp.Partition, r.cfg.Slots)
}

// Fence is datapath.Fencer: before the progress of newly assigned
// partitions is read, this worker initialises the transactional producer of
// each of their slots. Kafka then bumps the producer epoch of the slot's
// transactional ID and aborts (or completes) the transaction the previous
// owner left open, so nothing the previous owner still sends can commit.
// Without slots (one worker), it does nothing. It returns the partitions
// whose slot could not be taken, with the reason.
func (r *Replicator) Fence(ctx context.Context, tps []progress.TP) map[progress.TP]error {
	if !r.cfg.Transactional || r.cfg.SlotProducer == nil {
		return nil
	}
	failed := make(map[progress.TP]error)
	errs := make(map[int]error)
	done := make(map[int]bool)
	for _, tp := range tps {
		s := r.slotOf(tp)
		if done[s] {
			if err := errs[s]; err != nil {
				failed[tp] = err
			}
			continue
		}
		done[s] = true
		r.mu.Lock()
		t := r.txns[s]
		r.mu.Unlock()
		if t != nil && !t.fenced {
			continue // still ours
		}
		cl, err := r.cfg.SlotProducer(s)
		if err == nil {
			_, _, err = cl.ProducerID(ctx)
			if err != nil {
				cl.Close()
			}
		}
		if err != nil {
			errs[s] = fmt.Errorf("taking exactly-once slot %d: %w", s, err)
			failed[tp] = errs[s]
			continue
		}
		r.mu.Lock()
		r.txns[s] = &txn{slot: s, cl: cl, own: true}
		r.mu.Unlock()
		if t != nil {
			t.cl.Close() // fenced: another worker had the slot meanwhile
		}
		r.cfg.Log.Info("exactly-once: slot taken; its previous owner is fenced", "slot", s)
	}
	return failed
}

// beginFor opens p's transaction unless it is open. It reports false when
// p's slot is fenced: p's records are not sent.
func (r *Replicator) beginFor(p *partition) bool {
	t := p.txn
	r.mu.Lock()
	fenced := t.fenced
	r.mu.Unlock()
	if fenced {
		return false
	}
	if t.open {
		return true
	}
	if err := t.cl.BeginTransaction(); err != nil {
		r.fence(t, fmt.Errorf("beginning a transaction on the target: %w", err))
		return false
	}
	t.open = true
	return true
}

// isFenced reports whether err means another producer took the
// transactional ID over.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kgo.ErrClientClosed)
}

// fence gives t up after err: with slots, the slot's partitions are dropped
// until the group hands them out again; with one producer, Run ends.
func (r *Replicator) fence(t *txn, err error) {
	t.open = false
	r.mu.Lock()
	t.fenced = true
	if !t.own && r.fatal == nil {
		r.fatal = err
	}
	var dropped int
	for _, p := range r.parts {
		if p.txn == t {
			p.mu.Lock()
			p.revoked = true
			p.mu.Unlock()
			dropped++
		}
	}
	r.mu.Unlock()
	if m := r.cfg.Metrics; m != nil {
		m.Fenced.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias).Inc()
	}
	r.cfg.Log.Error("exactly-once: this worker was fenced (another worker owns the transactional ID now); it writes nothing more for these partitions",
		"slot", t.slot, "partitions", dropped, "err", err)
}

// liveTxns lists the transactional producers that are not fenced.
func (r *Replicator) liveTxns() []*txn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*txn
	for _, t := range r.txns {
		if !t.fenced {
			out = append(out, t)
		}
	}
	return out
}

// serveCommits answers the commit requests that are waiting.
func (r *Replicator) serveCommits(ctx context.Context) {
	for {
		select {
		case req := <-r.commits:
			req <- r.commitTxn(ctx)
		default:
			return
		}
	}
}

// commitTxn ends the open transactions, each with the progress of its
// partitions. If any record failed, every open transaction is aborted and
// its partitions rewind to their committed progress; a transaction whose
// commit fails is aborted the same way.
func (r *Replicator) commitTxn(ctx context.Context) error {
	ts := r.liveTxns()
	var open []*txn
	for _, t := range ts {
		if t.open {
			open = append(open, t)
		}
	}
	for _, t := range open {
		if err := t.cl.Flush(ctx); err != nil {
			return r.abortTxns(ctx, open, fmt.Errorf("waiting for the transaction's records: %w", err))
		}
	}
	r.mu.Lock()
	failed := len(r.restarts) > 0
	r.restarts = nil
	r.mu.Unlock()
	if failed {
		return r.abortTxns(ctx, open, errors.New("a record of the transaction failed"))
	}
	pos := r.Positions()
	var errs []error
	for _, t := range ts {
		mine := make(map[progress.TP]int64)
		var recs []*kgo.Record
		for tp, off := range pos {
			if r.slotOf(tp) != t.slot {
				continue
			}
			mine[tp] = off
			if old, ok := r.cfg.Progress.Get(tp); !ok || old != off {
				recs = append(recs, r.cfg.Progress.Record(tp, off))
			}
		}
		if !t.open && len(recs) == 0 {
			continue
		}
		if !t.open { // progress moved past skipped records only
			if err := t.cl.BeginTransaction(); err != nil {
				r.fence(t, fmt.Errorf("beginning a transaction on the target: %w", err))
				continue
			}
			t.open = true
		}
		err := t.cl.ProduceSync(ctx, recs...).FirstErr()
		if err != nil {
			err = fmt.Errorf("writing progress in the transaction: %w", err)
		} else if err = t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			err = fmt.Errorf("committing the transaction: %w", err)
		}
		if err != nil {
			errs = append(errs, r.abortTxns(ctx, []*txn{t}, err))
			continue
		}
		t.open = false
		r.cfg.Progress.Saved(mine)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.CommitStarted()
	if r.cfg.Syncs != nil {
		return r.cfg.Syncs.Flush(ctx)
	}
	return nil
}

// abortTxns aborts the transactions ts and rewinds their partitions to
// their committed progress. It returns cause, which the caller reports.
func (r *Replicator) abortTxns(ctx context.Context, ts []*txn, cause error) error {
	if isFenced(cause) {
		for _, t := range ts {
			r.fence(t, cause)
		}
		return cause
	}
	r.cfg.Log.Warn("aborting the transaction; partitions rewind to their committed progress", "err", cause)
	aborted := make(map[*txn]bool)
	for _, t := range ts {
		err := t.cl.AbortBufferedRecords(ctx)
		if err == nil {
			err = t.cl.EndTransaction(ctx, kgo.TryAbort)
		}
		if isFenced(err) {
			r.fence(t, err)
			continue
		}
		if err != nil {
			return errors.Join(cause, fmt.Errorf("aborting the transaction: %w", err))
		}
		t.open = false
		aborted[t] = true
	}
	r.mu.Lock()
	parts := make([]*partition, 0, len(r.parts))
	for _, p := range r.parts {
		if aborted[p.txn] {
			parts = append(parts, p)
		}
	}
	r.mu.Unlock()
	for _, p := range parts {
		if err := p.drain(ctx); err != nil {
			return errors.Join(cause, err)
		}
		p.mu.Lock()
		err, stopped, base := p.failed, p.stopped, p.base
		p.mu.Unlock()
		if stopped {
			continue
		}
		from := base
		if saved, ok := r.cfg.Progress.Get(p.tp); ok && saved >= 0 {
			from = saved + 1
		}
		if from < 0 {
			continue // nothing was copied yet, nothing to take back
		}
		// Offset syncs held back for the aborted records point at
		// offsets no read_committed reader sees.
		r.Forget([]progress.TP{p.tp})
		r.resume(ctx, p, from, err, 0)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second): // do not spin on a target that refuses
	}
	return cause
}

// eosStep runs at the top of each poll round: a failed record aborts the
// open transactions at once and commits asked for are served. Only a
// fenced single transactional producer (another kmirror with the same
// transactional ID started) ends Run.
func (r *Replicator) eosStep(ctx context.Context) error {
	r.mu.Lock()
	failed, fatal := len(r.restarts) > 0, r.fatal
	r.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if failed {
		if err := r.commitTxn(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("transaction aborted", "err", err)
		}
	}
	r.serveCommits(ctx)
	return nil
}

// releaseSlots closes the producers of slots none of whose partitions is
// assigned any more (all with all), so that the next owner need not wait
// for them.
func (r *Replicator) releaseSlots(all bool) {
	r.mu.Lock()
	used := make(map[*txn]bool)
	for _, p := range r.parts {
		used[p.txn] = true
	}
	var gone []*txn
	for s, t := range r.txns {
		if t.own && (all || !used[t]) {
			gone = append(gone, t)
			delete(r.txns, s)
		}
	}
	r.mu.Unlock()
	for _, t := range gone {
		t.cl.Close()
	}
}

package replicate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly-once mode. The target producer is transactional: the records
// copied since the last commit and the progress that says they are copied
// go to the target in one transaction. A reader of the target with
// isolation.level=read_committed then sees every source record once, across
// crashes: a transaction cut short by a crash is aborted when the next
// kmirror with the same transactional ID starts, and replication resumes
// after the last committed progress.
//
// The transaction is driven by the poll loop: Commit asks the loop to end
// the transaction at the next opportunity and waits for the outcome.

// commitRequest asks the poll loop for a commit.
type commitRequest chan error

// eosCommit is Commit in exactly-once mode.
func (r *Replicator) eosCommit(ctx context.Context) error {
	req := make(commitRequest, 1)
	select {
	case r.commits <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.wakePoll()
	select {
	case err := <-req:
		return err
	case <-ctx.Done():
		return ctx.Err()
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

// begin opens a transaction unless one is open.
func (r *Replicator) begin() error {
	if r.inTxn {
		return nil
	}
	if err := r.cfg.Target.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning a transaction on the target: %w", err)
	}
	r.inTxn = true
	return nil
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

// commitTxn ends the open transaction with the progress of every partition
// in it. If any record of the transaction failed, or the commit fails, the
// transaction is aborted and every partition rewinds to its committed
// progress.
func (r *Replicator) commitTxn(ctx context.Context) error {
	if !r.inTxn {
		return nil
	}
	if err := r.cfg.Target.Flush(ctx); err != nil {
		return r.abortTxn(ctx, fmt.Errorf("waiting for the transaction's records: %w", err))
	}
	r.mu.Lock()
	failed := len(r.restarts) > 0
	r.restarts = nil
	r.mu.Unlock()
	if failed {
		return r.abortTxn(ctx, errors.New("a record of the transaction failed"))
	}
	pos := r.Positions()
	var recs []*kgo.Record
	for tp, off := range pos {
		if old, ok := r.cfg.Progress.Get(tp); !ok || old != off {
			recs = append(recs, r.cfg.Progress.Record(tp, off))
		}
	}
	if err := r.cfg.Target.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return r.abortTxn(ctx, fmt.Errorf("writing progress in the transaction: %w", err))
	}
	if err := r.cfg.Target.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return r.abortTxn(ctx, fmt.Errorf("committing the transaction: %w", err))
	}
	r.inTxn = false
	r.cfg.Progress.Saved(pos)
	r.CommitStarted()
	if r.cfg.Syncs != nil {
		return r.cfg.Syncs.Flush(ctx)
	}
	return nil
}

// abortTxn aborts the open transaction and rewinds every partition to its
// committed progress. It returns cause, which the caller reports.
func (r *Replicator) abortTxn(ctx context.Context, cause error) error {
	r.cfg.Log.Warn("aborting the transaction; partitions rewind to their committed progress", "err", cause)
	if err := r.cfg.Target.AbortBufferedRecords(ctx); err != nil {
		return errors.Join(cause, err)
	}
	if err := r.cfg.Target.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return errors.Join(cause, fmt.Errorf("aborting the transaction: %w", err))
	}
	r.inTxn = false
	r.mu.Lock()
	parts := make([]*partition, 0, len(r.parts))
	for _, p := range r.parts {
		parts = append(parts, p)
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
		r.resume(ctx, p, from, err, 0)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second): // do not spin on a target that refuses
	}
	return cause
}

// eosStep runs at the top of each poll round: a failed record aborts the
// transaction at once, commits asked for are served, and a transaction is
// open before anything is produced. Only an error that leaves the
// transactional producer unusable (fenced by another kmirror with the same
// transactional ID) ends Run.
func (r *Replicator) eosStep(ctx context.Context) error {
	r.mu.Lock()
	failed := len(r.restarts) > 0
	r.mu.Unlock()
	if failed {
		if err := r.commitTxn(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("transaction aborted", "err", err)
		}
	}
	r.serveCommits(ctx)
	if err := r.begin(); err != nil {
		return err
	}
	return nil
}

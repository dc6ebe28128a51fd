package passthrough

import (
	"context"
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/slots"
)

// Exactly-once with several workers (Config.Slots): the partitions are
// spread over slots (internal/slots), each a transaction of its own with
// its own transactional ID. The group hands out whole slots; a worker
// takes a slot with InitProducerID (Fence), which fences the slot's
// previous owner before the slot's progress is read, and hands it back
// with its transaction committed (or aborted) when the slot's partitions
// are revoked.

// slotted reports whether the partitions are spread over slots.
func (pl *Pipeline) slotted() bool { return pl.eos() && pl.cfg.Slots > 0 }

func (pl *Pipeline) slotOf(tp progress.TP) int { return slots.Of(tp.Topic, tp.Partition, pl.cfg.Slots) }

// newTxn returns the state of slot s, without a producer ID yet.
func (pl *Pipeline) newTxn(s int) *txnState {
	id := pl.cfg.TransactionalID
	if pl.slotted() {
		id = slots.TransactionalID(id, s)
	}
	t := &txnState{slot: s, id: id, pid: -1, added: make(map[progress.TP]bool), offSeq: make(map[int32]int32),
		members: make(map[*partition]struct{})}
	t.coordinator.Store(-1)
	return t
}

// txnForLocked returns the transaction tp's batches go in: that of its
// slot, made (to be initialised by maintain) if this Pipeline holds none.
func (pl *Pipeline) txnForLocked(tp progress.TP) *txnState {
	s := pl.slotOf(tp)
	t := pl.txns[s]
	if t == nil || (pl.slotted() && !t.live()) {
		t = pl.newTxn(s)
		pl.txns[s] = t
	}
	return t
}

// Fence is datapath.Fencer. With slots, before the progress of newly
// assigned partitions is read, it takes each of their slots that this
// Pipeline does not hold: InitProducerID of the slot's transactional ID,
// which bumps its epoch and aborts (or completes) the transaction the
// previous owner left open, so that nothing that owner still sends can
// commit. It returns the partitions whose slot could not be taken, with
// the reason. Without slots it does nothing.
func (pl *Pipeline) Fence(ctx context.Context, tps []progress.TP) map[progress.TP]error {
	if !pl.slotted() {
		return nil
	}
	bySlot := make(map[int][]progress.TP)
	pl.mu.Lock()
	for _, tp := range tps {
		s := pl.slotOf(tp)
		if t := pl.txns[s]; t == nil || !t.live() {
			bySlot[s] = append(bySlot[s], tp)
		}
	}
	pl.mu.Unlock()
	failed := make(map[progress.TP]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, slotInits)
	for s, stps := range bySlot {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			t := pl.newTxn(s)
			resp, err := pl.initTransactional(ctx, t)
			if err != nil {
				err = fmt.Errorf("taking exactly-once slot %d (transactional ID %s): %w", s, t.id, err)
				mu.Lock()
				for _, tp := range stps {
					failed[tp] = err
				}
				mu.Unlock()
				return
			}
			pl.mu.Lock()
			pl.newTxnProducerLocked(t, resp.ProducerID, resp.ProducerEpoch)
			pl.txns[s] = t
			pl.mu.Unlock()
			pl.cfg.Log.Info("exactly-once: slot taken; its previous owner is fenced", "slot", s, "transactional_id", t.id,
				"producer_id", resp.ProducerID, "epoch", resp.ProducerEpoch)
		}()
	}
	wg.Wait()
	return failed
}

// txnRevoke is Revoke in exactly-once mode: the partitions stop sending,
// their batches in flight answer, and the transactions of their slots
// commit with their final progress before they are forgotten. Slots left
// without partitions are handed back.
func (pl *Pipeline) txnRevoke(ctx context.Context, tps []progress.TP) error {
	v := revoker{pl: pl, gone: true}
	mine := v.MarkRevoked(tps)
	theirs := make(map[*txnState]bool)
	pl.mu.Lock()
	for _, tp := range mine {
		theirs[pl.parts[tp].txn] = true
	}
	pl.mu.Unlock()
	defer func() {
		pl.Forget(mine)
		v.Delete(mine)
		pl.releaseSlots(ctx)
	}()
	for _, tp := range mine {
		if err := datapath.WaitIdle(ctx, func() bool { return v.InFlight(tp) == 0 }); err != nil {
			return err
		}
	}
	return pl.txnCommit(ctx, func(t *txnState) bool { return theirs[t] })
}

// releaseSlots hands back the slots none of whose partitions is assigned
// any more. A slot whose last commit failed is aborted first (a new
// epoch), so that the next owner finds nothing open.
func (pl *Pipeline) releaseSlots(ctx context.Context) {
	if !pl.slotted() {
		return
	}
	pl.mu.Lock()
	var gone []*txnState
	for s, t := range pl.txns {
		if len(t.members) == 0 {
			t.released = true
			delete(pl.txns, s)
			gone = append(gone, t)
		}
	}
	pl.mu.Unlock()
	for _, t := range gone {
		t.commitMu.Lock() // after an abort under way
		pl.mu.Lock()
		abort := t.failed != nil && t.fenced == nil && t.pid >= 0
		pl.mu.Unlock()
		if abort {
			err := pl.abortOpen(ctx, t)
			pl.mu.Lock()
			fenced := t.fenced != nil // and reported
			pl.mu.Unlock()
			if err != nil && !fenced {
				pl.cfg.Log.Warn("exactly-once: aborting the transaction of a slot handed back failed; its next owner aborts it", "slot", t.slot, "err", err)
			}
		}
		t.commitMu.Unlock()
	}
}

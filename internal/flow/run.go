package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/heartbeat"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// refresh syncs the topics and hands new partitions to the data path (or,
// in group mode, new topics to the group), taking gone ones back. A
// partition whose remote partition the target does not host yet is
// copied from a later refresh on, once it does (topicsync.Topic.Hosted).
// Topics the same as at the last refresh that went through leave nothing
// to do.
func (r *running) refresh(ctx context.Context) error {
	ts, err := r.syncer.Sync(ctx)
	if err != nil {
		return err
	}
	if r.synced != nil && slices.Equal(ts, r.synced) {
		return nil
	}
	r.synced = nil
	if err := r.apply(ctx, ts); err != nil {
		return err
	}
	r.synced = slices.Clip(ts)
	if r.synced == nil {
		r.synced = []topicsync.Topic{}
	}
	return nil
}

// startWait bounds how long a flow's first refresh retries errors that may
// pass by themselves: a worker that starts while a target broker restarts
// or a controller is elected waits for it rather than exiting.
const startWait = 2 * time.Minute

// firstRefresh is the refresh that starts the flow (startRetry).
func (r *running) firstRefresh(ctx context.Context) error {
	return startRetry(ctx, r.f.log, func() error { return r.refresh(ctx) })
}

// startRetry runs a step of a flow's start, retried with a warning for up
// to startWait while its error may pass by itself
// (kafkaerr.Transient); a refusal (no permission, a bad setting)
// returns at once. Later refreshes are retried at the next interval
// (refreshLoop).
func startRetry(ctx context.Context, log *slog.Logger, step func() error) error {
	tries := 0
	return backoff.Retry(ctx, backoff.Policy{First: 500 * time.Millisecond, Max: 10 * time.Second, For: startWait},
		func(err error) bool {
			if ctx.Err() != nil || !kafkaerr.Transient(err) {
				return false
			}
			if tries++; tries == 1 || tries%5 == 0 {
				log.Warn("starting the flow failed; retrying", "attempts", tries, "err", err)
			}
			return true
		},
		step)
}

// apply hands the partitions of ts to the data path, or their topics to
// the group, and takes gone ones back.
func (r *running) apply(ctx context.Context, ts []topicsync.Topic) error {
	for _, t := range ts {
		if err := r.checkTopicID(ctx, t); err != nil {
			return err
		}
	}
	if err := r.recoverPositions(ctx, ts); err != nil {
		return err
	}
	if r.group != "" {
		// The group hands out the partitions of subscribed topics; those
		// not hosted wait in the adapter (Group.Hosting). Topics with
		// none hosted are not subscribed: they wait here.
		subscribed := r.f.subscribe(r.consumer, r.producer, r.hooks, ts)
		var waiting []datapath.Held
		for _, t := range ts {
			if !subscribed[t.Name] {
				waiting = appendWaiting(waiting, t)
			}
		}
		r.hosts.set(ts)
		r.parts.SetWaiting(waiting)
		r.hooks.adapter.Release(ctx)
		return nil
	}
	var add []datapath.Partition
	var waiting []datapath.Held
	live := make(map[progress.TP]bool)
	for _, t := range ts {
		for p := int32(0); p < t.Partitions; p++ {
			tp := progress.TP{Topic: t.Name, Partition: p}
			live[tp] = true
			switch {
			case r.assigned[tp]:
			case p < t.Hosted:
				add = append(add, datapath.Partition{TP: tp, Remote: t.Remote})
				r.assigned[tp] = true
			default:
				waiting = append(waiting, datapath.Held{TP: tp, Remote: t.Remote, State: datapath.Waiting, Why: t.Err})
			}
		}
	}
	was := r.parts.Count(datapath.Waiting)
	r.hosts.set(ts)
	// After Assign, so that a partition the engine starts now shows all
	// along (Table.Merge shows the engine's row of one in both).
	defer r.parts.SetWaiting(waiting)
	var gone []progress.TP
	for tp := range r.assigned {
		if !live[tp] {
			gone = append(gone, tp)
			delete(r.assigned, tp)
		}
	}
	if len(gone) > 0 {
		r.f.log.Info("source partitions gone; no longer replicated", "count", len(gone))
		if err := r.rep.Revoke(ctx, gone); err != nil {
			return err
		}
	}
	if len(add) > 0 {
		// Remote partitions may be new: let the producer see them.
		r.producer.ForceMetadataRefresh()
		if was > 0 {
			r.f.log.Info("partitions the target hosts now are copied", "partitions", len(add), "still_waiting", len(waiting))
		}
	}
	r.rep.Assign(add)
	return nil
}

// appendWaiting adds the partitions of t, which wait for the target to
// host them.
func appendWaiting(ws []datapath.Held, t topicsync.Topic) []datapath.Held {
	for p := range t.Partitions {
		ws = append(ws, datapath.Held{TP: progress.TP{Topic: t.Name, Partition: p}, Remote: t.Remote, State: datapath.Waiting, Why: t.Err})
	}
	return ws
}

// run starts the side tasks (heartbeats, checkpoints, progress saves, topic
// refresh, config and ACL sync), runs the data path until ctx ends and
// stops everything.
func (r *running) run(ctx context.Context) error {
	f, c := r.f, r.c
	hb, cp, err := r.sideTasks(ctx)
	if err != nil {
		return err
	}
	loops, stop := context.WithCancel(ctx)
	defer stop()
	var side sync.WaitGroup
	sideErr := make(chan error, 2)
	r.startSide(loops, stop, &side, sideErr, hb, cp)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.commitLoop(loops)
	}()
	side.Add(1)
	go func() { defer side.Done(); r.health.Run(loops) }()
	go r.refreshLoop(loops)
	r.startSyncJobs(loops)
	f.log.Info("flow started", "source", c.Source, "target", c.Target, "partitions", len(r.assigned), "waiting_for_target", r.parts.Count(datapath.Waiting))
	err = r.rep.Run(loops, f.opts.Drain)
	stop()
	<-done
	side.Wait()
	close(sideErr)
	// A side task's error comes first: it is why the flow stopped, and
	// the data path's error on the way out is its consequence.
	var errs []error
	for e := range sideErr {
		errs = append(errs, e)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("flow %s: stopping: %w", c.Name(), err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f.log.Info("flow stopped; progress saved")
	return nil
}

// sideTasks prepares the flow's heartbeats and checkpoints, those it
// emits (nil otherwise).
func (r *running) sideTasks(ctx context.Context) (*heartbeat.Emitter, *checkpoint.Task, error) {
	f, c := r.f, r.c
	var hb *heartbeat.Emitter
	var err error
	if c.EmitHeartbeatsEnabled {
		if hb, err = f.heartbeats(ctx, r.pol, r.tgtAdm); err != nil {
			return nil, nil, err
		}
	}
	var cp *checkpoint.Task
	if c.EmitCheckpointsEnabled && c.EmitOffsetSyncsEnabled {
		if cp, err = checkpoint.New(checkpoint.Config{Flow: c, Metrics: f.m, Log: f.log}); err != nil {
			return nil, nil, fmt.Errorf("flow %s: %w", c.Name(), err)
		}
	}
	return hb, cp, nil
}

// startSide runs the heartbeats and the checkpoints (in group mode only
// while this worker leads the flow) until loops ends; their errors go to
// sideErr. A checkpoint task that fails in single mode stops the flow.
func (r *running) startSide(loops context.Context, stop context.CancelFunc, side *sync.WaitGroup, sideErr chan<- error, hb *heartbeat.Emitter, cp *checkpoint.Task) {
	f, c := r.f, r.c
	if hb != nil {
		side.Add(1)
		go func() { defer side.Done(); sideErr <- hb.Run(loops) }()
	}
	switch {
	case cp != nil && r.group != "":
		side.Add(1)
		go func() { defer side.Done(); f.leadCheckpoints(loops, r.hooks.leads, stop, sideErr) }()
	case cp != nil:
		side.Add(1)
		go func() {
			defer side.Done()
			if err := cp.Run(loops); err != nil {
				sideErr <- fmt.Errorf("flow %s: checkpoints: %w", c.Name(), err)
				stop() // the flow stops loudly rather than run half
			}
		}()
	}
}

// startSyncJobs has topic configs and ACLs follow the source, at start
// and on their intervals, as MM2's syncTopicConfigs and syncTopicAcls do;
// in group mode only the worker that leads the flow does it.
func (r *running) startSyncJobs(loops context.Context) {
	f, c := r.f, r.c
	var lead func() bool
	if r.group != "" {
		lead = r.hooks.leads
	}
	for _, job := range []struct {
		on   bool
		d    time.Duration
		name string
		fn   func(context.Context) error
	}{
		{c.SyncTopicConfigsEnabled, c.SyncTopicConfigsInterval, "topic configs", r.syncer.SyncConfigs},
		{c.SyncTopicACLsEnabled, c.SyncTopicACLsInterval, "topic ACLs", r.syncer.SyncACLs},
	} {
		if !job.on || job.d <= 0 {
			continue
		}
		run := func() {
			if err := job.fn(loops); err != nil && loops.Err() == nil {
				f.log.Warn("syncing "+job.name+" failed; retrying at the next interval", "err", err)
			}
		}
		go periodic(loops, job.d, leadCheck, lead, run)
	}
}

// commitLoop saves progress every offset flush interval, and sooner when
// the engine says a commit is due (datapath.Engine.CommitDue): once
// CommitRecords records were acknowledged, which bounds the records
// copied twice after a crash even while a backlog streams through, or
// once an exactly-once transaction is old enough to end.
func (r *running) commitLoop(ctx context.Context) {
	dueC := r.rep.CommitDue(CommitRecords)
	c := commitTimes{interval: r.c.OffsetFlushInterval, last: time.Now()}
	t := time.NewTimer(c.wait(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-dueC:
			c.early = true
		case <-t.C:
		}
		if now := time.Now(); c.due(now) {
			err := r.rep.Commit(ctx)
			in := c.committed(now, err)
			if err != nil && ctx.Err() == nil {
				r.f.log.Warn("saving progress failed; retrying", "in", in, "err", err)
				if kafkaerr.TopicGone(err) {
					// Exactly-once writes progress in its
					// transactions, not through the Store.
					if err := r.store.Check(ctx); err != nil && ctx.Err() == nil {
						r.f.log.Warn("making the progress topic again failed; retrying", "topic", r.store.Topic(), "err", err)
					}
				}
			}
		}
		t.Reset(c.wait(time.Now()))
	}
}

// commitTimes decides when commitLoop saves progress.
type commitTimes struct {
	interval time.Duration
	last     time.Time // the last commit began
	early    bool      // the engine asked for a commit that has not succeeded yet
	retryAt  time.Time // after a failed commit, none is tried before it
}

// due reports whether a commit is due at now.
func (c *commitTimes) due(now time.Time) bool {
	return (now.Sub(c.last) >= c.interval || c.early) && !now.Before(c.retryAt)
}

// wait returns how long from now until a commit may be due, unless the
// engine asks earlier.
func (c *commitTimes) wait(now time.Time) time.Duration {
	at := c.last.Add(c.interval)
	if c.early && c.retryAt.Before(at) {
		at = c.retryAt
	}
	return max(at.Sub(now), 0)
}

// committed notes a commit begun at now that ended with err; after a
// failure it returns how soon the next is tried: at once when the engine
// asked for it (the records it counted are still not saved), else at the
// next interval.
func (c *commitTimes) committed(now time.Time, err error) time.Duration {
	c.last, c.retryAt = now, time.Time{}
	if err == nil {
		c.early = false
		return c.interval
	}
	in := min(c.interval, commitRetry)
	c.retryAt = now.Add(in)
	if !c.early {
		return c.interval
	}
	return in
}

// commitRetry is how soon a failed save is tried again (the flush
// interval if shorter).
const commitRetry = time.Second

// hostedPoll is how often topics are refreshed while new remote
// partitions wait for the target to host them (topicsync.Syncer.Pending,
// datapath.Group.Unhosted).
const hostedPoll = time.Second

// refreshLoop refreshes the topics every refresh.topics.interval.seconds,
// and every hostedPoll while new remote partitions wait for the target to
// host them, so that they are copied as soon as it does (even with the
// refresh off). A produce that found a remote topic gone (topicGone)
// refreshes at once, at most every hostedPoll.
func (r *running) refreshLoop(ctx context.Context) {
	c := r.c
	on := c.RefreshTopicsEnabled && c.RefreshTopicsInterval > 0
	last := time.Now()
	for {
		var tick <-chan time.Time
		switch {
		case r.syncer.Pending() || r.hooks.adapter.Unhosted():
			tick = time.After(hostedPoll)
		case on:
			tick = time.After(c.RefreshTopicsInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-r.kick:
			if wait := hostedPoll - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.f.log.Warn("refreshing topics failed; retrying at the next interval", "err", err)
		}
		// The progress topic too, deleted while no progress moves.
		if err := r.store.Check(ctx); err != nil && ctx.Err() == nil {
			r.f.log.Warn("making the progress topic again failed; retrying at the next refresh", "topic", r.store.Topic(), "err", err)
		}
	}
}

// leadCheck is how often a worker in group mode checks whether it leads
// the flow (groupHooks.leads).
const leadCheck = 2 * time.Second

// periodic runs fn at once and then every d until ctx ends. With lead set
// (group mode), fn runs only while lead reports true, checked every check:
// at once when this worker comes to lead, then every d.
func periodic(ctx context.Context, d, check time.Duration, lead func() bool, fn func()) {
	every := d
	if lead != nil {
		every = min(d, check)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last time.Time
	for {
		if lead == nil || (lead() && (last.IsZero() || time.Since(last) >= d)) {
			last = time.Now()
			fn()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// yieldWait is how long a worker whose checkpoint task was fenced waits
// before it starts one again while it still believes it leads: the
// worker that fenced it leads now, and this one learns so at its next
// group heartbeat. Starting at once would fence that one in turn.
const yieldWait = 30 * time.Second

// leadCheckpoints runs the checkpoint task, in group mode, only while this
// worker leads the flow (leads), checking every few seconds: one worker
// translates and syncs group offsets, not all of them at once. Its writes
// are transactions under one ID per flow (CheckpointsTransactionalID), so
// a worker that starts leading fences one that still believes it leads (a
// worker frozen past its session, not yet told of the new assignment).
func (f *Flow) leadCheckpoints(ctx context.Context, leads func() bool, stopFlow func(), errs chan<- error) {
	var cancel context.CancelFunc
	var done chan error
	var yielded time.Time // when the task last ended fenced
	halt := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel = nil
		}
	}
	defer halt()
	check := func() {
		if cancel != nil {
			select {
			case err := <-done: // the task ended on its own
				cancel()
				cancel = nil
				switch {
				case checkpoint.Yielded(err):
					f.log.Warn("the checkpoint task stopped: another worker leads the flow's checkpoints", "err", err)
					yielded = time.Now()
				case err != nil && ctx.Err() == nil:
					errs <- fmt.Errorf("flow %s: checkpoints: %w", f.cfg.Name(), err)
					stopFlow()
				}
				return
			default:
			}
		}
		switch lead := leads(); {
		case !lead:
			yielded = time.Time{} // the group told this worker
			if cancel != nil {
				f.log.Info("another worker leads the flow now: checkpoints stop here")
				halt()
			}
		case cancel == nil && (yielded.IsZero() || time.Since(yielded) >= yieldWait):
			cp, err := checkpoint.New(checkpoint.Config{Flow: f.cfg, Metrics: f.m, Log: f.log,
				TransactionalID: CheckpointsTransactionalID(f.cfg)})
			if err != nil {
				errs <- fmt.Errorf("flow %s: %w", f.cfg.Name(), err)
				stopFlow()
				return
			}
			f.log.Info("this worker leads the flow: it runs the checkpoints")
			var cctx context.Context
			cctx, cancel = context.WithCancel(ctx)
			done = make(chan error, 1)
			go func() { done <- cp.Run(cctx) }()
		}
	}
	check()
	f.every(ctx, leadCheck, check)
}

// checkTopicID notices a source topic that was deleted and re-created under
// the same name: its saved progress belongs to the old topic. The new topic
// is replicated from its start; whatever the old topic held past the saved
// progress and was not copied is gone, and that is reported.
func (r *running) checkTopicID(ctx context.Context, t topicsync.Topic) error {
	f, store := r.f, r.store
	if t.ID == "" || t.Hosted == 0 {
		return nil
	}
	old, ok := store.TopicID(t.Name)
	if ok && old == t.ID {
		return nil
	}
	if ok {
		reset := make(map[progress.TP]int64)
		logged := false
		for p := int32(0); p < t.Partitions; p++ {
			tp := progress.TP{Topic: t.Name, Partition: p}
			last, had := store.Get(tp)
			reset[tp] = -1
			if had {
				logged = true
				f.log.Error("source topic was deleted and re-created: records of the old topic after the last copied offset are lost; replicating the new topic from its start",
					"topic", t.Name, "partition", p, "last_copied", last, "old_id", old, "new_id", t.ID)
			}
		}
		if !logged {
			// Re-created before any progress of the old topic was
			// saved: what was copied of it is not known here.
			f.log.Warn("source topic was deleted and re-created before any of its progress was saved; replicating the new topic from its start",
				"topic", t.Name, "old_id", old, "new_id", t.ID)
		}
		f.m.TopicsRecreated.WithLabelValues(f.cfg.Source, f.cfg.Target, t.Name).Inc()
		// The data path rewinds first: until then its progress saves
		// could write the old topic's progress over the reset.
		if err := r.rep.Rewind(ctx, t.Name); err != nil {
			return err
		}
		if err := store.Save(ctx, reset); err != nil {
			return err
		}
	}
	return store.SaveTopicID(ctx, t.Name, t.ID)
}

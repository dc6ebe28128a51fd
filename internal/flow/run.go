package flow

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/heartbeat"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/passthrough"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
	"github.com/kmirror/kmirror/internal/throttle"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// running is the state of one Run of a flow.
type running struct {
	f *Flow
	c *config.Flow

	pol                policy.Policy
	topics             *policy.Filter
	exclude            *regexp.Regexp
	srcAdm, tgtAdm     *kadm.Client
	tgtConn            []kgo.Opt // target connection options, for readers
	consumer, producer *kgo.Client
	group              string // consumer group in group mode, or ""
	hooks              *groupHooks
	store              *progress.Store
	rep                datapath.Engine
	syncer             *topicsync.Syncer
	assigned           map[progress.TP]bool // single mode: partitions handed to rep
}

// connect checks the settings the flow needs and that both clusters answer.
func (r *running) connect(ctx context.Context) error {
	f, c := r.f, r.c
	r.pol, r.topics, r.exclude = c.Policy, c.TopicFilter, c.ConfigExclude
	srcAdmCl, _, err := f.client("replication-source-admin", clients.Admin, c.SourceAdmin)
	if err != nil {
		return err
	}
	tgtAdmCl, tgtConn, err := f.client("replication-target-admin", clients.Admin, c.TargetAdmin)
	if err != nil {
		return err
	}
	r.srcAdm, r.tgtAdm, r.tgtConn = kadm.NewClient(srcAdmCl), kadm.NewClient(tgtAdmCl), tgtConn
	if err := reachable(ctx, r.srcAdm, c.Source); err != nil {
		return err
	}
	return reachable(ctx, r.tgtAdm, c.Target)
}

// build makes the clients, the progress store, the offset-sync writer, the
// data path and the topic syncer.
func (r *running) build(ctx context.Context) error {
	f, c := r.f, r.c
	if v := c.SourceConsumer["isolation.level"]; v != "" && v != "read_committed" {
		f.log.Warn("ignoring isolation.level: kmirror copies only committed records", "value", v)
	}
	startAtEnd := c.SourceConsumer["auto.offset.reset"] == "latest"
	copts := []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	}
	eos := c.ExactlyOnce
	if c.Workers == config.Group {
		r.group = c.WorkersGroupID
	}
	r.hooks = &groupHooks{remotes: make(map[string]string)}
	r.hooks.adapter = &datapath.Group{Remote: r.hooks.remote, Track: r.hooks.track, StartAtEnd: startAtEnd, Log: f.log}
	if r.group != "" {
		if eos {
			return fmt.Errorf("flow %s: exactly-once with several workers (%s) is not supported yet; run one worker per flow", c.Name(), config.WorkersKey)
		}
		copts = append(copts, r.hooks.options(r.group, c.SourceConsumer)...)
		f.log.Info("workers share this flow through a consumer group on the source", "group", r.group)
	}
	var err error
	if r.consumer, _, err = f.client("replication-consumer", clients.Consumer, c.SourceConsumer, copts...); err != nil {
		return err
	}
	popts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())}
	if eos {
		popts = append(popts, kgo.TransactionalID(TransactionalID(c)))
	}
	if r.producer, _, err = f.client("replication-producer", clients.Producer, c.TargetProducer, popts...); err != nil {
		return err
	}
	usePT, why := dataPathOf(c, eos, f.opts.AddOrigin)
	if !usePT {
		f.log.Info("record path: records are decoded and re-encoded", "because", why)
	}
	byCodec, err := f.codecProducers(eos || usePT, popts)
	if err != nil {
		return err
	}
	// Progress written outside the record path (revoked partitions,
	// re-created topics) cannot use a transactional producer.
	storeProducer := r.producer
	if eos {
		if storeProducer, _, err = f.client("progress-producer", clients.Producer, c.TargetProducer, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
			return err
		}
		f.log.Info("exactly-once: records and progress are written in transactions", "transactional_id", TransactionalID(c))
	}
	r.store, err = progress.Open(ctx, r.tgtAdm, r.tgtConn, storeProducer, progress.Options{
		Topic:             c.OffsetStorageTopic,
		Source:            c.Source,
		Partitions:        c.OffsetStoragePartitions,
		ReplicationFactor: c.OffsetStorageReplicationFactor,
	}, f.log)
	if err != nil {
		return fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	r.hooks.adapter.Progress = r.store
	if err := r.seedFromGroup(ctx); err != nil {
		return err
	}
	var syncs *offsetsync.Writer
	if c.EmitOffsetSyncsEnabled {
		if syncs, err = f.offsetSyncs(ctx, r.pol, r.srcAdm, r.tgtAdm); err != nil {
			return err
		}
	}
	limiter := throttle.New(c.ThrottleBytesPerSecond)
	fetches := fetchesOf(c, usePT)
	// More source clients, one per fetch lane after the first. The
	// record path in group mode fetches with the group consumer alone.
	var more []*kgo.Client
	if usePT || r.group == "" {
		for i := 1; i < fetches; i++ {
			var o []kgo.Opt // passthrough: transport and metadata only
			if !usePT {
				o = copts // direct consumers like r.consumer (no group here)
			}
			cl, _, err := f.client(fmt.Sprintf("replication-fetcher-%d", i), clients.Consumer, c.SourceConsumer, o...)
			if err != nil {
				return err
			}
			more = append(more, cl)
		}
	}
	if usePT {
		f.log.Info("passthrough: source batches are forwarded without recompression", "fetches_per_broker", fetches)
		pl := passthrough.New(passthrough.Config{
			SourceAlias: c.Source, TargetAlias: c.Target,
			Source: r.consumer, MoreSources: more, SourceAdmin: r.srcAdm,
			Target: r.producer, TargetAdmin: r.tgtAdm,
			Progress: r.store, Syncs: syncs,
			StartAtEnd: startAtEnd,
			Throttle:   limiter,
			Metrics:    f.m, Log: f.log,
			// The source consumer's Java fetch keys, as on the record
			// path; unset ones keep passthrough's defaults.
			FetchMaxBytes:     int32(positiveInt(c.SourceConsumer["fetch.max.bytes"])),
			PartitionMaxBytes: int32(positiveInt(c.SourceConsumer["max.partition.fetch.bytes"])),
			FetchMaxWait:      time.Duration(positiveInt(c.SourceConsumer["fetch.max.wait.ms"])) * time.Millisecond,
		})
		r.rep = pl
		r.hooks.adapter.OwnFetches = true
	} else {
		r.rep = replicate.New(replicate.Config{
			SourceAlias:   c.Source,
			TargetAlias:   c.Target,
			Source:        r.consumer,
			MoreSources:   more,
			SourceAdmin:   r.srcAdm,
			Target:        r.producer,
			ByCodec:       byCodec,
			Progress:      r.store,
			Syncs:         syncs,
			StartAtEnd:    startAtEnd,
			AddOrigin:     f.opts.AddOrigin,
			Throttle:      limiter,
			Transactional: eos,
			Group:         r.group != "",
			Metrics:       f.m,
			Log:           f.log,
		})
	}
	r.hooks.adapter.Engine = r.rep
	r.syncer = &topicsync.Syncer{
		Source:                r.srcAdm,
		Target:                r.tgtAdm,
		SourceAlias:           c.Source,
		TargetAlias:           c.Target,
		Policy:                r.pol,
		Topics:                r.topics,
		HeartbeatsReplication: c.HeartbeatsReplicationEnabled,
		ReplicationFactor:     c.ReplicationFactor,
		ConfigExclude:         r.exclude,
		DefaultsFromSource:    c.Settings["use.defaults.from"] == "source",
		Log:                   f.log,
	}
	return nil
}

// refresh syncs the topics and hands new partitions to the data path (or,
// in group mode, new topics to the group), taking gone ones back.
func (r *running) refresh(ctx context.Context) error {
	ts, err := r.syncer.Sync(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := r.checkTopicID(ctx, t); err != nil {
			return err
		}
	}
	if r.group != "" {
		r.f.subscribe(r.consumer, r.producer, r.hooks, ts)
		return nil
	}
	var add []datapath.Partition
	live := make(map[progress.TP]bool)
	for _, t := range ts {
		for p := int32(0); p < t.Partitions; p++ {
			tp := progress.TP{Topic: t.Name, Partition: p}
			live[tp] = true
			if t.Ready && !r.assigned[tp] {
				add = append(add, datapath.Partition{TP: tp, Remote: t.Remote})
				r.assigned[tp] = true
			}
		}
	}
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
	}
	r.rep.Assign(add)
	return nil
}

// run starts the side tasks (heartbeats, checkpoints, progress saves, topic
// refresh, config and ACL sync), runs the data path until ctx ends and
// stops everything.
func (r *running) run(ctx context.Context) error {
	f, c := r.f, r.c
	var hb *heartbeat.Emitter
	var err error
	if c.EmitHeartbeatsEnabled {
		if hb, err = f.heartbeats(ctx, r.pol, r.tgtAdm); err != nil {
			return err
		}
	}
	var cp *checkpoint.Task
	if c.EmitCheckpointsEnabled && c.EmitOffsetSyncsEnabled {
		if cp, err = checkpoint.New(checkpoint.Config{Flow: c, Metrics: f.m, Log: f.log}); err != nil {
			return fmt.Errorf("flow %s: %w", c.Name(), err)
		}
	}

	loops, stop := context.WithCancel(ctx)
	defer stop()
	var side sync.WaitGroup
	sideErr := make(chan error, 2)
	if hb != nil {
		side.Add(1)
		go func() { defer side.Done(); sideErr <- hb.Run(loops) }()
	}
	switch {
	case cp != nil && r.group != "":
		side.Add(1)
		go func() { defer side.Done(); r.leadCheckpoints(loops, stop, sideErr) }()
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
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Progress is saved every interval, and sooner once CommitRecords
		// records were acknowledged, which bounds the records copied
		// twice after a crash even while a backlog streams through.
		interval := c.OffsetFlushInterval
		last := time.Now()
		f.every(loops, min(interval, 50*time.Millisecond), func() {
			if time.Since(last) < interval && r.rep.AckedSinceCommit() < CommitRecords {
				return
			}
			last = time.Now()
			if err := r.rep.Commit(loops); err != nil && loops.Err() == nil {
				f.log.Warn("saving progress failed; retrying at the next interval", "err", err)
			}
		})
	}()
	if c.RefreshTopicsEnabled && c.RefreshTopicsInterval > 0 {
		go f.every(loops, c.RefreshTopicsInterval, func() {
			if err := r.refresh(loops); err != nil && loops.Err() == nil {
				f.log.Warn("refreshing topics failed; retrying at the next interval", "err", err)
			}
		})
	}
	// Topic configs and ACLs follow the source, at start and on their
	// intervals, as MM2's syncTopicConfigs and syncTopicAcls do; in group
	// mode only the worker that leads the flow does it.
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
	f.log.Info("flow started", "source", c.Source, "target", c.Target, "partitions", len(r.assigned))
	err = r.rep.Run(loops, f.opts.Drain)
	stop()
	<-done
	side.Wait()
	close(sideErr)
	if err != nil {
		return fmt.Errorf("flow %s: stopping: %w", c.Name(), err)
	}
	for err := range sideErr {
		if err != nil {
			return err
		}
	}
	f.log.Info("flow stopped; progress saved")
	return nil
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

// leadCheckpoints runs the checkpoint task, in group mode, only while this
// worker leads the flow (groupHooks.leads), checking every few seconds: one
// worker translates and syncs group offsets, not all of them at once.
func (r *running) leadCheckpoints(ctx context.Context, stopFlow func(), errs chan<- error) {
	var cancel context.CancelFunc
	var done chan error
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
			case err := <-done: // the task ended on its own: an error
				cancel()
				cancel = nil
				if err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("flow %s: checkpoints: %w", r.c.Name(), err)
					stopFlow()
				}
				return
			default:
			}
		}
		switch lead := r.hooks.leads(); {
		case lead && cancel == nil:
			cp, err := checkpoint.New(checkpoint.Config{Flow: r.c, Metrics: r.f.m, Log: r.f.log})
			if err != nil {
				errs <- fmt.Errorf("flow %s: %w", r.c.Name(), err)
				stopFlow()
				return
			}
			r.f.log.Info("this worker leads the flow: it runs the checkpoints")
			var cctx context.Context
			cctx, cancel = context.WithCancel(ctx)
			done = make(chan error, 1)
			go func() { done <- cp.Run(cctx) }()
		case !lead && cancel != nil:
			r.f.log.Info("another worker leads the flow now: checkpoints stop here")
			halt()
		}
	}
	check()
	r.f.every(ctx, leadCheck, check)
}

// checkTopicID notices a source topic that was deleted and re-created under
// the same name: its saved progress belongs to the old topic. The new topic
// is replicated from its start; whatever the old topic held past the saved
// progress and was not copied is gone, and that is reported.
func (r *running) checkTopicID(ctx context.Context, t topicsync.Topic) error {
	f, store := r.f, r.store
	if t.ID == "" || !t.Ready {
		return nil
	}
	old, ok := store.TopicID(t.Name)
	if ok && old == t.ID {
		return nil
	}
	if ok {
		reset := make(map[progress.TP]int64)
		for p := int32(0); p < t.Partitions; p++ {
			tp := progress.TP{Topic: t.Name, Partition: p}
			last, had := store.Get(tp)
			reset[tp] = -1
			if had {
				f.log.Error("source topic was deleted and re-created: records of the old topic after the last copied offset are lost; replicating the new topic from its start",
					"topic", t.Name, "partition", p, "last_copied", last, "old_id", old, "new_id", t.ID)
			}
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

// seedFromGroup gives partitions that have no progress yet the position of
// a consumer group on the source (config.StartGroupKey): the records the group
// had already consumed before are not copied, as MirrorMaker 1, which
// replicated through such a group, would not have copied them again.
func (r *running) seedFromGroup(ctx context.Context) error {
	group := r.c.StartFromGroup
	if group == "" {
		return nil
	}
	// The group's coordinator may be loading or moving (a broker just
	// started): retriable errors are waited out for a while.
	var offs kadm.OffsetResponses
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		offs, err = r.srcAdm.FetchOffsets(ctx, group)
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("flow %s: reading the offsets of group %q on %s (%s): %w", r.c.Name(), group, r.c.Source, config.StartGroupKey, err)
	}
	seed := make(map[progress.TP]int64)
	offs.Each(func(o kadm.OffsetResponse) {
		tp := progress.TP{Topic: o.Topic, Partition: o.Partition}
		if _, saved := r.store.Get(tp); o.Err == nil && o.At > 0 && !saved && r.topics.Match(o.Topic) {
			seed[tp] = o.At - 1
		}
	})
	if len(seed) == 0 {
		return nil
	}
	if err := r.store.Save(ctx, seed); err != nil {
		return err
	}
	r.f.log.Info("partitions without progress start where the consumer group stands", "group", group, "partitions", len(seed))
	return nil
}

// positiveInt parses a client property already checked by internal/clients;
// anything unset or not positive is 0 (the data path's default).
func positiveInt(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

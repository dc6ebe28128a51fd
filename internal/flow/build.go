package flow

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/health"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/passthrough"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/slots"
	"github.com/kmirror/kmirror/internal/throttle"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// running is the state of one Run of a flow.
type running struct {
	f    *Flow
	c    *config.Flow
	plan Plan // what to build

	pol                policy.Policy
	topics             *policy.Filter
	exclude            *regexp.Regexp
	srcAdm, tgtAdm     *kadm.Client
	srcAdmCl           *kgo.Client // of srcAdm
	tgtAdmCl           *kgo.Client // of tgtAdm
	tgtConn            []kgo.Opt   // target connection options, for readers
	srcConn            []kgo.Opt   // source connection options, for readers
	consumer, producer *kgo.Client
	group              string // consumer group in group mode, or ""
	hooks              *groupHooks
	store              *progress.Store
	rep                datapath.Engine
	health             *health.Watcher // watches rep's partitions
	syncer             *topicsync.Syncer
	assigned           map[progress.TP]bool // single mode: partitions handed to rep
	hosts              hosting              // how many partitions of each topic the target hosts
	parts              *datapath.Table      // the state of the partitions not the engine's own
	synced             []topicsync.Topic    // the topics of the last refresh that went through
	kick               chan struct{}        // a produce found a remote topic gone: refresh now
	looked             map[progress.TP]bool // partitions recoverPositions looked at
}

// connect checks the settings the flow needs and that both clusters answer.
func (r *running) connect(ctx context.Context) error {
	f, c := r.f, r.c
	r.pol, r.topics, r.exclude = c.Policy, c.TopicFilter, c.ConfigExclude
	srcAdmCl, srcConn, err := f.client("replication-source-admin", clients.Admin, c.SourceAdmin)
	if err != nil {
		return err
	}
	tgtAdmCl, tgtConn, err := f.client("replication-target-admin", clients.Admin, c.TargetAdmin)
	if err != nil {
		return err
	}
	r.srcAdm, r.tgtAdm, r.tgtConn = kadm.NewClient(srcAdmCl), kadm.NewClient(tgtAdmCl), tgtConn
	r.srcAdmCl, r.tgtAdmCl, r.srcConn = srcAdmCl, tgtAdmCl, srcConn
	if err := reachable(ctx, r.srcAdm, c.Source); err != nil {
		return err
	}
	return reachable(ctx, r.tgtAdm, c.Target)
}

// build makes the clients of r.plan, the progress store, the offset-sync
// writer, the data path and the topic syncer.
func (r *running) build(ctx context.Context) error {
	f, p := r.f, r.plan
	if p.IgnoredIsolation {
		f.log.Warn("ignoring isolation.level: kmirror copies only committed records", "value", config.ReadUncommitted.String())
	}
	r.group = p.Group
	r.hooks = &groupHooks{remotes: make(map[string]string)}
	r.hooks.adapter = &datapath.Group{Remote: r.hooks.remote, Track: r.hooks.track, StartAtEnd: p.StartAtEnd, Log: f.log,
		Metrics: f.m, SourceAlias: r.c.Source, TargetAlias: r.c.Target, Hosting: r.hosts.wait}
	storeProducer, err := r.dataClients()
	if err != nil {
		return err
	}
	if err := r.openStore(ctx, storeProducer); err != nil {
		return err
	}
	r.hooks.adapter.Progress = r.store
	r.parts = datapath.NewTable(r.store)
	r.hooks.adapter.Table = r.parts
	r.hooks.adapter.Recover = r.recoverAssigned
	if err := r.seedFromGroup(ctx); err != nil {
		return err
	}
	if err := r.engine(ctx); err != nil {
		return err
	}
	r.syncer = r.topicSyncer()
	return nil
}

// dataClients makes the data path's consumer (in group mode, the group
// member) and producer, and returns the producer the progress store
// writes with: a producer of its own in exactly-once mode, since progress
// written outside the data path's transactions (revoked partitions,
// re-created topics) cannot use a transactional producer.
func (r *running) dataClients() (*kgo.Client, error) {
	f, c, p := r.f, r.c, r.plan
	copts := []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	}
	if r.group != "" {
		copts = append(slices.Clip(copts), r.hooks.options(p)...)
		f.log.Info("workers share this flow through a consumer group on the source", "group", r.group)
	}
	var err error
	if r.consumer, _, err = f.client("replication-consumer", clients.Consumer, c.SourceConsumer, copts...); err != nil {
		return nil, err
	}
	popts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())}
	if r.producer, _, err = f.client("replication-producer", clients.Producer, c.TargetProducer, popts...); err != nil {
		return nil, err
	}
	if p.TransactionalID == "" {
		return r.producer, nil
	}
	storeProducer, _, err := f.client("progress-producer", clients.Producer, c.TargetProducer, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	if p.Slots > 0 {
		f.log.Info("exactly-once: records and progress are written in transactions, one transactional ID per slot of partitions",
			"transactional_ids", slots.TransactionalID(p.TransactionalID, 0)+"..", "slots", p.Slots)
	} else {
		f.log.Info("exactly-once: records and progress are written in transactions", "transactional_id", p.TransactionalID)
	}
	return storeProducer, nil
}

// openStore opens the progress store, writing with producer, and starts
// its metrics' series.
func (r *running) openStore(ctx context.Context, producer *kgo.Client) error {
	f, c := r.f, r.c
	opts := progress.Options{
		Topic:             c.OffsetStorageTopic,
		Source:            c.Source,
		Partitions:        c.OffsetStoragePartitions,
		ReplicationFactor: c.OffsetStorageReplicationFactor,
		Shared:            r.group != "",
		Missing: func(missing bool) {
			v := 0.0
			if missing {
				v = 1
			}
			f.m.Progress.TopicMissing.WithLabelValues(c.Source, c.Target).Set(v)
		},
		Recreated: func() {
			f.m.Progress.TopicRecreated.WithLabelValues(c.Source, c.Target).Inc()
			// Exactly-once producers write progress in their
			// transactions: they must learn the new topic's ID too.
			// Not the Store's own producer: it forgot the topic
			// before writing to the new one, and forgetting it again
			// would number its batches from 0 again under the same
			// producer ID, and the broker would take the next save
			// for a duplicate and not write it.
			f.forget(producer, c.OffsetStorageTopic)
		},
	}
	// A broker that restarts while the flow starts (not answering,
	// or not knowing the topic yet) is waited out (startRetry): a
	// robustness run's workers exited here when a target broker was
	// killed as they read their progress.
	err := startRetry(ctx, f.log, func() (err error) {
		r.store, err = progress.Open(ctx, r.tgtAdm, r.tgtConn, producer, opts, f.log)
		return err
	})
	if err != nil {
		return fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	// The series exist from the start, for alerts on them.
	f.m.Progress.TopicMissing.WithLabelValues(c.Source, c.Target).Set(0)
	f.m.Progress.TopicRecreated.WithLabelValues(c.Source, c.Target).Add(0)
	return nil
}

// engine makes the offset-sync writer, the source clients of the further
// fetch lanes, the engine and its health watcher.
func (r *running) engine(ctx context.Context) error {
	f, c, p := r.f, r.c, r.plan
	var syncs *offsetsync.Writer
	if c.EmitOffsetSyncsEnabled {
		var err error
		if syncs, err = f.offsetSyncs(ctx, r.pol, r.srcAdm, r.tgtAdm); err != nil {
			return err
		}
	}
	// More source clients, one per fetch lane after the first: transport
	// and metadata only.
	var more []*kgo.Client
	for i := 1; i < p.Fetches; i++ {
		cl, _, err := f.client(fmt.Sprintf("replication-fetcher-%d", i), clients.Consumer, c.SourceConsumer)
		if err != nil {
			return err
		}
		more = append(more, cl)
	}
	msg, attrs := p.DataPath()
	f.log.Info(msg, attrs...)
	r.rep = passthrough.New(passthrough.Config{
		SourceAlias: c.Source, TargetAlias: c.Target,
		Source: r.consumer, MoreSources: more, SourceAdmin: r.srcAdm,
		Target: r.producer, TargetAdmin: r.tgtAdm,
		Progress: r.store, Syncs: syncs,
		StartAtEnd: p.StartAtEnd,
		Throttle:   throttle.New(p.Throttle),
		AddOrigin:  p.AddOrigin, ReencodeAll: p.All, Codec: p.Codec,
		Metrics: f.m, Log: f.log,
		// The source consumer's Java fetch keys; unset ones keep
		// passthrough's defaults.
		FetchMaxBytes:     p.FetchMaxBytes,
		PartitionMaxBytes: p.PartitionMaxBytes,
		FetchMaxWait:      p.FetchMaxWait,
		TopicGone:         r.topicGone,
		TransactionalID:   p.TransactionalID,
		Slots:             p.Slots,
	})
	r.hooks.adapter.OwnFetches = true
	r.hooks.adapter.Engine = r.rep
	r.health = health.New(health.Config{
		SourceAlias: c.Source, TargetAlias: c.Target, Source: r.srcAdmCl,
		StallAfter: c.StallTimeout, LagAfter: c.LagThreshold, Metrics: f.m, Table: r.parts,
	}, r.rep, f.log)
	return nil
}

// topicSyncer returns the flow's topic syncer.
func (r *running) topicSyncer() *topicsync.Syncer {
	c := r.c
	return &topicsync.Syncer{
		Source:                r.srcAdm,
		Target:                r.tgtAdm,
		TargetClient:          r.tgtAdmCl,
		SourceClient:          r.srcAdmCl,
		SourceAlias:           c.Source,
		TargetAlias:           c.Target,
		Policy:                r.pol,
		Topics:                r.topics,
		HeartbeatsReplication: c.HeartbeatsReplicationEnabled,
		ReplicationFactor:     c.ReplicationFactor,
		ConfigExclude:         r.exclude,
		DefaultsFromSource:    c.Client.DefaultsFromSource,
		Recreated:             func(rs []string) { r.f.forget(nil, rs...) },
		Log:                   r.f.log,
	}
}

// topicGone is the data path's report that the target does not know a
// remote topic (deleted on the target): topic sync checks the remote
// topics fully at once rather than at the next refresh.
func (r *running) topicGone(remote string) {
	if r.syncer == nil {
		return
	}
	r.syncer.Recheck()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// seedFromGroup gives partitions that have no progress yet the position of
// a consumer group on the source (config.StartGroupKey): the records the group
// had already consumed before are not copied, as MirrorMaker 1, which
// replicated through such a group, would not have copied them again.
func (r *running) seedFromGroup(ctx context.Context) error {
	group := r.plan.StartFromGroup
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

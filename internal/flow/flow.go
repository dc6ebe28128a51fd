// Package flow runs one replication flow (source->target) of an MM2
// configuration: topic sync, the record path, progress and offset syncs.
package flow

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/heartbeat"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/passthrough"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
	"github.com/kmirror/kmirror/internal/throttle"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// DefaultFlushInterval is how often progress is saved when
// offset.flush.interval.ms is not set. MM2's default is 60 s; kmirror saves
// every second so that a crash re-copies at most about a second of data.
const DefaultFlushInterval = time.Second

// codecProducers returns one producer per compression codec, so that
// records reach the target compressed as they were at the source, unless
// compression.type is set for the target producer or single is set
// (exactly-once: one transaction, one producer; passthrough: batches keep
// their codec anyway).
func (f *Flow) codecProducers(single bool, popts []kgo.Opt) (map[uint8]*kgo.Client, error) {
	if single || f.cfg.TargetProducer["compression.type"] != "" {
		return nil, nil
	}
	codecs := []struct {
		attr  uint8
		name  string
		codec kgo.CompressionCodec
	}{
		{0, "none", kgo.NoCompression()}, {1, "gzip", kgo.GzipCompression()}, {2, "snappy", kgo.SnappyCompression()},
		{3, "lz4", kgo.Lz4Compression()}, {4, "zstd", kgo.ZstdCompression()},
	}
	out := make(map[uint8]*kgo.Client, len(codecs))
	for _, c := range codecs {
		cl, _, err := f.client("replication-producer-"+c.name, clients.Producer, f.cfg.TargetProducer,
			append(append([]kgo.Opt{}, popts...), kgo.ProducerBatchCompression(c.codec))...)
		if err != nil {
			return nil, err
		}
		out[c.attr] = cl
	}
	return out, nil
}

// PassthroughKey turns passthrough on for a flow: source batches go to the
// target as they are, without decompression and recompression. Flows that
// are exactly-once or write the provenance header use the record path.
const PassthroughKey = "kmirror.passthrough.enabled"

// Passthrough reports whether a flow asks for passthrough.
func Passthrough(c *config.Flow) bool { return c.Settings[PassthroughKey] == "true" }

// ThrottleKey bounds the bytes per second a flow copies to its target
// (keys and values on the record path, batch bytes on passthrough).
const ThrottleKey = "kmirror.throttle.bytes.per.second"

func throttleOf(c *config.Flow) (*throttle.Limiter, error) {
	v, ok := c.Settings[ThrottleKey]
	if !ok || v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		raw, line := c.Position(ThrottleKey)
		return nil, &config.Error{File: c.File(), Line: line, Key: raw, Msg: fmt.Sprintf("want a whole number of bytes per second, not %q", v)}
	}
	return throttle.New(n), nil
}

// ExactlyOnce reports whether a flow runs in exactly-once mode: MM2's
// worker setting exactly.once.source.support=enabled, given for the target
// cluster (TARGET.exactly.once.source.support = enabled).
func ExactlyOnce(c *config.Flow) bool {
	return c.Worker["exactly.once.source.support"] == "enabled"
}

// TransactionalID is the transactional ID of a flow's producer in
// exactly-once mode. A second kmirror running the same flow fences the
// first.
func TransactionalID(c *config.Flow) string {
	return "kmirror-" + c.Name()
}

// DefaultFetchMaxBytes bounds one fetch response when fetch.max.bytes is
// not set.
const DefaultFetchMaxBytes = 16 << 20

// CommitRecords is how many acknowledged records make progress be saved
// before the flush interval is up.
const CommitRecords = 5000

// Options tune a flow beyond its configuration.
type Options struct {
	// AddOrigin writes the provenance header; see replicate.OriginHeader.
	AddOrigin bool
	// Drain bounds how long a stopping flow waits for records in flight.
	Drain time.Duration
}

// Flow is one running source->target flow.
type Flow struct {
	cfg  *config.Flow
	opts Options
	m    *metrics.Metrics
	log  *slog.Logger

	closers []func()

	mu  sync.Mutex
	rep dataPath // set once Run has assigned partitions
}

// dataPath moves the records of assigned partitions: the record path
// (internal/replicate) or passthrough (internal/passthrough).
type dataPath interface {
	Assign([]replicate.Partition)
	Revoke(context.Context, []progress.TP) error
	Positions() map[progress.TP]int64
	Commit(context.Context) error
	AckedSinceCommit() int64
	Run(context.Context, time.Duration) error
}

// controlled is a data path that reports its partitions and can pause.
type controlled interface {
	Status() []replicate.PartitionStatus
	Pause()
	Resume()
	Paused() bool
}

// Partitions returns the state of the flow's partitions; nil before the
// flow has started replicating.
func (f *Flow) Partitions() []replicate.PartitionStatus {
	if rep, ok := f.replicator().(controlled); ok {
		return rep.Status()
	}
	return nil
}

// Pause stops fetching from the source until Resume; it reports whether
// the flow was replicating.
func (f *Flow) Pause() bool {
	rep, ok := f.replicator().(controlled)
	if ok {
		rep.Pause()
	}
	return ok
}

// Resume undoes Pause.
func (f *Flow) Resume() bool {
	rep, ok := f.replicator().(controlled)
	if ok {
		rep.Resume()
	}
	return ok
}

// Paused reports whether the flow is paused.
func (f *Flow) Paused() bool {
	rep, ok := f.replicator().(controlled)
	return ok && rep.Paused()
}

func (f *Flow) replicator() dataPath {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rep
}

// New prepares a flow; Run starts it.
func New(cfg *config.Flow, opts Options, m *metrics.Metrics, log *slog.Logger) *Flow {
	if opts.Drain == 0 {
		opts.Drain = 30 * time.Second
	}
	return &Flow{cfg: cfg, opts: opts, m: m, log: log.With("flow", cfg.Name())}
}

// client builds a franz-go client for one role; it also returns the
// options without the role's extra ones, for short-lived readers.
func (f *Flow) client(role string, kind clients.Role, props map[string]string, extra ...kgo.Opt) (*kgo.Client, []kgo.Opt, error) {
	conn, err := clients.RoleOptions(kind, props)
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s, %s client: %w", f.cfg.Name(), role, err)
	}
	id := f.cfg.Name() + "|kmirror|" + role
	if v := props["client.id"]; v != "" {
		id = v + "|" + id
	}
	opts := append(append(roleDefaults(kind, props), conn...), kgo.ClientID(id))
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s, %s client: %w", f.cfg.Name(), role, err)
	}
	f.closers = append(f.closers, cl.Close)
	return cl, opts, nil
}

// roleDefaults are kmirror's own defaults, which the Java properties of the
// role override. A replicator's memory is mostly fetched data, so fetches are
// smaller than Java's 50 MiB unless fetch.max.bytes says otherwise.
func roleDefaults(kind clients.Role, props map[string]string) []kgo.Opt {
	if kind == clients.Consumer {
		if _, ok := props["fetch.max.bytes"]; !ok {
			return []kgo.Opt{kgo.FetchMaxBytes(DefaultFetchMaxBytes)}
		}
	}
	return nil
}

func (f *Flow) close() {
	for i := len(f.closers) - 1; i >= 0; i-- {
		f.closers[i]()
	}
	f.closers = nil
}

// Run replicates until ctx ends, then stops cleanly: records in flight are
// acknowledged and progress saved before it returns.
func (f *Flow) Run(ctx context.Context) error {
	defer f.close()
	c := f.cfg
	pol, err := c.Policy()
	if err != nil {
		return err
	}
	topics, err := c.TopicFilter()
	if err != nil {
		return err
	}
	exclude, err := policy.CompilePattern(c.ConfigPropertiesExclude)
	if err != nil {
		return err
	}
	if _, err := checkpoint.FlowSettings(c); err != nil {
		return err
	}

	srcAdmCl, _, err := f.client("replication-source-admin", clients.Admin, c.SourceAdmin)
	if err != nil {
		return err
	}
	tgtAdmCl, tgtConn, err := f.client("replication-target-admin", clients.Admin, c.TargetAdmin)
	if err != nil {
		return err
	}
	srcAdm, tgtAdm := kadm.NewClient(srcAdmCl), kadm.NewClient(tgtAdmCl)
	if err := reachable(ctx, srcAdm, c.Source); err != nil {
		return err
	}
	if err := reachable(ctx, tgtAdm, c.Target); err != nil {
		return err
	}

	if v := c.SourceConsumer["isolation.level"]; v != "" && v != "read_committed" {
		f.log.Warn("ignoring isolation.level: kmirror copies only committed records", "value", v)
	}
	startAtEnd := c.SourceConsumer["auto.offset.reset"] == "latest"
	copts := []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	}
	group := GroupID(c)
	hooks := &groupHooks{remotes: make(map[string]string)}
	if group != "" {
		if ExactlyOnce(c) {
			return fmt.Errorf("flow %s: exactly-once with several workers (%s) is not supported yet; run one worker per flow", c.Name(), WorkersKey)
		}
		copts = append(copts, hooks.options(group, c.SourceConsumer)...)
		f.log.Info("workers share this flow through a consumer group on the source", "group", group)
	}
	consumer, _, err := f.client("replication-consumer", clients.Consumer, c.SourceConsumer, copts...)
	if err != nil {
		return err
	}
	eos := ExactlyOnce(c)
	popts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())}
	if eos {
		popts = append(popts, kgo.TransactionalID(TransactionalID(c)))
	}
	producer, _, err := f.client("replication-producer", clients.Producer, c.TargetProducer, popts...)
	if err != nil {
		return err
	}
	usePT := Passthrough(c) && !eos && !f.opts.AddOrigin && group == ""
	byCodec, err := f.codecProducers(eos || usePT, popts)
	if err != nil {
		return err
	}
	// Progress written outside the record path (revoked partitions,
	// re-created topics) cannot use a transactional producer.
	storeProducer := producer
	if eos {
		if storeProducer, _, err = f.client("progress-producer", clients.Producer, c.TargetProducer, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
			return err
		}
		f.log.Info("exactly-once: records and progress are written in transactions", "transactional_id", TransactionalID(c))
	}

	store, err := progress.Open(ctx, tgtAdm, tgtConn, storeProducer, progress.Options{
		Topic:             c.OffsetStorageTopic,
		Source:            c.Source,
		Partitions:        c.OffsetStoragePartitions,
		ReplicationFactor: c.OffsetStorageReplicationFactor,
	}, f.log)
	if err != nil {
		return fmt.Errorf("flow %s: %w", c.Name(), err)
	}

	var syncs *offsetsync.Writer
	if c.EmitOffsetSyncsEnabled {
		syncs, err = f.offsetSyncs(ctx, pol, srcAdm, tgtAdm)
		if err != nil {
			return err
		}
	}

	limiter, err := throttleOf(c)
	if err != nil {
		return err
	}
	var rep dataPath
	if usePT {
		f.log.Info("passthrough: source batches are forwarded without recompression")
		rep = passthrough.New(passthrough.Config{
			SourceAlias: c.Source, TargetAlias: c.Target,
			Source: consumer, SourceAdmin: srcAdm,
			Target: producer, TargetAdmin: tgtAdm,
			Progress: store, Syncs: syncs,
			StartAtEnd: startAtEnd,
			Throttle:   limiter,
			Metrics:    f.m, Log: f.log,
		})
	} else {
		rep = replicate.New(replicate.Config{
			SourceAlias:   c.Source,
			TargetAlias:   c.Target,
			Source:        consumer,
			SourceAdmin:   srcAdm,
			Target:        producer,
			ByCodec:       byCodec,
			Progress:      store,
			Syncs:         syncs,
			StartAtEnd:    startAtEnd,
			AddOrigin:     f.opts.AddOrigin,
			Throttle:      limiter,
			Transactional: eos,
			Group:         group != "",
			Remote:        hooks.remote,
			Metrics:       f.m,
			Log:           f.log,
		})
	}
	if r, ok := rep.(*replicate.Replicator); ok {
		hooks.rep = r
	}
	syncer := &topicsync.Syncer{
		Source:                srcAdm,
		Target:                tgtAdm,
		SourceAlias:           c.Source,
		TargetAlias:           c.Target,
		Policy:                pol,
		Topics:                topics,
		HeartbeatsReplication: c.HeartbeatsReplicationEnabled,
		ReplicationFactor:     c.ReplicationFactor,
		ConfigExclude:         exclude,
		DefaultsFromSource:    c.Settings["use.defaults.from"] == "source",
		Log:                   f.log,
	}
	assigned := make(map[progress.TP]bool)
	refresh := func() error {
		ts, err := syncer.Sync(ctx)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if err := f.checkTopicID(ctx, store, rep, assigned, t, group != ""); err != nil {
				return err
			}
		}
		if group != "" {
			f.subscribe(consumer, producer, hooks, ts)
			return nil
		}
		var add []replicate.Partition
		live := make(map[progress.TP]bool)
		for _, t := range ts {
			for p := int32(0); p < t.Partitions; p++ {
				tp := progress.TP{Topic: t.Name, Partition: p}
				live[tp] = true
				if t.Ready && !assigned[tp] {
					add = append(add, replicate.Partition{TP: tp, Remote: t.Remote})
					assigned[tp] = true
				}
			}
		}
		var gone []progress.TP
		for tp := range assigned {
			if !live[tp] {
				gone = append(gone, tp)
				delete(assigned, tp)
			}
		}
		if len(gone) > 0 {
			f.log.Info("source partitions gone; no longer replicated", "count", len(gone))
			if err := rep.Revoke(ctx, gone); err != nil {
				return err
			}
		}
		if len(add) > 0 {
			// Remote partitions may be new: let the producer see them.
			producer.ForceMetadataRefresh()
		}
		rep.Assign(add)
		return nil
	}
	if err := refresh(); err != nil {
		return fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	f.mu.Lock()
	f.rep = rep
	f.mu.Unlock()

	var hb *heartbeat.Emitter
	if c.EmitHeartbeatsEnabled {
		if hb, err = f.heartbeats(ctx, pol, tgtAdm); err != nil {
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
	if cp != nil {
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
		interval := flushInterval(c)
		last := time.Now()
		f.every(loops, min(interval, 50*time.Millisecond), func() {
			if time.Since(last) < interval && rep.AckedSinceCommit() < CommitRecords {
				return
			}
			last = time.Now()
			if err := rep.Commit(loops); err != nil && loops.Err() == nil {
				f.log.Warn("saving progress failed; retrying at the next interval", "err", err)
			}
		})
	}()
	if c.RefreshTopicsEnabled && c.RefreshTopicsInterval > 0 {
		go f.every(loops, c.RefreshTopicsInterval, func() {
			if err := refresh(); err != nil && loops.Err() == nil {
				f.log.Warn("refreshing topics failed; retrying at the next interval", "err", err)
			}
		})
	}
	// Topic configs and ACLs follow the source, at start and on their
	// intervals, as MM2's syncTopicConfigs and syncTopicAcls do.
	for _, job := range []struct {
		on   bool
		d    time.Duration
		name string
		fn   func(context.Context) error
	}{
		{c.SyncTopicConfigsEnabled, c.SyncTopicConfigsInterval, "topic configs", syncer.SyncConfigs},
		{c.SyncTopicACLsEnabled, c.SyncTopicACLsInterval, "topic ACLs", syncer.SyncACLs},
	} {
		if !job.on || job.d <= 0 {
			continue
		}
		run := func() {
			if err := job.fn(loops); err != nil && loops.Err() == nil {
				f.log.Warn("syncing "+job.name+" failed; retrying at the next interval", "err", err)
			}
		}
		go func() { run(); f.every(loops, job.d, run) }()
	}
	f.log.Info("flow started", "source", c.Source, "target", c.Target, "partitions", len(assigned))
	err = rep.Run(loops, f.opts.Drain)
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

// checkTopicID notices a source topic that was deleted and re-created under
// the same name: its saved progress belongs to the old topic. The new topic
// is replicated from its start; whatever the old topic held past the saved
// progress and was not copied is gone, and that is reported.
func (f *Flow) checkTopicID(ctx context.Context, store *progress.Store, rep dataPath, assigned map[progress.TP]bool, t topicsync.Topic, grouped bool) error {
	if t.ID == "" || !t.Ready {
		return nil
	}
	old, ok := store.TopicID(t.Name)
	if ok && old == t.ID {
		return nil
	}
	if ok {
		var mine []progress.TP
		for tp := range assigned {
			if tp.Topic == t.Name {
				mine = append(mine, tp)
				delete(assigned, tp)
			}
		}
		if r, ok := rep.(*replicate.Replicator); ok && grouped {
			r.RewindTopic(ctx, t.Name)
		} else if err := rep.Revoke(ctx, mine); err != nil {
			return err
		}
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
		if err := store.Save(ctx, reset); err != nil {
			return err
		}
	}
	return store.SaveTopicID(ctx, t.Name, t.ID)
}

// heartbeats prepares the emitter of this flow's heartbeats: the topic is
// created now, so a bad replication factor stops the flow at start.
func (f *Flow) heartbeats(ctx context.Context, pol policy.Policy, tgtAdm *kadm.Client) (*heartbeat.Emitter, error) {
	c := f.cfg
	cl, _, err := f.client("heartbeats-producer", clients.Producer, c.TargetProducer, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	hb := heartbeat.New(cl, tgtAdm, pol.HeartbeatsTopic(), c.Source, c.Target, c.HeartbeatsTopicReplicationFactor, c.EmitHeartbeatsInterval, f.log)
	if err := hb.CreateTopic(ctx); err != nil {
		return nil, fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	return hb, nil
}

// offsetSyncs creates the offset-syncs topic where offset-syncs.topic.location
// says and returns a writer with a producer of its own.
func (f *Flow) offsetSyncs(ctx context.Context, pol policy.Policy, srcAdm, tgtAdm *kadm.Client) (*offsetsync.Writer, error) {
	c := f.cfg
	adm, props, alias, role := tgtAdm, c.TargetProducer, c.Source, "offset-syncs-target-producer"
	if c.OffsetSyncsTopicLocation == "source" {
		// The source connection keys are what the producer needs here.
		adm, props, alias, role = srcAdm, c.SourceAdmin, c.Target, "offset-syncs-source-producer"
	}
	topic := pol.OffsetSyncsTopic(alias)
	if _, err := internaltopic.Create(ctx, adm, internaltopic.Compacted(topic, c.OffsetSyncsTopicReplicationFactor, "offset-syncs.topic.replication.factor")); err != nil {
		return nil, fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	cl, _, err := f.client(role, clients.Producer, props, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	failed := f.m.OffsetSyncFailures.WithLabelValues(c.Source, c.Target)
	w := offsetsync.New(cl, topic, c.OffsetLagMax, f.log, failed.Inc)
	// Exact translation also writes an index on the target, through a
	// producer that carries no replicated data (Flush waits on it).
	idx := cl
	if c.OffsetSyncsTopicLocation == "source" {
		if idx, _, err = f.client("offset-index-producer", clients.Producer, c.TargetProducer, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
			return nil, err
		}
	}
	if err := checkpoint.SetupWriter(ctx, c, w, tgtAdm, idx); err != nil {
		return nil, fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	return w, nil
}

// reachable checks that a cluster answers, so that a wrong address or
// credentials fail at start with the cluster's name.
func reachable(ctx context.Context, adm *kadm.Client, alias string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := adm.BrokerMetadata(ctx); err != nil {
		return fmt.Errorf("cluster %s is unreachable or refuses kmirror: %w", alias, err)
	}
	return nil
}

func flushInterval(c *config.Flow) time.Duration {
	if v, ok := c.Worker["offset.flush.interval.ms"]; ok {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return DefaultFlushInterval
}

func (f *Flow) every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

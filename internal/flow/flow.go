// Package flow runs one replication flow (source->target) of an MM2
// configuration: topic sync, the data path (internal/passthrough), progress
// and offset syncs.
package flow

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/heartbeat"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/progress"
)

// CommitRecords is how many acknowledged records make progress be saved
// before the flush interval is up.
const CommitRecords = 5000

// Options tune a flow beyond its configuration.
type Options struct {
	// AddOrigin writes the provenance header; see datapath.OriginHeader.
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

	prodMu    sync.Mutex
	producers []*kgo.Client // producers on the target that write replicated records or progress

	mu     sync.Mutex
	rep    datapath.Engine // set once Run has assigned partitions
	parts  *datapath.Table // with rep: the state of its partitions and of those not in it yet
	store  *progress.Store // with rep
	paused bool            // Pause is in effect
}

// Partitions returns the state of the flow's partitions; nil before the
// flow has started replicating.
func (f *Flow) Partitions() []datapath.PartitionStatus {
	f.mu.Lock()
	rep, parts := f.rep, f.parts
	f.mu.Unlock()
	if rep == nil {
		return nil
	}
	return parts.Status(rep)
}

// Problem says what keeps the flow from working as it should although it
// runs (its progress topic missing on the target), or "".
func (f *Flow) Problem() string {
	f.mu.Lock()
	store := f.store
	f.mu.Unlock()
	if store == nil {
		return ""
	}
	return store.Problem()
}

// Pause stops fetching from the source until Resume; it reports whether
// the flow was replicating.
func (f *Flow) Pause() bool { return f.pause(true) }

// Resume undoes Pause.
func (f *Flow) Resume() bool { return f.pause(false) }

func (f *Flow) pause(on bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rep == nil {
		return false
	}
	f.paused = on
	f.rep.Pause(on)
	return true
}

// Paused reports whether the flow is paused.
func (f *Flow) Paused() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rep != nil && f.paused
}

func (f *Flow) replicator() datapath.Engine {
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
	cl, opts, err := clients.New(clients.ID(f.cfg.Name(), role), kind, props, extra...)
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s, %s client: %w", f.cfg.Name(), role, err)
	}
	f.closers = append(f.closers, cl.Close)
	if kind == clients.Producer && (strings.HasPrefix(role, "replication-producer") || role == "progress-producer") {
		f.prodMu.Lock()
		f.producers = append(f.producers, cl)
		f.prodMu.Unlock()
	}
	return cl, opts, nil
}

// forget makes the flow's producers forget topics that were deleted and
// created again on the target: kgo keeps the topic ID it first saw and
// fails with UNKNOWN_TOPIC_ID until the topic is purged from it. Records
// buffered for them fail and their partitions restart from their last
// acknowledged record. keep, if set, is left as it is.
func (f *Flow) forget(keep *kgo.Client, topics ...string) {
	f.prodMu.Lock()
	ps := slices.Clone(f.producers)
	f.prodMu.Unlock()
	for _, cl := range ps {
		if cl != keep {
			cl.PurgeTopicsFromProducing(topics...)
		}
	}
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
	r := &running{f: f, c: f.cfg, plan: PlanOf(f.cfg, f.opts.AddOrigin), assigned: make(map[progress.TP]bool), kick: make(chan struct{}, 1), looked: make(map[progress.TP]bool)}
	if err := r.connect(ctx); err != nil {
		return err
	}
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.firstRefresh(ctx); err != nil {
		return fmt.Errorf("flow %s: %w", r.c.Name(), err)
	}
	f.mu.Lock()
	f.rep, f.parts, f.store = r.rep, r.parts, r.store
	f.mu.Unlock()
	return r.run(ctx)
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
	if c.ExactlyOnce {
		// Syncs wait for the commit that covers them (the engines
		// flush after committing): none points at an open or aborted
		// transaction.
		w.HoldUntilFlush()
	}
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

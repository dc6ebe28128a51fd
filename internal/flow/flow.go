// Package flow runs one replication flow (source->target) of an MM2
// configuration: topic sync, the record path, progress and offset syncs.
package flow

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
	"github.com/kmirror/kmirror/internal/throttle"
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
		// gzip and zstd at their fastest levels: recompressing at the
		// default levels cost more CPU than everything else together
		// (docs/benchmarks.md).
		{0, "none", kgo.NoCompression()}, {1, "gzip", kgo.GzipCompression().WithLevel(1)}, {2, "snappy", kgo.SnappyCompression()},
		{3, "lz4", kgo.Lz4Compression()}, {4, "zstd", kgo.ZstdCompression().WithLevel(1)},
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

// PassthroughKey chooses a flow's data path. Passthrough forwards source
// batches to the target as they are, without decompression and
// recompression; the record path decodes and re-encodes every record.
// "auto" (the default) and "true" use passthrough wherever the flow needs
// no per-record work: not exactly-once, no provenance header, no
// compression.type of its own for the target producer. "false" always uses
// the record path.
const PassthroughKey = "kmirror.passthrough.enabled"

// passthroughMode reads PassthroughKey: on is false only for "false".
func passthroughMode(c *config.Flow) (on bool, err error) {
	switch v := strings.ToLower(strings.TrimSpace(c.Settings[PassthroughKey])); v {
	case "", "auto", "true":
		return true, nil
	case "false":
		return false, nil
	default:
		raw, line := c.Position(PassthroughKey)
		return false, &config.Error{File: c.File(), Line: line, Key: raw, Msg: fmt.Sprintf("want true, false or auto, not %q", v)}
	}
}

// dataPath decides between passthrough and the record path, and says why
// when a flow that may use passthrough cannot.
func dataPathOf(c *config.Flow, eos, addOrigin bool) (passthrough bool, why string, err error) {
	on, err := passthroughMode(c)
	switch {
	case err != nil:
		return false, "", err
	case !on:
		return false, PassthroughKey + " = false", nil
	case eos:
		return false, "exactly-once", nil
	case addOrigin:
		return false, "the provenance header is written", nil
	case c.TargetProducer["compression.type"] != "":
		return false, "the target producer sets compression.type", nil
	}
	return true, "", nil
}

// FetchesKey is how many fetches a flow keeps in flight to each source
// broker, each on its own connection and for its share of the partitions
// (1 to MaxFetches). A Kafka broker answers the requests of one connection
// one at a time, so with one fetch a long round trip leaves the link idle
// between a response and the next request; Kafka's own followers use
// num.replica.fetchers the same way. The default is DefaultFetches on
// passthrough and DefaultRecordFetches on the record path, where each lane
// is a whole consumer: measured locally, a second one cost about a quarter
// more CPU and a tenth more memory for no gain without a long round trip.
const FetchesKey = "kmirror.fetches.per.broker"

// Bounds and defaults of FetchesKey.
const (
	DefaultFetches       = 2
	DefaultRecordFetches = 1
	MaxFetches           = 8
)

func fetchesOf(c *config.Flow, passthrough bool) (int, error) {
	v, ok := c.Settings[FetchesKey]
	if !ok || v == "" {
		if !passthrough {
			return DefaultRecordFetches, nil
		}
		return DefaultFetches, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxFetches {
		raw, line := c.Position(FetchesKey)
		return 0, &config.Error{File: c.File(), Line: line, Key: raw, Msg: fmt.Sprintf("want a whole number from 1 to %d, not %q", MaxFetches, v)}
	}
	return n, nil
}

// StartGroupKey names a consumer group on the source whose committed
// offsets are where partitions without progress start (what `kmirror mm1`
// sets from MM1's group.id). kmirror commits nothing to that group.
const StartGroupKey = "kmirror.start.from.group"

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

// DefaultPartitionFetchMaxBytes bounds one partition of a fetch response
// when max.partition.fetch.bytes is not set. Java's 1 MiB binds a partition
// to 1 MiB per round trip, which over a WAN link with few partitions is the
// whole throughput; franz-go rotates the partitions of its fetches, so a
// larger share per partition starves none.
const DefaultPartitionFetchMaxBytes = DefaultFetchMaxBytes / 2

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
// smaller than Java's 50 MiB unless fetch.max.bytes says otherwise; a
// partition may fill half of one (see DefaultPartitionFetchMaxBytes).
//
// Metadata may be asked for again after half a second instead of franz-go's
// five: remote topics are created by the flow itself and the data paths
// must see them at once.
func roleDefaults(kind clients.Role, props map[string]string) []kgo.Opt {
	opts := []kgo.Opt{kgo.MetadataMinAge(500 * time.Millisecond)}
	if kind == clients.Consumer {
		if _, ok := props["fetch.max.bytes"]; !ok {
			opts = append(opts, kgo.FetchMaxBytes(DefaultFetchMaxBytes))
		}
		if _, ok := props["max.partition.fetch.bytes"]; !ok {
			opts = append(opts, kgo.FetchMaxPartitionBytes(DefaultPartitionFetchMaxBytes))
		}
	}
	return opts
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
	r := &running{f: f, c: f.cfg, assigned: make(map[progress.TP]bool)}
	if err := r.connect(ctx); err != nil {
		return err
	}
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.refresh(ctx); err != nil {
		return fmt.Errorf("flow %s: %w", r.c.Name(), err)
	}
	f.mu.Lock()
	f.rep = r.rep
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

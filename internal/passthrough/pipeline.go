// Package passthrough is kmirror's data path, the batch engine: it copies
// the record batches of assigned source partitions to the same partition
// of their remote topics, one source batch at a time. Where the flow
// allows, a batch goes out as it is, without decompressing or
// recompressing it: only the header fields the target needs are
// rewritten: producer ID, epoch and base sequence of kmirror's idempotent
// producer, the cleared transactional bit, and the CRC.
//
// The franz-go clients serve as transport and metadata only: fetches
// (read_committed, filtered here as Kafka's consumer does), produces
// (idempotent, acks=all, up to five batches of a partition in flight, each
// in its own request) and InitProducerID are raw kmsg requests, one per
// broker for all its partitions.
//
// A batch that cannot go out as it is (message format v0/v1,
// LogAppendTime, holes in its offsets, larger than the target accepts, or
// one that starts before the resume offset) is decoded and re-encoded
// with the same codec, with kmsg's record and batch encoding and
// franz-go's compressors. Three flow settings re-encode more: the
// provenance header (Config.AddOrigin) and the re-encode mode
// (Config.ReencodeAll, kmirror.passthrough.enabled = false) every batch,
// a target codec (Config.Codec) every batch compressed otherwise.
//
// A Pipeline is a datapath.Engine: progress, offset syncs and exactly-once
// (txn.go, slot.go) are the same in every mode.
package passthrough

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/throttle"
)

// Defaults of the tuning fields of Config.
const (
	DefaultFetchMaxBytes = 16 << 20
	// DefaultPartitionMaxBytes is the least a partition may fill of a
	// fetch when Config.PartitionMaxBytes is not set; the share grows to
	// FetchMaxBytes divided by the partitions fetched from the broker, up
	// to MaxAutoPartitionBytes, so that few partitions over a long round
	// trip are not bound to 1 MiB per round trip.
	DefaultPartitionMaxBytes = 1 << 20
	MaxAutoPartitionBytes    = 16 << 20
	DefaultBufferBytes       = 64 << 20
	DefaultFetchMaxWait      = 500 * time.Millisecond
	// defaultMaxMessageBytes is Kafka's default max.message.bytes, used
	// until the target topic's own value is known.
	defaultMaxMessageBytes = 1048588
	// produceMaxBytes bounds the batches of one produce request.
	produceMaxBytes = 8 << 20
	// brokerInflight bounds the produce requests in flight per broker.
	brokerInflight = 5
	// partInflight bounds the batches of one partition in flight: Kafka
	// keeps the last five batches of an idempotent producer per partition
	// to recognize a resent one (max.in.flight.requests.per.connection <= 5).
	partInflight = 5
	// producerStateTTL is how long after its last acknowledgement a
	// partition's producer state is trusted to be on the target (Kafka
	// keeps it producer.id.expiration.ms, one day by default).
	producerStateTTL = time.Hour
)

// Config is what a Pipeline needs.
type Config struct {
	SourceAlias, TargetAlias string
	// Source is any client of the source cluster; only its connections
	// and metadata are used.
	Source *kgo.Client
	// MoreSources are further clients of the source cluster. Each adds a
	// fetch in flight per source broker on its own connection (a broker
	// answers the requests of one connection one at a time), for the
	// share of the partitions whose lane it is: over a long round trip
	// one fetch at a time leaves the link idle while a request travels.
	MoreSources []*kgo.Client
	// SourceAdmin lists offsets and reads source metadata.
	SourceAdmin *kadm.Client
	// Target is any client of the target cluster; only its connections
	// and metadata are used.
	Target *kgo.Client
	// TargetAdmin reads target metadata and topic configs; nil means
	// kadm.NewClient(Target).
	TargetAdmin *kadm.Client
	Progress    *progress.Store
	// Syncs receives every acknowledged (upstream, downstream) pair; nil
	// disables offset syncs.
	Syncs *offsetsync.Writer
	// StartAtEnd starts partitions without progress at the log end.
	StartAtEnd bool
	// Throttle bounds the bytes per second sent to the target; nil is no
	// limit.
	Throttle *throttle.Limiter
	// AddOrigin writes datapath.OriginHeader on records that lack it and
	// drops records that came from the target. It forces every batch
	// through decode and re-encode.
	AddOrigin bool
	// ReencodeAll decodes and re-encodes every batch: none goes to the
	// target as it is (kmirror.passthrough.enabled = false).
	ReencodeAll bool
	// Codec, if set, is the compression the target gets (the target
	// producer's compression.type: none, gzip, snappy, lz4 or zstd): a
	// batch compressed otherwise is re-encoded with it, at the codec's
	// default level. Empty keeps each batch's own codec.
	Codec   string
	Metrics *metrics.Metrics
	Log     *slog.Logger

	// FetchMaxBytes bounds one fetch response, PartitionMaxBytes one
	// partition of it, BufferBytes what is fetched and not yet
	// acknowledged by the target. Zero means the default; for
	// PartitionMaxBytes that is FetchMaxBytes shared by the partitions of
	// a fetch, between DefaultPartitionMaxBytes and MaxAutoPartitionBytes.
	FetchMaxBytes, PartitionMaxBytes int32
	BufferBytes                      int64
	FetchMaxWait                     time.Duration

	// TransactionalID, when set, makes the producer transactional with
	// this ID: exactly-once (txn.go).
	TransactionalID string
	// Slots, in exactly-once mode with several workers, spreads the
	// partitions over this many slots (internal/slots), each a
	// transaction of its own with the transactional ID
	// slots.TransactionalID(TransactionalID, slot), taken by Fence.
	Slots int
	// TopicGone, if set, is called when producing to a remote topic
	// failed because the target does not know it (kafkaerr.TopicGone):
	// deleted on the target, topic sync makes it again.
	TopicGone func(remote string)
}

// Pipeline runs the passthrough path of one flow.
type Pipeline struct {
	datapath.Core
	cfg  Config
	tadm *kadm.Client
	dec  kgo.Decompressor
	enc  *encoder // the source codec again, at the fastest levels
	// codec is Config.Codec's codec, or -1 to keep the source's; encTo
	// encodes it.
	codec int8
	encTo *encoder
	wakeC chan struct{}
	// txnDue is CommitDue's channel in exactly-once mode (txnAged).
	txnDue chan struct{}
	wg     sync.WaitGroup
	// stopping ends when Run stops the request loop: decompressions on
	// the ack path (value byte samples) give up then (stoppable).
	stopping context.Context
	stopNow  context.CancelFunc

	// mu is the partition table's lock: it guards the fields below,
	// produceSide and txnSide embedded here, and the fields of every
	// partition but those fetcher owns. fetcher and producer have locks
	// of their own, taken after mu or alone (DESIGN.md, lock order).
	mu       sync.Mutex
	parts    map[progress.TP]*partition
	sorted   []*partition // parts by topic and partition, for Status; nil after parts changed
	lastMeta time.Time
	// The partitions maintain looks at: unresolved (no position) and
	// oor (out of range); moved, those whose progress may differ from
	// what Commit last saved.
	unresolved, oor, moved map[*partition]struct{}
	buffered               int64 // bytes of queued batches
	stats                  stats
	// needMeta asks the next pass for a metadata refresh; any side sets it.
	needMeta atomic.Bool
	// legacySeen holds the partitions already logged as having message
	// format v0/v1 (legacy.go).
	legacySeen sync.Map

	fetcher     fetcher  // fetch.go, session.go: its own lock
	producer    producer // produce.go: requests in flight, its own lock
	produceSide          // produce.go: the producer ID, under mu
	txnSide              // txn.go, slot.go
}

// produceSide is the idempotent producer's ID and the partitions a
// produce pass looks at. They go with the partitions' sequences, so mu
// guards them: a new producer ID resets every sequence in the same
// section (newProducerLocked).
type produceSide struct {
	pid     int64 // idempotent producer (not exactly-once): -1 until InitProducerID answered
	epoch   int16
	needPID bool
	// sendable holds the partitions a produce pass looks at: queued
	// batches or a stop to make.
	sendable map[*partition]struct{}
	// seqs keeps, per partition that left the Pipeline, its producer
	// and next sequence: given back, it goes on from there (assign).
	seqs map[progress.TP]seqMark
}

// producer is the produce side toward the target brokers: the requests
// in flight per broker (and transaction) and the order they are issued
// in. Its mu guards its fields; it is taken after pl.mu or alone, and
// no other lock is taken under it.
type producer struct {
	mu        sync.Mutex
	producing map[lineKey]int // produce requests in flight
	produceIn int
	// issued is, per target broker, closed once the last produce request
	// issued to it is queued in franz-go: the next waits for it, so
	// requests reach a broker in the order they were built.
	issued map[int32]chan struct{}
}

// inFlight returns the produce requests in flight.
func (pr *producer) inFlight() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.produceIn
}

// inFlightTo returns the produce requests in flight on line k. Only the
// request loop adds requests, so the count can only fall until it
// issues those it is building.
func (pr *producer) inFlightTo(k lineKey) int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.producing[k]
}

// seqMark is where a partition's sequences stood when it left.
type seqMark struct {
	pid   int64
	epoch int16
	next  int32
}

// txnSide is the Pipeline's exactly-once state. The map and each
// transaction's data-path fields are the partition table's (pl.mu); a
// transaction's commits have its own commitMu; fatal is atomic.
type txnSide struct {
	// txns are the transactions by slot (0 without slots).
	txns map[int]*txnState
	// fatal is what stopped the Pipeline for good.
	fatal atomic.Pointer[error]
}

// stats count what tests want to know happened; pl.mu guards them
// (fetchStats: the fetcher's lock).
type stats struct {
	maxInflight int // most batches of one partition in flight at once
	laterErrs   int // errors on batches that were not the oldest unacknowledged
	pids        int // producer IDs obtained
}

// New returns a Pipeline; call Run to start it.
func New(cfg Config) *Pipeline {
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	auto := cfg.PartitionMaxBytes <= 0
	if auto {
		cfg.PartitionMaxBytes = DefaultPartitionMaxBytes
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = DefaultFetchMaxWait
	}
	tadm := cfg.TargetAdmin
	if tadm == nil {
		tadm = kadm.NewClient(cfg.Target)
	}
	pl := &Pipeline{
		Core: datapath.Core{
			SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias, SourceAdmin: cfg.SourceAdmin,
			Progress: cfg.Progress, Syncs: cfg.Syncs, Metrics: cfg.Metrics, Log: cfg.Log,
		},
		cfg:        cfg,
		tadm:       tadm,
		dec:        decompressorOf(cfg.Source),
		enc:        newEncoder(true),
		codec:      -1,
		wakeC:      make(chan struct{}, 1),
		txnDue:     make(chan struct{}, 1),
		parts:      make(map[progress.TP]*partition),
		unresolved: make(map[*partition]struct{}),
		oor:        make(map[*partition]struct{}),
		moved:      make(map[*partition]struct{}),
		fetcher: fetcher{
			maxBytes: cfg.FetchMaxBytes, partMaxBytes: cfg.PartitionMaxBytes, autoPart: auto,
			maxWait: cfg.FetchMaxWait, log: cfg.Log,
			sources:  append([]*kgo.Client{cfg.Source}, cfg.MoreSources...),
			lanes:    make(map[lane]*laneState),
			sessOf:   make(map[progress.TP]*laneState),
			srcNames: make(map[[16]byte]string),
			dirty:    make(map[*partition]struct{}),
			waiting:  make(map[*partition]struct{}),
		},
		producer: producer{
			issued:    make(map[int32]chan struct{}),
			producing: make(map[lineKey]int),
		},
		produceSide: produceSide{
			pid:      -1,
			sendable: make(map[*partition]struct{}),
			seqs:     make(map[progress.TP]seqMark),
		},
	}
	pl.stopping, pl.stopNow = context.WithCancel(context.Background())
	if pl.eos() {
		pl.txns = make(map[int]*txnState)
	}
	if cfg.Codec != "" {
		c, ok := ParseCodec(cfg.Codec)
		if ok {
			pl.codec, pl.encTo = int8(c), newEncoder(false)
		} else {
			cfg.Log.Warn("passthrough: unknown target compression; batches keep their source codec", "compression", cfg.Codec)
		}
	}
	return pl
}

// ParseCodec returns the codec of a compression.type value.
func ParseCodec(name string) (kgo.CompressionCodecType, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "none":
		return kgo.CodecNone, true
	case "gzip":
		return kgo.CodecGzip, true
	case "snappy":
		return kgo.CodecSnappy, true
	case "lz4":
		return kgo.CodecLz4, true
	case "zstd":
		return kgo.CodecZstd, true
	}
	return 0, false
}

// forwards reports whether the flow lets a batch with attributes attrs go
// out as it is: no provenance header to write, not every batch re-encoded,
// and the codec the target gets.
func (pl *Pipeline) forwards(attrs int16) bool {
	return !pl.cfg.AddOrigin && !pl.cfg.ReencodeAll && (pl.codec < 0 || int8(attrs&attrCodec) == pl.codec)
}

// reencodes reports whether the flow re-encodes batches by its settings.
func (pl *Pipeline) reencodes() bool {
	return pl.cfg.AddOrigin || pl.cfg.ReencodeAll || pl.codec >= 0
}

// encoderFor returns the encoder and codec for the records of a batch
// compressed with src.
func (pl *Pipeline) encoderFor(src kgo.CompressionCodecType) (*encoder, kgo.CompressionCodecType) {
	if pl.codec >= 0 {
		return pl.encTo, kgo.CompressionCodecType(pl.codec)
	}
	return pl.enc, src
}

func (pl *Pipeline) wake() {
	select {
	case pl.wakeC <- struct{}{}:
	default:
	}
}

// Run fetches from the source and produces to the target until ctx ends,
// then stops fetching, waits up to drain for the fetched batches to reach
// the target, and saves progress one last time.
func (pl *Pipeline) Run(ctx context.Context, drain time.Duration) error {
	// Produce requests have their own context, so that stopping lets
	// fetched batches reach the target.
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	pass := time.NewTimer(busyPass)
	defer pass.Stop()
	for ctx.Err() == nil && pl.Fatal() == nil {
		pl.maintain(ctx, pctx)
		pl.startFetches(ctx)
		pl.startProduces(pctx)
		if pl.quiet(time.Now()) {
			pass.Reset(quietPass)
		} else {
			pass.Reset(busyPass)
		}
		select {
		case <-ctx.Done():
		case <-pl.wakeC:
		case <-pass.C:
		}
	}
	pl.stopNow()
	tick := time.NewTicker(busyPass)
	defer tick.Stop()
	if err := pl.Fatal(); err != nil {
		pcancel()
		pl.wg.Wait()
		return err // never writes again
	}
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var drainErr error
	for !pl.idle() && pl.Fatal() == nil {
		pl.maintain(dctx, pctx)
		pl.startProduces(pctx)
		select {
		case <-dctx.Done():
			drainErr = fmt.Errorf("waiting for batches in flight: %w", dctx.Err())
		case <-pl.wakeC:
		case <-tick.C:
		}
		if drainErr != nil {
			break
		}
	}
	pcancel()
	pl.wg.Wait()
	pl.fetcher.closeSessions()
	cctx, ccancel := context.WithTimeout(context.Background(), max(drain/2, 5*time.Second))
	defer ccancel()
	return errors.Join(drainErr, pl.Commit(cctx))
}

// The request loop makes a pass at every wake (a fetch or produce
// answered, partitions assigned or restarted, Resume) and at least every
// busyPass, or every quietPass while nothing waits for a time to come.
const (
	busyPass  = 100 * time.Millisecond
	quietPass = time.Second
)

// quiet reports whether no partition, lane or producer waits for a time
// to come (a retry, a backoff) or for a pass to send what it has: every
// other change comes with a wake. Exactly-once is never quiet.
func (pl *Pipeline) quiet(now time.Time) bool {
	if pl.eos() || pl.needMeta.Load() || pl.producer.inFlight() > 0 || !pl.fetcher.quiet(now, pl.Paused()) {
		return false
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.pid >= 0 && !pl.needPID && len(pl.sendable)+len(pl.unresolved)+len(pl.oor) == 0
}

// idle reports whether nothing is in flight and nothing waits to be sent.
func (pl *Pipeline) idle() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.producer.inFlight() > 0 {
		return false
	}
	for p := range pl.sendable {
		if len(p.queue) > 0 && !p.stopped && !p.revoked {
			return false
		}
	}
	return true
}

// maintain does what the request loops need first: a producer ID,
// metadata, start offsets, recovery from out-of-range fetches. Starting
// and aborting transactions run in the background, until bg ends.
func (pl *Pipeline) maintain(ctx, bg context.Context) {
	pl.mu.Lock()
	needPID := !pl.eos() && (pl.pid < 0 || pl.needPID) && pl.producer.inFlight() == 0
	needMeta := pl.needMeta.Load() || time.Since(pl.lastMeta) > 30*time.Second
	var resolve, oor []*partition
	for p := range pl.unresolved {
		if pl.parts[p.tp] != p || p.stopped || p.revoked || p.next >= 0 {
			delete(pl.unresolved, p)
		} else {
			resolve = append(resolve, p)
		}
	}
	for p := range pl.oor {
		if pl.parts[p.tp] != p || p.stopped || p.revoked || !p.outOfRange {
			delete(pl.oor, p)
		} else if p.next >= 0 {
			oor = append(oor, p)
		}
	}
	restart, catchUp := pl.restartsLocked()
	pl.wg.Add(len(restart))
	pl.mu.Unlock()
	for i, t := range restart {
		go pl.restartTxn(bg, t, catchUp[i])
	}
	if needPID {
		pl.initProducerID(ctx)
	}
	if needMeta {
		pl.refreshMetadata(ctx)
	}
	if len(resolve) > 0 {
		pl.resolveStarts(ctx, resolve)
	}
	for _, p := range oor {
		pl.outOfRange(ctx, p)
	}
	if pl.eos() {
		pl.addPartitions(ctx)
	}
}

func (pl *Pipeline) initProducerID(ctx context.Context) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, pl.cfg.Target)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		if ctx.Err() == nil {
			pl.Logs.Warn(pl.cfg.Log, "init producer id|"+err.Error(), "passthrough: cannot get a producer ID from the target; retrying", "err", err)
		}
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.newProducerLocked(resp.ProducerID, resp.ProducerEpoch)
	pl.cfg.Log.Debug("passthrough producer ID", "id", resp.ProducerID, "epoch", resp.ProducerEpoch)
}

// newProducerLocked starts the idempotent producer ID pid at epoch: every
// sequence starts at 0.
func (pl *Pipeline) newProducerLocked(pid int64, epoch int16) {
	pl.pid, pl.epoch, pl.needPID = pid, epoch, false
	pl.stats.pids++
	for _, p := range pl.parts {
		p.resetSeqLocked()
	}
}

// refreshMetadata learns leaders, leader epochs and topic IDs on both
// sides and the target topics' max.message.bytes. The periodic refresh
// asks a broker straight (clients.Metadata); one that something asked
// for (an error, new partitions) goes through the clients, which then
// learn of brokers new to them.
func (pl *Pipeline) refreshMetadata(ctx context.Context) {
	pl.mu.Lock()
	periodic := !pl.needMeta.Swap(false)
	pl.lastMeta = time.Now()
	srcSet, dstSet := map[string]bool{}, map[string]bool{}
	for _, p := range pl.parts {
		srcSet[p.tp.Topic], dstSet[p.remote] = true, true
	}
	pl.mu.Unlock()
	if len(srcSet) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	src, err1 := metadata(rctx, pl.cfg.Source, keys(srcSet), periodic)
	dst, err2 := metadata(rctx, pl.cfg.Target, keys(dstSet), periodic)
	maxBytes, err3 := pl.targetMaxBytes(rctx, keys(dstSet))
	if err := errors.Join(err1, err2); err != nil {
		if ctx.Err() == nil {
			pl.Logs.Warn(pl.cfg.Log, "metadata|"+err.Error(), "passthrough: metadata refresh failed; retrying", "err", err)
		}
		pl.needMeta.Store(true)
		return
	}
	if err3 != nil {
		maxBytes = nil // keep what is known
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.fetcher.learnNames(src)
	for _, p := range pl.parts {
		was := [...]int32{p.srcLeader, p.srcEpoch}
		wasID := p.srcID
		p.srcLeader, p.tgtLeader = -1, -1
		if t, ok := src[p.tp.Topic]; ok {
			p.srcID = t.TopicID
			if d := partitionOf(t, p.tp.Partition); d != nil {
				p.srcLeader, p.srcEpoch = d.Leader, d.LeaderEpoch
			}
		}
		if was != [...]int32{p.srcLeader, p.srcEpoch} || wasID != p.srcID {
			pl.touchLocked(p)
		}
		if t, ok := dst[p.remote]; ok {
			if t.TopicID != p.tgtID {
				// A remote topic made again holds no producer
				// state: it takes any first sequence, so until a
				// batch is acknowledged on it, one goes at a time
				// (fillLocked). A CI run found a later batch written
				// before an earlier one the new partition had
				// refused (NOT_LEADER) while both were in flight.
				p.ackPID, p.ackAt = -1, time.Time{}
			}
			p.tgtID = t.TopicID
			if d := partitionOf(t, p.tp.Partition); d != nil {
				p.tgtLeader = d.Leader
			}
		}
		if n, ok := maxBytes[p.remote]; ok {
			p.maxBytes.Store(int64(n))
		}
		if p.srcLeader < 0 || p.tgtLeader < 0 {
			pl.needMeta.Store(true) // try again soon
		}
	}
}

// targetMaxBytes returns the max.message.bytes of the target topics that
// have one above a batch header. It asks for that one key only, without
// synonyms: a topic's full configs are ~40 entries each.
func (pl *Pipeline) targetMaxBytes(ctx context.Context, topics []string) (map[string]int, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, t
		r.ConfigNames = []string{"max.message.bytes"}
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, pl.cfg.Target)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(topics))
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			continue
		}
		for _, c := range r.Configs {
			if c.Name != "max.message.bytes" || c.Value == nil {
				continue
			}
			if n, err := strconv.Atoi(*c.Value); err == nil && n > headerSize {
				out[r.ResourceName] = n
			}
		}
	}
	return out, nil
}

// metadata returns the topics of cl's cluster that answer without error,
// by name; straight from a broker (clients.Metadata) when direct.
func metadata(ctx context.Context, cl *kgo.Client, topics []string, direct bool) (map[string]*kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.MetadataResponse
	var err error
	if direct {
		resp, err = clients.Metadata(ctx, cl, req)
	} else {
		resp, err = req.RequestWith(ctx, cl)
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]*kmsg.MetadataResponseTopic, len(resp.Topics))
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.Topic != nil && t.ErrorCode == 0 {
			out[*t.Topic] = t
		}
	}
	return out, nil
}

// partitionOf returns partition p of t if it answered without error.
func partitionOf(t *kmsg.MetadataResponseTopic, p int32) *kmsg.MetadataResponseTopicPartition {
	ps := t.Partitions
	i := int(p)
	if i >= len(ps) || ps[i].Partition != p { // brokers list them in order, normally
		i = slices.IndexFunc(ps, func(d kmsg.MetadataResponseTopicPartition) bool { return d.Partition == p })
	}
	if i < 0 || ps[i].ErrorCode != 0 {
		return nil
	}
	return &ps[i]
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// resolveStarts sets the fetch position of partitions without progress:
// the log start, or end with StartAtEnd (but for rewound partitions).
func (pl *Pipeline) resolveStarts(ctx context.Context, ps []*partition) {
	var starts, ends []*partition
	for _, p := range ps {
		if pl.cfg.StartAtEnd && !p.fromStart {
			ends = append(ends, p)
		} else {
			starts = append(starts, p)
		}
	}
	pl.resolve(ctx, starts, pl.cfg.SourceAdmin.ListStartOffsets)
	pl.resolve(ctx, ends, pl.cfg.SourceAdmin.ListEndOffsets)
}

// resolve sets the fetch position of ps to the offsets list returns.
func (pl *Pipeline) resolve(ctx context.Context, ps []*partition, list func(context.Context, ...string) (kadm.ListedOffsets, error)) {
	if len(ps) == 0 {
		return
	}
	topics := map[string]bool{}
	for _, p := range ps {
		topics[p.tp.Topic] = true
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	offs, err := list(rctx, keys(topics)...)
	if err != nil {
		if ctx.Err() == nil {
			pl.Logs.Warn(pl.cfg.Log, "list start offsets|"+err.Error(), "passthrough: cannot list start offsets; retrying", "err", err)
		}
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, p := range ps {
		if o, ok := offs.Lookup(p.tp.Topic, p.tp.Partition); ok && o.Err == nil && p.next < 0 {
			p.next = o.Offset
			if p.base < 0 {
				p.base = o.Offset
			}
			p.gen++
			pl.touchLocked(p)
		}
	}
}

// decompressorOf returns the decompressor of cl, bounded by its
// MaxDecompressBatchBytes (kgo.DefaultDecompressor is not).
func decompressorOf(cl *kgo.Client) kgo.Decompressor {
	if cl != nil {
		if d, ok := cl.OptValue(kgo.WithDecompressor).(kgo.Decompressor); ok {
			return d
		}
	}
	return kgo.DefaultDecompressor()
}

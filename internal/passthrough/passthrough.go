// Package passthrough is kmirror's fast data path: it forwards the record
// batches of assigned source partitions to the same partition of their
// remote topics as they are, without decompressing or recompressing them.
// Only the header fields the target needs are rewritten: producer ID,
// epoch and base sequence of kmirror's idempotent producer, the cleared
// transactional bit, and the CRC.
//
// The franz-go clients serve as transport and metadata only: fetches
// (read_committed, filtered here as Kafka's consumer does), produces
// (idempotent, acks=all, up to five batches of a partition in flight, each
// in its own request) and InitProducerID are raw kmsg requests, one per
// broker for all its partitions.
//
// A batch that cannot go out as it is (message format v0/v1,
// LogAppendTime, holes in its offsets, larger than the target accepts, a
// flow that adds the provenance header, or one that starts before the
// resume offset) is decoded and re-encoded with the same codec.
//
// A Pipeline keeps the contract of replicate.Replicator: Assign, Revoke,
// Positions, Commit, AckedSinceCommit and Run, with the same meaning of
// progress and the same offset syncs.
package passthrough

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
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
	// AddOrigin writes replicate.OriginHeader on records that lack it and
	// drops records that came from the target. It forces every batch
	// through decode and re-encode.
	AddOrigin bool
	Metrics   *metrics.Metrics
	Log       *slog.Logger

	// FetchMaxBytes bounds one fetch response, PartitionMaxBytes one
	// partition of it, BufferBytes what is fetched and not yet
	// acknowledged by the target. Zero means the default; for
	// PartitionMaxBytes that is FetchMaxBytes shared by the partitions of
	// a fetch, between DefaultPartitionMaxBytes and MaxAutoPartitionBytes.
	FetchMaxBytes, PartitionMaxBytes int32
	BufferBytes                      int64
	FetchMaxWait                     time.Duration
}

// Pipeline runs the passthrough path of one flow.
type Pipeline struct {
	cfg      Config
	autoPart bool // PartitionMaxBytes adapts to the partitions per fetch
	tadm     *kadm.Client
	dec      kgo.Decompressor
	enc      *encoder
	wakeC    chan struct{}
	wg       sync.WaitGroup

	mu        sync.Mutex
	parts     map[progress.TP]*partition
	pid       int64 // -1 until InitProducerID answered
	epoch     int16
	needPID   bool
	needMeta  bool
	lastMeta  time.Time
	sources   []*kgo.Client // Source, then MoreSources: one per lane
	fetching  map[lane]bool // lanes with a fetch in flight
	fetchesIn int
	producing map[int32]int // target brokers: produce requests in flight
	produceIn int
	// issued is, per target broker, closed once the last produce request
	// issued to it is queued in franz-go: the next waits for it, so
	// requests reach a broker in the order they were built.
	issued   map[int32]chan struct{}
	buffered int64 // bytes of queued batches
	stats    stats

	ackedSince atomic.Int64
	paused     atomic.Bool // Pause is in effect: no new fetches
}

// stats count what tests want to know happened; pl.mu guards them.
type stats struct {
	maxInflight int // most batches of one partition in flight at once
	laterErrs   int // errors on batches that were not the oldest unacknowledged
	pids        int // producer IDs obtained
}

// partition is the state of one assigned source partition; pl.mu guards it.
type partition struct {
	tp     progress.TP
	remote string
	labels prometheus.Labels

	recordCount, byteCount prometheus.Counter
	recordAge, latency     *metrics.Window

	gen        int   // bumped when the fetch position jumps; older fetches are dropped
	next       int64 // next source offset to fetch; -1 until resolved
	done       int64 // every source offset <= done is acknowledged or skipped; -1 none
	reset      bool  // the source log restarted: save done even when it is -1
	outOfRange bool
	stopped    bool  // a fatal error stopped the partition
	stopAfter  error // stop with this error once the queue is sent
	revoked    bool

	// queue holds the batches fetched and not yet done, in offset
	// order. queue[0] is never acknowledged: acknowledged batches at
	// its head are taken off at once, so progress only moves in order.
	queue    []*outBatch
	queued   int64 // bytes in queue
	inflight int   // batches of queue in produce requests
	// blocked stops sending after a failed batch until every batch in
	// flight has answered; then the unacknowledged ones are sent again
	// from the oldest, with the same sequences (renumber: from seqFrom).
	blocked  bool
	renumber bool
	seqFrom  int32
	// ackPID and ackAt tell when the target last acknowledged a batch of
	// this partition and under which producer ID. A broker takes the
	// first batch of a producer it has no state for whatever its
	// sequence, so until one batch is acknowledged only one is in flight:
	// a later one must not be written before an earlier one that failed.
	ackPID   int64
	ackAt    time.Time
	syncq    []syncAck  // acknowledged, for the offset-sync writer
	syncMu   sync.Mutex // keeps the offset-sync calls in order
	fetching bool
	seq      int32 // next base sequence under the current producer ID
	retryAt  time.Time
	retries  int
	lastErr  error // the last produce error, or what stopped the partition

	lane                           int // index of the source client that fetches it
	srcLeader, srcEpoch, tgtLeader int32
	srcID, tgtID                   [16]byte
	maxBytes                       int // target max.message.bytes
}

// outBatch is one v2 batch on its way to the target.
type outBatch struct {
	raw       []byte  // complete batch; its header is stamped at each send
	first     int64   // source offset of the first record
	last      int64   // source offset the batch completes
	count     int32   // records
	offsets   []int64 // source offset of each record; nil means first+i
	advanceTo int64   // skipped source offsets that complete with this batch
	maxTS     int64
	seq       int32
	seqSet    bool
	state     uint8 // stUnsent, stSending or stAcked
	dstBase   int64 // target offset of the first record once acked; -1 unknown
}

// States of an outBatch.
const (
	stUnsent uint8 = iota
	stSending
	stAcked
)

// syncAck is an acknowledged batch waiting for the offset-sync writer.
type syncAck struct {
	b    *outBatch
	base int64
}

func (b *outBatch) offset(i int) int64 {
	if b.offsets != nil {
		return b.offsets[i]
	}
	return b.first + int64(i)
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
	return &Pipeline{
		cfg:       cfg,
		autoPart:  auto,
		issued:    make(map[int32]chan struct{}),
		tadm:      tadm,
		dec:       kgo.DefaultDecompressor(),
		enc:       newEncoder(),
		wakeC:     make(chan struct{}, 1),
		parts:     make(map[progress.TP]*partition),
		pid:       -1,
		sources:   append([]*kgo.Client{cfg.Source}, cfg.MoreSources...),
		fetching:  make(map[lane]bool),
		producing: make(map[int32]int),
	}
}

func (pl *Pipeline) wake() {
	select {
	case pl.wakeC <- struct{}{}:
	default:
	}
}

// Assign starts replicating ps from their saved progress (or the log
// start, or end with StartAtEnd). Already assigned partitions are left as
// they are.
func (pl *Pipeline) Assign(ps []replicate.Partition) {
	m := pl.cfg.Metrics
	pl.mu.Lock()
	for _, a := range ps {
		if _, ok := pl.parts[a.TP]; ok {
			continue
		}
		l := prometheus.Labels{"source": pl.cfg.SourceAlias, "target": pl.cfg.TargetAlias, "topic": a.Remote, "partition": strconv.Itoa(int(a.TP.Partition))}
		p := &partition{
			tp: a.TP, remote: a.Remote, labels: l,
			recordCount: m.RecordCount.With(l), byteCount: m.ByteCount.With(l),
			recordAge: m.RecordAgeMs.With(l), latency: m.ReplicationLatencyMs.With(l),
			next: -1, done: -1, srcLeader: -1, tgtLeader: -1, maxBytes: defaultMaxMessageBytes,
			lane: replicate.Lane(a.TP, len(pl.sources)),
		}
		from := "log start"
		if saved, ok := pl.cfg.Progress.Get(a.TP); ok && saved >= 0 {
			p.done, p.next = saved, saved+1
			from = strconv.FormatInt(saved+1, 10)
		} else if pl.cfg.StartAtEnd {
			from = "log end"
		}
		pl.parts[a.TP] = p
		pl.needMeta = true
		pl.cfg.Log.Info("replicating partition (passthrough)", "topic", a.TP.Topic, "partition", a.TP.Partition, "remote", a.Remote, "from", from)
	}
	pl.mu.Unlock()
	pl.wake()
}

// Revoke stops replicating tps, waits for their batches in flight and
// saves their progress. Batches fetched and not yet sent are dropped.
func (pl *Pipeline) Revoke(ctx context.Context, tps []progress.TP) error {
	pl.mu.Lock()
	var ps []*partition
	for _, tp := range tps {
		p := pl.parts[tp]
		if p == nil {
			continue
		}
		p.revoked = true
		p.gen++
		pl.dropQueueLocked(p, true)
		ps = append(ps, p)
	}
	pl.mu.Unlock()
	final := make(map[progress.TP]int64)
	for _, p := range ps {
		for {
			pl.mu.Lock()
			busy := p.inflight > 0
			if !busy && (p.done >= 0 || p.reset) {
				final[p.tp] = p.done
			}
			pl.mu.Unlock()
			if !busy {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if err := pl.cfg.Progress.Save(ctx, final); err != nil {
		return err
	}
	pl.mu.Lock()
	for _, p := range ps {
		pl.dropQueueLocked(p, false)
		delete(pl.parts, p.tp)
		if pl.cfg.Syncs != nil {
			pl.cfg.Syncs.Forget(p.tp.Topic, p.tp.Partition)
		}
	}
	pl.mu.Unlock()
	return nil
}

// dropQueueLocked forgets p's queued batches, except, if keepSent, those
// up to the last one in flight: their answers still move progress.
func (pl *Pipeline) dropQueueLocked(p *partition, keepSent bool) {
	keep := 0
	if keepSent {
		for i, b := range p.queue {
			if b.state != stUnsent {
				keep = i + 1
			}
		}
	}
	for _, b := range p.queue[keep:] {
		p.queued -= int64(len(b.raw))
		pl.buffered -= int64(len(b.raw))
	}
	clear(p.queue[keep:])
	p.queue = p.queue[:keep]
}

// Positions returns, for every assigned partition with progress, the last
// source offset that is safely on the target.
func (pl *Pipeline) Positions() map[progress.TP]int64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := make(map[progress.TP]int64, len(pl.parts))
	for tp, p := range pl.parts {
		if p.done >= 0 || p.reset {
			out[tp] = p.done
		}
	}
	return out
}

// AckedSinceCommit returns how many records the target acknowledged since
// the last Commit began.
func (pl *Pipeline) AckedSinceCommit() int64 { return pl.ackedSince.Load() }

// Commit saves the progress of every partition and publishes the offset
// syncs that were held back.
func (pl *Pipeline) Commit(ctx context.Context) error {
	pl.ackedSince.Store(0)
	return pl.cfg.Progress.SaveAndSync(ctx, pl.Positions(), pl.cfg.Syncs)
}

// Run fetches from the source and produces to the target until ctx ends,
// then stops fetching, waits up to drain for the fetched batches to reach
// the target, and saves progress one last time.
func (pl *Pipeline) Run(ctx context.Context, drain time.Duration) error {
	// Produce requests have their own context, so that stopping lets
	// fetched batches reach the target.
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		pl.maintain(ctx)
		pl.startFetches(ctx)
		pl.startProduces(pctx)
		select {
		case <-ctx.Done():
		case <-pl.wakeC:
		case <-tick.C:
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var drainErr error
	for !pl.idle() {
		pl.maintain(dctx)
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
	cctx, ccancel := context.WithTimeout(context.Background(), max(drain/2, 5*time.Second))
	defer ccancel()
	return errors.Join(drainErr, pl.Commit(cctx))
}

// idle reports whether nothing is in flight and nothing waits to be sent.
func (pl *Pipeline) idle() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.produceIn > 0 {
		return false
	}
	for _, p := range pl.parts {
		if len(p.queue) > 0 && !p.stopped && !p.revoked {
			return false
		}
	}
	return true
}

// maintain does what the request loops need first: a producer ID,
// metadata, start offsets, recovery from out-of-range fetches.
func (pl *Pipeline) maintain(ctx context.Context) {
	pl.mu.Lock()
	needPID := (pl.pid < 0 || pl.needPID) && pl.produceIn == 0
	needMeta := pl.needMeta || time.Since(pl.lastMeta) > 30*time.Second
	var resolve, oor []*partition
	for _, p := range pl.parts {
		switch {
		case p.stopped || p.revoked:
		case p.next < 0:
			resolve = append(resolve, p)
		case p.outOfRange:
			oor = append(oor, p)
		}
	}
	pl.mu.Unlock()
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
			pl.cfg.Log.Warn("passthrough: cannot get a producer ID from the target; retrying", "err", err)
		}
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.pid, pl.epoch, pl.needPID = resp.ProducerID, resp.ProducerEpoch, false
	pl.stats.pids++
	for _, p := range pl.parts {
		p.seq, p.renumber = 0, false
		for _, b := range p.queue {
			if b.state != stAcked {
				b.seqSet = false
			}
		}
	}
	pl.cfg.Log.Debug("passthrough producer ID", "id", resp.ProducerID, "epoch", resp.ProducerEpoch)
}

// refreshMetadata learns leaders, leader epochs and topic IDs on both
// sides and the target topics' max.message.bytes.
func (pl *Pipeline) refreshMetadata(ctx context.Context) {
	pl.mu.Lock()
	pl.needMeta = false
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
	src, err1 := pl.cfg.SourceAdmin.Metadata(rctx, keys(srcSet)...)
	dst, err2 := pl.tadm.Metadata(rctx, keys(dstSet)...)
	cfgs, err3 := pl.tadm.DescribeTopicConfigs(rctx, keys(dstSet)...)
	if err := errors.Join(err1, err2); err != nil {
		if ctx.Err() == nil {
			pl.cfg.Log.Warn("passthrough: metadata refresh failed; retrying", "err", err)
		}
		pl.mu.Lock()
		pl.needMeta = true
		pl.mu.Unlock()
		return
	}
	maxBytes := map[string]int{}
	if err3 == nil {
		for _, rc := range cfgs {
			for _, c := range rc.Configs {
				if c.Key == "max.message.bytes" {
					if n, err := strconv.Atoi(c.MaybeValue()); err == nil && n > headerSize {
						maxBytes[rc.Name] = n
					}
				}
			}
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, p := range pl.parts {
		p.srcLeader, p.tgtLeader = -1, -1
		if t, ok := src.Topics[p.tp.Topic]; ok && t.Err == nil {
			p.srcID = t.ID
			if d, ok := t.Partitions[p.tp.Partition]; ok && d.Err == nil {
				p.srcLeader, p.srcEpoch = d.Leader, d.LeaderEpoch
			}
		}
		if t, ok := dst.Topics[p.remote]; ok && t.Err == nil {
			p.tgtID = t.ID
			if d, ok := t.Partitions[p.tp.Partition]; ok && d.Err == nil {
				p.tgtLeader = d.Leader
			}
		}
		if n, ok := maxBytes[p.remote]; ok {
			p.maxBytes = n
		}
		if p.srcLeader < 0 || p.tgtLeader < 0 {
			pl.needMeta = true // try again soon
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// resolveStarts sets the fetch position of partitions without progress.
func (pl *Pipeline) resolveStarts(ctx context.Context, ps []*partition) {
	topics := map[string]bool{}
	for _, p := range ps {
		topics[p.tp.Topic] = true
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	list := pl.cfg.SourceAdmin.ListStartOffsets
	if pl.cfg.StartAtEnd {
		list = pl.cfg.SourceAdmin.ListEndOffsets
	}
	offs, err := list(rctx, keys(topics)...)
	if err != nil {
		if ctx.Err() == nil {
			pl.cfg.Log.Warn("passthrough: cannot list start offsets; retrying", "err", err)
		}
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, p := range ps {
		if o, ok := offs.Lookup(p.tp.Topic, p.tp.Partition); ok && o.Err == nil && p.next < 0 {
			p.next = o.Offset
			p.gen++
		}
	}
}

// outOfRange handles a fetch position that is not in the source log: the
// records between it and the log start are gone and are reported, never
// skipped silently.
func (pl *Pipeline) outOfRange(ctx context.Context, p *partition) {
	tp := p.tp
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	starts, err1 := pl.cfg.SourceAdmin.ListStartOffsets(rctx, tp.Topic)
	ends, err2 := pl.cfg.SourceAdmin.ListEndOffsets(rctx, tp.Topic)
	if err := errors.Join(err1, err2); err != nil {
		pl.cfg.Log.Warn("cannot list offsets after offset out of range; retrying", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return
	}
	start, ok1 := starts.Lookup(tp.Topic, tp.Partition)
	end, ok2 := ends.Lookup(tp.Topic, tp.Partition)
	if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
		pl.cfg.Log.Warn("cannot list offsets after offset out of range; retrying", "topic", tp.Topic, "partition", tp.Partition)
		return
	}
	lost := pl.cfg.Metrics.RecordsLost.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, tp.Topic, strconv.Itoa(int(tp.Partition)))
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.outOfRange = false
	want := p.next
	resume := want
	switch {
	case want < start.Offset:
		n := start.Offset - want
		pl.cfg.Log.Error("source records lost before replication: removed upstream (retention or DeleteRecords) before kmirror copied them",
			"topic", tp.Topic, "partition", tp.Partition, "first_lost", want, "last_lost", start.Offset-1, "count", n)
		lost.Add(float64(n))
		resume = start.Offset
	case want > end.Offset:
		pl.cfg.Log.Error("source partition is shorter than what was replicated: the topic was deleted and re-created, or its log truncated; records written after offset "+
			strconv.FormatInt(want-1, 10)+" of the old log and not yet copied are lost; continuing from the log start",
			"topic", tp.Topic, "partition", tp.Partition, "expected", want, "log_start", start.Offset, "log_end", end.Offset)
		lost.Add(0)
		resume = start.Offset
	}
	if resume != want {
		p.next = resume
		p.gen++
		pl.skipLocked(p, resume-1)
		if resume < want {
			// The log restarted below what was done: progress follows it.
			p.done, p.reset = resume-1, true
		}
	}
}

// skipLocked marks source offsets up to off as handled without a record
// on the target: at once if nothing is queued, else with the last queued
// batch.
func (pl *Pipeline) skipLocked(p *partition, off int64) {
	if n := len(p.queue); n > 0 {
		p.queue[n-1].advanceTo = max(p.queue[n-1].advanceTo, off)
		return
	}
	if off > p.done {
		p.done = off
	}
}

// lane is one fetch stream to a source broker: the client whose
// connection carries it, and so the partitions whose replicate.Lane it is.
type lane struct {
	broker int32
	client int
}

// fetchAsk is what one fetch asked of a partition.
type fetchAsk struct {
	p        *partition
	offset   int64
	gen      int
	maxBytes int
}

// startFetches sends one fetch on every lane that has a partition with
// room in its buffer and no fetch in flight.
func (pl *Pipeline) startFetches(ctx context.Context) {
	if pl.paused.Load() {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := time.Now()
	led := map[lane]int{} // partitions fetched on each lane
	for _, p := range pl.parts {
		if !p.stopped && !p.revoked && p.srcLeader >= 0 {
			led[lane{p.srcLeader, p.lane}]++
		}
	}
	byLane := map[lane][]*partition{}
	for _, p := range pl.parts {
		if p.stopped || p.stopAfter != nil || p.revoked || p.fetching || p.outOfRange || p.next < 0 || p.srcLeader < 0 || now.Before(p.retryAt) {
			continue
		}
		l := lane{p.srcLeader, p.lane}
		if pl.fetching[l] || p.queued >= 4*int64(pl.partitionBytes(led[l])) {
			continue
		}
		byLane[l] = append(byLane[l], p)
	}
	for l, ps := range byLane {
		if pl.buffered > 0 && pl.buffered+int64(pl.fetchesIn+1)*int64(pl.cfg.FetchMaxBytes) > pl.cfg.BufferBytes {
			return
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = int32(pl.cfg.FetchMaxWait.Milliseconds())
		req.MinBytes = 1
		req.MaxBytes = pl.cfg.FetchMaxBytes
		req.IsolationLevel = 1 // read_committed
		partBytes := pl.partitionBytes(led[l])
		asks := map[progress.TP]fetchAsk{}
		byTopic := map[string]int{}
		for _, p := range ps {
			i, ok := byTopic[p.tp.Topic]
			if !ok {
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = p.tp.Topic, p.srcID
				req.Topics = append(req.Topics, t)
				i = len(req.Topics) - 1
				byTopic[p.tp.Topic] = i
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p.tp.Partition
			rp.CurrentLeaderEpoch = p.srcEpoch
			rp.FetchOffset = p.next
			rp.PartitionMaxBytes = partBytes
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
			asks[p.tp] = fetchAsk{p: p, offset: p.next, gen: p.gen, maxBytes: p.maxBytes}
			p.fetching = true
		}
		pl.fetching[l] = true
		pl.fetchesIn++
		pl.wg.Add(1)
		go pl.fetch(ctx, l, req, asks)
	}
}

// partitionBytes is the most one partition may fill of a fetch on a lane
// that carries n of the assigned partitions: the configured value, or
// an equal share of the fetch, at least DefaultPartitionMaxBytes and at
// most MaxAutoPartitionBytes. The buffer bound (BufferBytes) still holds.
func (pl *Pipeline) partitionBytes(n int) int32 {
	if !pl.autoPart {
		return pl.cfg.PartitionMaxBytes
	}
	share := pl.cfg.FetchMaxBytes / int32(max(n, 1))
	return min(max(share, DefaultPartitionMaxBytes), MaxAutoPartitionBytes, max(pl.cfg.FetchMaxBytes, DefaultPartitionMaxBytes))
}

// fetch runs one fetch request and hands each partition's data on.
func (pl *Pipeline) fetch(ctx context.Context, l lane, req *kmsg.FetchRequest, asks map[progress.TP]fetchAsk) {
	defer pl.wg.Done()
	defer func() {
		pl.mu.Lock()
		delete(pl.fetching, l)
		pl.fetchesIn--
		for _, a := range asks {
			a.p.fetching = false
		}
		pl.mu.Unlock()
		pl.wake()
	}()
	byID := map[[16]byte]string{}
	for _, t := range req.Topics {
		byID[t.TopicID] = t.Topic
	}
	resp, err := pl.sources[l.client].Broker(int(l.broker)).Request(ctx, req)
	if err == nil {
		if fr := resp.(*kmsg.FetchResponse); fr.ErrorCode != 0 {
			err = kerr.ErrorForCode(fr.ErrorCode)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			pl.cfg.Log.Warn("passthrough: fetch failed; refreshing metadata", "broker", l.broker, "err", err)
			pl.mu.Lock()
			pl.needMeta = true
			for _, a := range asks {
				a.p.retryAt = time.Now().Add(200 * time.Millisecond)
			}
			pl.mu.Unlock()
		}
		return
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		topic := t.Topic
		if topic == "" {
			topic = byID[t.TopicID]
		}
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if a, ok := asks[progress.TP{Topic: topic, Partition: rp.Partition}]; ok {
				pl.fetched(a, rp)
			}
		}
	}
}

// item is one step of a fetched partition: a batch to send, or source
// offsets up to skip handled without sending anything; stop ends the
// partition with a fatal error.
type item struct {
	batch *outBatch
	skip  int64
	stop  error
}

// fetched turns one partition of a fetch response into batches to send.
func (pl *Pipeline) fetched(a fetchAsk, rp *kmsg.FetchResponseTopicPartition) {
	p := a.p
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange):
			if p.gen == a.gen {
				p.outOfRange = true
			}
		case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch),
			errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.UnknownTopicOrPartition),
			errors.Is(err, kerr.LeaderNotAvailable), errors.Is(err, kerr.ReplicaNotAvailable),
			errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.OffsetNotAvailable),
			errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.InconsistentTopicID):
			pl.needMeta = true
			p.retryAt = time.Now().Add(100 * time.Millisecond)
		default:
			pl.cfg.Log.Warn("fetch error", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
			p.retryAt = time.Now().Add(time.Second)
		}
		return
	}
	if len(rp.RecordBatches) == 0 {
		return
	}
	if pl.paused.Load() {
		return // fetched again from the same offset after Resume
	}
	items, next := pl.split(p, a, rp)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p.gen != a.gen || p.next != a.offset || p.stopped || p.revoked {
		return // the position moved while this fetch was out
	}
	p.next = next
	for _, it := range items {
		switch {
		case it.batch != nil:
			it.batch.advanceTo = -1
			p.queue = append(p.queue, it.batch)
			p.queued += int64(len(it.batch.raw))
			pl.buffered += int64(len(it.batch.raw))
		case it.stop != nil:
			// What came before the cause still goes out.
			p.stopAfter = it.stop
			return
		default:
			pl.skipLocked(p, it.skip)
		}
	}
}

// split parses the batches of one fetched partition: read_committed
// filtering, batches to forward as they are, batches to re-encode. It
// returns the items and the next offset to fetch.
func (pl *Pipeline) split(p *partition, a fetchAsk, rp *kmsg.FetchResponseTopicPartition) ([]item, int64) {
	filter := newAbortFilter(rp.AbortedTransactions)
	next := a.offset
	var items []item
	for in := rp.RecordBatches; ; {
		raw, rest, ok := nextBatch(in)
		if !ok {
			break
		}
		in = rest
		if magic(raw) < 2 {
			// Message format v0/v1: the entry's offset is that of its
			// last record.
			last := int64(beUint64(raw))
			if last < next {
				continue
			}
			items = append(items, pl.reencode(p, raw, next, last, kgo.CompressionCodecType(raw[17]&attrCodec), a.maxBytes)...)
			next = last + 1
			if items[len(items)-1].stop != nil {
				break
			}
			continue
		}
		b, err := parseHeader(raw)
		if err != nil {
			pl.cfg.Log.Error("passthrough: unreadable source batch; fetching again", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", next, "err", err)
			break
		}
		last := lastOffset(&b)
		skip := filter.skip(&b) // sees every batch, in order
		if last < next {
			continue
		}
		switch {
		case skip || b.NumRecords == 0:
			items = append(items, item{skip: last})
		case b.FirstOffset >= next && forwardable(&b) && !pl.cfg.AddOrigin && len(raw) <= a.maxBytes:
			// The batch stays in the fetch response's buffer (franz-go
			// allocates one per response and never reuses it): no copy.
			items = append(items, item{batch: &outBatch{
				raw:   raw[:len(raw):len(raw)],
				first: b.FirstOffset, last: last, count: b.NumRecords, maxTS: b.MaxTimestamp,
			}})
		default:
			items = append(items, pl.reencode(p, raw, next, last, kgo.CompressionCodecType(b.Attributes&attrCodec), a.maxBytes)...)
		}
		next = last + 1
		if items[len(items)-1].stop != nil {
			break
		}
	}
	return items, next
}

func beUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// reencode decodes one source batch (records from offset from on) and
// encodes it again with codec, applying the provenance rules, in batches
// the target accepts. The source offsets up to last are complete after it.
func (pl *Pipeline) reencode(p *partition, raw []byte, from, last int64, codec kgo.CompressionCodecType, maxBytes int) []item {
	recs, err := decode(raw, from, p.tp.Topic, p.tp.Partition, pl.dec)
	if err != nil {
		return []item{{stop: fmt.Errorf("decoding source batch at offset %d: %w", from, err)}}
	}
	kept := recs[:0]
	for _, r := range recs {
		origin, has := originOf(r)
		if has && origin == pl.cfg.TargetAlias {
			pl.cfg.Metrics.RecordsLooped.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, p.tp.Topic).Inc()
			continue
		}
		if pl.cfg.AddOrigin && !has {
			r.Headers = append(r.Headers[:len(r.Headers):len(r.Headers)], kgo.RecordHeader{Key: replicate.OriginHeader, Value: []byte(pl.cfg.SourceAlias)})
		}
		kept = append(kept, r)
	}
	encs, err := pl.enc.encode(kept, codec, maxBytes)
	var items []item
	for _, e := range encs {
		items = append(items, item{batch: &outBatch{
			raw: e.raw, first: e.offsets[0], last: e.offsets[len(e.offsets)-1],
			count: int32(len(e.offsets)), offsets: e.offsets, maxTS: maxTimestamp(e.raw),
		}})
	}
	if err != nil {
		return append(items, item{stop: err})
	}
	return append(items, item{skip: last})
}

func maxTimestamp(raw []byte) int64 {
	var b kmsg.RecordBatch
	if b.ReadFrom(raw) != nil {
		return 0
	}
	return b.MaxTimestamp
}

func originOf(r *kgo.Record) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == replicate.OriginHeader {
			return string(h.Value), true
		}
	}
	return "", false
}

// stopLocked stops p for good after an error that needs a person.
func (pl *Pipeline) stopLocked(p *partition, err error) {
	offset := p.done + 1
	var tl *errTooLarge
	if errors.As(err, &tl) {
		offset = tl.offset
	} else if len(p.queue) > 0 {
		offset = p.queue[0].first
	}
	p.stopped, p.lastErr = true, err
	pl.dropQueueLocked(p, false)
	pl.cfg.Metrics.PartitionErrors.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)), "true").Inc()
	pl.cfg.Log.Error("partition stopped: the record cannot be written to the target; fix the cause and restart kmirror",
		"topic", p.tp.Topic, "partition", p.tp.Partition, "offset", offset, "remote", p.remote, "err", err)
}

// sending is one partition's batch in a produce request.
type sending struct {
	p     *partition
	b     *outBatch
	pid   int64
	epoch int16
	seq   int32
	tgtID [16]byte // p.tgtID when built: metadata refreshes change p's
}

// startProduces sends the batches of every partition that are not yet in
// flight, up to partInflight per partition, in produce requests of at most
// one batch per partition each (Kafka's rule), up to brokerInflight
// requests per target broker. A partition's batches go in successive
// requests, which reach the broker in the order they are built.
func (pl *Pipeline) startProduces(ctx context.Context) {
	pl.mu.Lock()
	if pl.pid < 0 || pl.needPID {
		pl.mu.Unlock()
		return
	}
	now := time.Now()
	type building struct {
		ss   []*sending
		size int
	}
	byBroker := map[int32][]*building{}
	for _, p := range pl.parts {
		if p.stopAfter != nil && len(p.queue) == 0 && p.inflight == 0 && !p.stopped {
			pl.stopLocked(p, p.stopAfter)
		}
		if p.stopped || p.revoked || p.blocked || p.inflight >= partInflight || len(p.queue) == 0 || p.tgtLeader < 0 || now.Before(p.retryAt) {
			continue
		}
		br := p.tgtLeader
		reqs := byBroker[br]
		at := 0 // the request this partition's next batch may join
		limit := partInflight
		if p.ackPID != pl.pid || now.Sub(p.ackAt) > producerStateTTL {
			limit = 1
		}
		for _, b := range p.queue {
			if p.inflight >= limit {
				break
			}
			if b.state != stUnsent {
				continue
			}
			for at < len(reqs) && reqs[at].size > 0 && reqs[at].size+len(b.raw) > produceMaxBytes {
				at++
			}
			if at == len(reqs) {
				if pl.producing[br]+len(reqs) >= brokerInflight {
					break
				}
				reqs = append(reqs, &building{})
			}
			if !b.seqSet {
				b.seq, b.seqSet = p.seq, true
				p.seq = addSeq(p.seq, b.count)
			}
			b.state = stSending
			p.inflight++
			pl.stats.maxInflight = max(pl.stats.maxInflight, p.inflight)
			reqs[at].size += len(b.raw)
			reqs[at].ss = append(reqs[at].ss, &sending{p: p, b: b, pid: pl.pid, epoch: pl.epoch, seq: b.seq, tgtID: p.tgtID})
			at++
		}
		byBroker[br] = reqs
	}
	for br, reqs := range byBroker {
		for _, r := range reqs {
			prev := pl.issued[br]
			next := make(chan struct{})
			pl.issued[br] = next
			pl.producing[br]++
			pl.produceIn++
			pl.wg.Add(1)
			go pl.produce(ctx, br, r.ss, prev, next)
		}
	}
	pl.mu.Unlock()
}

// addSeq advances a sequence number by n; sequences wrap to 0 after the
// largest int32, as Kafka's do.
func addSeq(seq, n int32) int32 {
	s := int64(seq) + int64(n)
	if s > 1<<31-1 {
		s -= 1 << 31
	}
	return int32(s)
}

// produceRequest is a produce request whose serialization grows the
// destination once to the request's size, instead of letting each
// appended batch grow it by doubling and copying. It also reports when
// franz-go serializes it: then it is next on the broker's connection.
// Only the type differs for franz-go, which then leaves acks as set here
// (always all: the producer is idempotent).
type produceRequest struct {
	*kmsg.ProduceRequest
	size   int
	queued func()
}

func (r *produceRequest) AppendTo(dst []byte) []byte {
	r.queued()
	if cap(dst)-len(dst) < r.size {
		dst = slices.Grow(dst, r.size)
	}
	return r.ProduceRequest.AppendTo(dst)
}

// produce sends one request of batches to a target broker and handles the
// answer of each partition. It issues the request once the one issued
// before it to the broker is queued (prev is closed), and closes next once
// its own is.
func (pl *Pipeline) produce(ctx context.Context, broker int32, ss []*sending, prev <-chan struct{}, next chan struct{}) {
	defer pl.wg.Done()
	var once sync.Once
	queued := func() { once.Do(func() { close(next) }) }
	defer queued()
	n := 0
	for _, sd := range ss {
		n += len(sd.b.raw)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	size := 64
	byTopic := map[string]int{}
	for _, s := range ss {
		// Only this request touches the batch while it is in flight.
		if err := stamp(s.b.raw, s.pid, s.epoch, s.seq); err != nil {
			panic(err) // the batch was parsed before it was queued
		}
		i, ok := byTopic[s.p.remote]
		if !ok {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = s.p.remote, s.tgtID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[s.p.remote] = i
			size += 32 + len(t.Topic)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = s.p.tp.Partition
		rp.Records = s.b.raw
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		size += 16 + len(s.b.raw)
	}
	if prev != nil {
		<-prev // closed at the latest when that request returns
	}
	_ = pl.cfg.Throttle.Wait(ctx, n) // on ctx's end the request fails and is retried
	resp, err := pl.cfg.Target.Broker(int(broker)).Request(ctx, &produceRequest{ProduceRequest: req, size: size, queued: queued})
	queued()
	var results map[progress.TP]*kmsg.ProduceResponseTopicPartition
	if err == nil {
		pr := resp.(*kmsg.ProduceResponse)
		results = make(map[progress.TP]*kmsg.ProduceResponseTopicPartition, len(ss))
		for i := range pr.Topics {
			t := &pr.Topics[i]
			name := t.Topic
			if name == "" {
				for _, rt := range req.Topics {
					if rt.TopicID == t.TopicID {
						name = rt.Topic
					}
				}
			}
			for j := range t.Partitions {
				results[progress.TP{Topic: name, Partition: t.Partitions[j].Partition}] = &t.Partitions[j]
			}
		}
	}
	for _, s := range ss {
		rerr := err
		var rp *kmsg.ProduceResponseTopicPartition
		if rerr == nil {
			rp = results[progress.TP{Topic: s.p.remote, Partition: s.p.tp.Partition}]
			if rp == nil {
				rerr = errors.New("partition missing from the produce response")
			} else {
				rerr = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
		pl.produced(s, rp, rerr)
	}
	pl.mu.Lock()
	pl.producing[broker]--
	pl.produceIn--
	pl.mu.Unlock()
	pl.wake()
}

// pidErrs mean the target lost or refused this producer's state: a new
// producer ID starts every partition's sequence at 0 again. The first two
// mean that only on the oldest unacknowledged batch of a partition: on a
// later one they mean an earlier batch did not arrive (yet).
var pidErrs = []error{kerr.OutOfOrderSequenceNumber, kerr.UnknownProducerID, kerr.InvalidProducerEpoch, kerr.InvalidProducerIDMapping, kerr.ProducerFenced}

// headOnlyPIDErrs are the pidErrs that count only on the oldest batch.
var headOnlyPIDErrs = pidErrs[:2]

// metaErrs mean the partition's leader moved.
var metaErrs = []error{kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.UnknownTopicOrPartition, kerr.FencedLeaderEpoch, kerr.KafkaStorageError, kerr.UnknownTopicID, kerr.InconsistentTopicID}

// fatalErrs stop the partition: retrying cannot cure them.
var fatalErrs = []error{
	kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed,
	kerr.ClusterAuthorizationFailed, kerr.PolicyViolation, kerr.UnsupportedForMessageFormat,
	kerr.UnsupportedCompressionType, kerr.TransactionalIDAuthorizationFailed,
}

func isAny(err error, errs []error) bool {
	for _, e := range errs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// produced handles the target's answer for one partition's batch.
// Acknowledgements may arrive out of order; progress, metrics and offset
// syncs follow the queue's order. An error on a batch that is not the
// oldest unacknowledged one only blocks the partition: once all its
// batches in flight have answered, the unacknowledged ones are sent again
// with the same sequences, and the target answers those it already has as
// duplicates.
func (pl *Pipeline) produced(s *sending, rp *kmsg.ProduceResponseTopicPartition, err error) {
	p, b := s.p, s.b
	var done []*outBatch
	pl.mu.Lock()
	idx := slices.Index(p.queue, b)
	switch {
	case idx < 0 || b.state != stSending:
		// The partition was stopped meanwhile.
	case err == nil || errors.Is(err, kerr.DuplicateSequenceNumber):
		b.state, b.dstBase = stAcked, -1
		if s.pid == pl.pid {
			p.ackPID, p.ackAt = s.pid, time.Now()
		}
		if err == nil && rp.BaseOffset >= 0 {
			b.dstBase = rp.BaseOffset
		}
		for len(p.queue) > 0 && p.queue[0].state == stAcked {
			h := p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.queued -= int64(len(h.raw))
			pl.buffered -= int64(len(h.raw))
			p.done = max(p.done, h.last, h.advanceTo)
			p.retries, p.lastErr = 0, nil
			done = append(done, h)
			if pl.cfg.Syncs != nil && h.dstBase >= 0 {
				p.syncq = append(p.syncq, syncAck{b: h, base: h.dstBase})
			}
		}
	case idx == 0 && (errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)):
		b.state = stUnsent
		if b.count == 1 {
			pl.stopLocked(p, fmt.Errorf("record at source offset %d: %w", b.first, err))
			break
		}
		// The target refused the whole batch: send its records one
		// at a time, to copy those before a large one and stop at it.
		singles, derr := pl.singles(p, b)
		if derr != nil {
			pl.stopLocked(p, derr)
			break
		}
		// Nothing after b was accepted: the sequences go again from b's.
		p.blocked, p.renumber, p.seqFrom = true, true, b.seq
		p.queue = append(singles, p.queue[1:]...)
		for _, n := range singles {
			p.queued += int64(len(n.raw))
			pl.buffered += int64(len(n.raw))
		}
		p.queued -= int64(len(b.raw))
		pl.buffered -= int64(len(b.raw))
		pl.cfg.Log.Warn("target refused a batch as too large; sending its records one at a time", "topic", p.tp.Topic, "partition", p.tp.Partition, "from", b.first, "err", err)
	case idx == 0 && isAny(err, fatalErrs):
		b.state = stUnsent
		pl.stopLocked(p, err)
	default:
		// A retriable error, or one that counts only on the oldest
		// batch: send again once the partition's batches in flight
		// have answered.
		b.state = stUnsent
		p.blocked = true
		if idx > 0 {
			pl.stats.laterErrs++
		}
		if isAny(err, pidErrs) && (idx == 0 || !isAny(err, headOnlyPIDErrs)) {
			pl.needPID = true
		}
		if isAny(err, metaErrs) || rp == nil {
			pl.needMeta = true
		}
		p.lastErr = err
		if idx == 0 || !isAny(err, headOnlyPIDErrs) {
			p.retries++
			p.retryAt = time.Now().Add(min(time.Duration(p.retries)*100*time.Millisecond, time.Second))
			if p.retries == 1 || p.retries%20 == 0 {
				fatal := false
				pl.cfg.Metrics.PartitionErrors.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)), strconv.FormatBool(fatal)).Inc()
				pl.cfg.Log.Warn("passthrough: produce failed; retrying from the oldest unacknowledged batch", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", b.first, "retries", p.retries, "err", err)
			}
		}
	}
	syncs := len(p.syncq) > 0
	pl.mu.Unlock()

	if len(done) > 0 {
		now := time.Now().UnixMilli()
		var recs, bytes int64
		var maxTS int64
		for _, h := range done {
			recs += int64(h.count)
			bytes += int64(len(h.raw))
			maxTS = max(maxTS, h.maxTS)
		}
		pl.ackedSince.Add(recs)
		p.recordCount.Add(float64(recs))
		p.byteCount.Add(float64(bytes))
		p.recordAge.Set(float64(now - maxTS))
		p.latency.Set(float64(now - maxTS))
	}
	if syncs {
		// Whoever takes the queue under syncMu hands it on in order.
		p.syncMu.Lock()
		pl.mu.Lock()
		q := p.syncq
		p.syncq = nil
		pl.mu.Unlock()
		for _, a := range q {
			for i := range int(a.b.count) {
				pl.cfg.Syncs.Acked(p.tp.Topic, p.tp.Partition, a.b.offset(i), a.base+int64(i))
			}
		}
		p.syncMu.Unlock()
	}

	pl.mu.Lock()
	p.inflight--
	if p.inflight == 0 && p.blocked {
		p.blocked = false
		if p.renumber {
			p.renumber = false
			p.seq = p.seqFrom
			for _, q := range p.queue {
				q.seqSet = false
			}
		}
	}
	pl.mu.Unlock()
}

// singles re-encodes the records of b one per batch.
func (pl *Pipeline) singles(p *partition, b *outBatch) ([]*outBatch, error) {
	recs, err := decode(b.raw, 0, p.tp.Topic, p.tp.Partition, pl.dec)
	if err != nil {
		return nil, err
	}
	if len(recs) != int(b.count) {
		return nil, fmt.Errorf("batch at source offset %d holds %d records, decoded %d", b.first, b.count, len(recs))
	}
	codec := kgo.CompressionCodecType(b.raw[attrsAt+1] & attrCodec)
	out := make([]*outBatch, 0, len(recs))
	for i, r := range recs {
		raw, err := pl.enc.batch([]*kgo.Record{r}, codec)
		if err != nil {
			return nil, err
		}
		src := b.offset(i)
		out = append(out, &outBatch{raw: raw, first: src, last: src, count: 1, offsets: []int64{src}, maxTS: r.Timestamp.UnixMilli(), advanceTo: -1})
	}
	out[len(out)-1].advanceTo = max(b.last, b.advanceTo)
	return out, nil
}

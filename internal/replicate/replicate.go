// Package replicate copies records of assigned source partitions to the same
// partition of their remote topics and tracks, per partition, the last source
// offset the target has acknowledged together with every offset before it.
//
// The Replicator does not decide which partitions it owns: Assign and Revoke
// are its inputs (all partitions of a flow in one process today, a Kafka
// group assignment later).
package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/throttle"
)

// OriginHeader is the provenance header: the alias of the cluster where a
// record was first written. It stops identity-named topics from looping
// between clusters that replicate both ways.
const OriginHeader = "kmirror.origin"

// Config is what a Replicator needs.
type Config struct {
	SourceAlias, TargetAlias string
	// Source consumes (a direct consumer: no group), read_committed, with
	// control records kept and kgo.NoResetOffset as reset offset.
	Source *kgo.Client
	// MoreSources are further direct consumers like Source, not used in
	// group mode. The partitions are spread over Source and them (Lane),
	// so that each source broker has one fetch in flight per client.
	MoreSources []*kgo.Client
	// SourceAdmin lists offsets when a partition's position fell off the log.
	SourceAdmin *kadm.Client
	// Target produces: idempotent, acks=all, records carry their partition.
	Target *kgo.Client
	// ByCodec, if set, holds one producer per compression codec (the
	// codec numbers of kgo.RecordAttrs.CompressionType): each record goes
	// out compressed as its source batch was. Not used in exactly-once
	// mode, whose transaction lives on Target.
	ByCodec  map[uint8]*kgo.Client
	Progress *progress.Store
	// Syncs receives every acknowledged (upstream, downstream) pair; nil
	// disables offset syncs.
	Syncs *offsetsync.Writer
	// StartAtEnd starts partitions without progress at the log end
	// (auto.offset.reset=latest) instead of the start.
	StartAtEnd bool
	// AddOrigin writes OriginHeader on records that lack it.
	AddOrigin bool
	// Throttle bounds the bytes per second copied; nil is no limit.
	Throttle *throttle.Limiter
	// Group means Source is a member of a Kafka consumer group that hands
	// out the partitions (several workers share a flow): partitions come
	// and go through GroupAssigned and GroupRevoked, not Assign, and
	// Remote names their remote topics.
	Group  bool
	Remote func(topic string) string
	// Transactional is exactly-once mode: Target is a transactional
	// producer and progress is written in the same transactions as the
	// records (see eos.go).
	Transactional bool
	Metrics       *metrics.Metrics
	Log           *slog.Logger
}

// Partition is a source partition to replicate and the topic it goes to.
type Partition struct {
	TP     progress.TP
	Remote string
}

// Replicator runs the record path of one flow.
type Replicator struct {
	cfg     Config
	sources []*kgo.Client // Source, then MoreSources: one per lane

	mu       sync.Mutex
	parts    map[progress.TP]*partition
	restarts []*partition // failed partitions, handled by the poll loop
	wake     func()       // ends the poll in progress, so restarts are seen

	ackedSince atomic.Int64 // records acknowledged since the last Commit
	acks       atomic.Int64 // records acknowledged in all

	paused atomic.Bool // Pause is in effect

	commits chan commitRequest // exactly-once: commits asked of the poll loop
	inTxn   bool               // exactly-once: a transaction is open; poll loop only
}

// New returns a Replicator; call Run to start it.
func New(cfg Config) *Replicator {
	sources := []*kgo.Client{cfg.Source}
	if !cfg.Group {
		sources = append(sources, cfg.MoreSources...)
	}
	return &Replicator{cfg: cfg, sources: sources, parts: make(map[progress.TP]*partition), commits: make(chan commitRequest, 8)}
}

// Lane spreads the partitions of a topic over n fetch lanes: consecutive
// partitions take turns, so that a topic's partitions split evenly.
func Lane(tp progress.TP, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261) // FNV-1a of the topic name
	for i := 0; i < len(tp.Topic); i++ {
		h = (h ^ uint32(tp.Topic[i])) * 16777619
	}
	return int((h + uint32(tp.Partition)) % uint32(n))
}

// source is the client that fetches tp.
func (r *Replicator) source(tp progress.TP) *kgo.Client {
	return r.sources[Lane(tp, len(r.sources))]
}

// byLane splits partitions by the client that fetches them.
func byLane[V any](r *Replicator, m map[string]map[int32]V) []map[string]map[int32]V {
	out := make([]map[string]map[int32]V, len(r.sources))
	for topic, ps := range m {
		for part, v := range ps {
			i := Lane(progress.TP{Topic: topic, Partition: part}, len(r.sources))
			if out[i] == nil {
				out[i] = make(map[string]map[int32]V)
			}
			if out[i][topic] == nil {
				out[i][topic] = make(map[int32]V)
			}
			out[i][topic][part] = v
		}
	}
	return out
}

// partition is the state of one assigned source partition.
type partition struct {
	tp     progress.TP
	remote string

	recordCount, byteCount prometheus.Counter
	recordAge, latency     *metrics.Window

	mu       sync.Mutex
	gen      int      // bumped at every restart; acks of older generations are ignored
	next     int64    // lowest source offset accepted from fetches
	done     int64    // every source offset <= done is acknowledged or skipped; -1 none
	inflight int      // records sent and not yet acknowledged, all generations
	last     *pending // newest record in flight in this generation
	failed   error    // set on the first produce error of a generation
	stopped  bool     // a fatal error stopped the partition
	reset    bool     // the source log restarted: save done even when it is -1
	revoked  bool     // being handed back: nothing more is sent
	// Records up to carefulUntil go out one at a time, to find which
	// record of a batch the target refused as too large.
	carefulUntil  int64
	failedCareful bool        // the failed record went out alone
	prod          *kgo.Client // the producer of the records in flight
	lastErr       error       // the last error that stopped or restarted the partition
	base          int64       // first source offset seen, where a partition without progress rewinds to
}

// pending is one record in flight.
type pending struct {
	p         *partition
	gen       int
	src       int64
	advanceTo int64 // skipped source offsets that complete with this record
	ts        time.Time
	careful   bool // sent alone, see partition.carefulUntil
}

// Assign starts replicating ps from their saved progress (or the log start,
// or end with StartAtEnd, when there is none). Already assigned partitions
// are left as they are.
func (r *Replicator) Assign(ps []Partition) {
	add := make(map[string]map[int32]kgo.Offset)
	r.mu.Lock()
	for _, a := range ps {
		if _, ok := r.parts[a.TP]; ok {
			continue
		}
		p := r.newPartition(a)
		off, from := kgo.NewOffset().AtStart(), "log start"
		if saved, ok := r.cfg.Progress.Get(a.TP); ok && saved >= 0 {
			p.done, p.next = saved, saved+1
			off, from = kgo.NewOffset().At(saved+1), strconv.FormatInt(saved+1, 10)
		} else if r.cfg.StartAtEnd {
			off, from = kgo.NewOffset().AtEnd(), "log end"
		}
		r.parts[a.TP] = p
		if add[a.TP.Topic] == nil {
			add[a.TP.Topic] = make(map[int32]kgo.Offset)
		}
		add[a.TP.Topic][a.TP.Partition] = off
		r.cfg.Log.Info("replicating partition", "topic", a.TP.Topic, "partition", a.TP.Partition, "remote", a.Remote, "from", from)
	}
	r.mu.Unlock()
	for i, m := range byLane(r, add) {
		if len(m) == 0 {
			continue
		}
		if r.paused.Load() {
			for t := range m {
				r.sources[i].PauseFetchTopics(t)
			}
		}
		r.sources[i].AddConsumePartitions(m)
	}
}

func (r *Replicator) newPartition(a Partition) *partition {
	m := r.cfg.Metrics
	l := prometheus.Labels{"source": r.cfg.SourceAlias, "target": r.cfg.TargetAlias, "topic": a.Remote, "partition": strconv.Itoa(int(a.TP.Partition))}
	return &partition{
		tp:           a.TP,
		remote:       a.Remote,
		done:         -1,
		carefulUntil: -1,
		base:         -1,
		recordCount:  m.RecordCount.With(l),
		byteCount:    m.ByteCount.With(l),
		recordAge:    m.RecordAgeMs.With(l),
		latency:      m.ReplicationLatencyMs.With(l),
	}
}

// Revoke stops replicating tps, waits for their records in flight and saves
// their progress.
func (r *Replicator) Revoke(ctx context.Context, tps []progress.TP) error {
	rm := make(map[string][]int32)
	for _, tp := range tps {
		rm[tp.Topic] = append(rm[tp.Topic], tp.Partition)
	}
	if !r.cfg.Group {
		for _, cl := range r.sources {
			cl.RemoveConsumePartitions(rm) // a no-op for those it does not fetch
		}
	}
	for _, tp := range tps {
		if p := r.lookup(tp); p != nil {
			p.mu.Lock()
			p.revoked = true // drops records of this partition still buffered
			p.mu.Unlock()
		}
	}
	if r.cfg.Transactional {
		// Their progress goes out with the next transaction.
		if err := r.Commit(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		for _, tp := range tps {
			delete(r.parts, tp)
		}
		r.mu.Unlock()
		return nil
	}
	final := make(map[progress.TP]int64)
	for _, tp := range tps {
		p := r.lookup(tp)
		if p == nil {
			continue
		}
		if err := p.drain(ctx); err != nil {
			return err
		}
		p.mu.Lock()
		if p.done >= 0 || p.reset {
			final[tp] = p.done
		}
		p.mu.Unlock()
	}
	if err := r.cfg.Progress.Save(ctx, final); err != nil {
		return err
	}
	r.mu.Lock()
	for _, tp := range tps {
		delete(r.parts, tp)
		if r.cfg.Syncs != nil {
			r.cfg.Syncs.Forget(tp.Topic, tp.Partition)
		}
	}
	r.mu.Unlock()
	return nil
}

// drain waits until no record of p is in flight.
func (p *partition) drain(ctx context.Context) error {
	for {
		p.mu.Lock()
		n := p.inflight
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Positions returns, for every assigned partition with progress, the last
// source offset that is safely on the target.
func (r *Replicator) Positions() map[progress.TP]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[progress.TP]int64, len(r.parts))
	for tp, p := range r.parts {
		p.mu.Lock()
		if p.done >= 0 || p.reset {
			out[tp] = p.done
		}
		p.mu.Unlock()
	}
	return out
}

// AckedSinceCommit returns how many records the target acknowledged since
// the last Commit began.
func (r *Replicator) AckedSinceCommit() int64 { return r.ackedSince.Load() }

// Commit saves the progress of every partition and publishes the offset
// syncs that were held back.
func (r *Replicator) Commit(ctx context.Context) error {
	if r.cfg.Transactional {
		return r.eosCommit(ctx)
	}
	r.ackedSince.Store(0)
	return r.cfg.Progress.SaveAndSync(ctx, r.Positions(), r.cfg.Syncs)
}

// Run polls the source and produces to the target until ctx ends, then
// waits up to drain for the records in flight and saves progress one last
// time.
func (r *Replicator) Run(ctx context.Context, drain time.Duration) error {
	// Records are produced under their own context, so that stopping
	// lets those already polled reach the target instead of failing them.
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	for ctx.Err() == nil {
		if r.cfg.Transactional {
			if err := r.eosStep(ctx); err != nil {
				return err
			}
		} else {
			r.handleRestarts(ctx)
		}
		poll, wake := context.WithCancel(ctx)
		r.mu.Lock()
		r.wake = wake
		pending := len(r.restarts) > 0 || len(r.commits) > 0
		r.mu.Unlock()
		if pending {
			wake()
		}
		fs := r.poll(poll)
		wake()
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			r.fetchError(ctx, progress.TP{Topic: topic, Partition: partition}, err)
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			r.copyPartition(pctx, fp)
		})
		if r.cfg.Transactional {
			r.serveCommits(ctx)
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	context.AfterFunc(dctx, pcancel)
	if r.cfg.Transactional {
		return r.commitTxn(dctx)
	}
	if err := r.flushAll(dctx); err != nil {
		return fmt.Errorf("waiting for records in flight: %w", err)
	}
	return r.Commit(dctx)
}

// pollGrace is how long, once one source client answered a poll, the
// others have to return what they hold.
const pollGrace = 2 * time.Millisecond

// poll returns what the source clients have fetched, waiting until one
// answers (with records, errors or nothing) or ctx ends. With several
// clients, the first to answer ends the others' wait; every client's
// answer is returned, so nothing polled is held back to the next call (a
// restart between calls must not meet records fetched before it).
func (r *Replicator) poll(ctx context.Context) kgo.Fetches {
	if len(r.sources) == 1 {
		return r.cfg.Source.PollRecords(ctx, 10000)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	each := make([]kgo.Fetches, len(r.sources))
	var wg sync.WaitGroup
	var first sync.Once
	for i, cl := range r.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			each[i] = cl.PollRecords(ctx, 10000/len(r.sources))
			// Whatever one returns, records or not, ends the wait, a
			// moment later: a client handed an ended context returns at
			// once without its buffered records, and one whose goroutine
			// starts late must not lose its turn.
			first.Do(func() { time.AfterFunc(pollGrace, cancel) })
		}()
	}
	wg.Wait()
	var all kgo.Fetches
	for _, fs := range each {
		all = append(all, fs...)
	}
	return all
}

func (r *Replicator) lookup(tp progress.TP) *partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[tp]
}

// copyPartition sends the records of one fetched partition.
func (r *Replicator) copyPartition(ctx context.Context, fp kgo.FetchTopicPartition) {
	p := r.lookup(progress.TP{Topic: fp.Topic, Partition: fp.Partition})
	if p == nil || len(fp.Records) == 0 {
		return
	}
	now := time.Now()
	for _, rec := range fp.Records {
		p.mu.Lock()
		if p.stopped || p.revoked || p.failed != nil || rec.Offset < p.next {
			// Stale data from before a restart, or a stopped partition.
			p.mu.Unlock()
			continue
		}
		p.next = rec.Offset + 1
		if p.base < 0 {
			p.base = rec.Offset
		}
		gen := p.gen
		if rec.Attrs.IsControl() {
			p.skipLocked(rec.Offset)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()

		origin, has := header(rec, OriginHeader)
		if has && origin == r.cfg.TargetAlias {
			r.cfg.Metrics.RecordsLooped.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, p.tp.Topic).Inc()
			p.mu.Lock()
			p.skipLocked(rec.Offset)
			p.mu.Unlock()
			continue
		}
		out := &kgo.Record{
			Topic:     p.remote,
			Partition: rec.Partition,
			Key:       rec.Key,
			Value:     rec.Value,
			Headers:   rec.Headers,
			Timestamp: rec.Timestamp,
		}
		if r.cfg.AddOrigin && !has {
			out.Headers = append(append(make([]kgo.RecordHeader, 0, len(rec.Headers)+1), rec.Headers...),
				kgo.RecordHeader{Key: OriginHeader, Value: []byte(r.cfg.SourceAlias)})
		}
		if r.cfg.Throttle.Wait(ctx, len(rec.Key)+len(rec.Value)) != nil {
			return // stopping: the record was not sent and is fetched again
		}
		prod := r.producerFor(rec)
		if prod != p.prod {
			// Another codec: the records in flight go first, so that the
			// partition stays in order across producers.
			if p.drain(ctx) != nil {
				return
			}
			p.prod = prod
		}
		pd := &pending{p: p, gen: gen, src: rec.Offset, advanceTo: -1, ts: rec.Timestamp}
		p.mu.Lock()
		if p.gen != gen || p.failed != nil {
			p.mu.Unlock()
			continue
		}
		p.inflight++
		p.last = pd
		pd.careful = rec.Offset <= p.carefulUntil
		p.mu.Unlock()
		p.byteCount.Add(float64(len(rec.Value)))
		if !pd.careful {
			prod.Produce(ctx, out, func(out *kgo.Record, err error) { r.acked(pd, out, err) })
			continue
		}
		sent := make(chan struct{})
		prod.Produce(ctx, out, func(out *kgo.Record, err error) { r.acked(pd, out, err); close(sent) })
		<-sent
	}
	// Ages are sampled once per fetched batch of records: cheap, and what
	// min, max and avg over 30 s need.
	p.recordAge.Set(float64(now.Sub(fp.Records[len(fp.Records)-1].Timestamp).Milliseconds()))
}

// producerFor returns the producer of a record: the one of its source
// codec when ByCodec is set.
func (r *Replicator) producerFor(rec *kgo.Record) *kgo.Client {
	if r.cfg.Transactional || r.cfg.ByCodec == nil {
		return r.cfg.Target
	}
	if cl, ok := r.cfg.ByCodec[rec.Attrs.CompressionType()]; ok {
		return cl
	}
	return r.cfg.Target
}

// producers returns every producer records may go through.
func (r *Replicator) producers() []*kgo.Client {
	out := []*kgo.Client{r.cfg.Target}
	for _, cl := range r.cfg.ByCodec {
		if cl != r.cfg.Target {
			out = append(out, cl)
		}
	}
	return out
}

func (r *Replicator) flushAll(ctx context.Context) error {
	for _, cl := range r.producers() {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// skipLocked marks offset off as handled without a record on the target.
func (p *partition) skipLocked(off int64) {
	if p.last != nil {
		p.last.advanceTo = off
		return
	}
	if off > p.done {
		p.done = off
	}
}

// acked runs in the producer's callback, in offset order per partition.
func (r *Replicator) acked(pd *pending, out *kgo.Record, err error) {
	p := pd.p
	p.mu.Lock()
	p.inflight--
	if pd.gen != p.gen {
		p.mu.Unlock()
		return
	}
	if p.last == pd {
		p.last = nil
	}
	if err != nil {
		first := p.failed == nil
		if first {
			p.failedCareful = pd.careful
			p.failed = fmt.Errorf("producing source offset %d of %s to %s partition %d: %w", pd.src, p.tp, p.remote, out.Partition, err)
		}
		p.mu.Unlock()
		if first {
			r.mu.Lock()
			r.restarts = append(r.restarts, p)
			wake := r.wake
			r.mu.Unlock()
			if wake != nil {
				wake()
			}
		}
		return
	}
	if p.failed != nil {
		// A record after a failed one: its position is not safe.
		p.mu.Unlock()
		return
	}
	p.done = max(p.done, pd.src, pd.advanceTo)
	p.mu.Unlock()
	r.ackedSince.Add(1)
	p.recordCount.Inc()
	if r.acks.Add(1)%latencySample == 1 {
		p.latency.Set(float64(time.Since(pd.ts).Milliseconds()))
	}
	if r.cfg.Syncs != nil {
		r.cfg.Syncs.Acked(p.tp.Topic, p.tp.Partition, pd.src, out.Offset)
	}
}

// latencySample: one acknowledgement in this many updates the replication
// latency metric, so the hot path does not read the clock per record.
const latencySample = 64

// fatalErrs are produce errors that retrying cannot cure: the partition
// stops, loudly, instead of skipping the record.
var fatalErrs = []error{
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
	kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
	kerr.PolicyViolation, kerr.UnsupportedForMessageFormat, kerr.UnsupportedCompressionType,
}

func fatal(err error) bool {
	for _, e := range fatalErrs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// handleRestarts restarts or stops failed partitions once their records in
// flight are back. It runs in the poll loop.
func (r *Replicator) handleRestarts(ctx context.Context) {
	r.mu.Lock()
	ps := r.restarts
	r.restarts = nil
	r.mu.Unlock()
	for _, p := range ps {
		r.restart(ctx, p)
	}
}

func (r *Replicator) restart(ctx context.Context, p *partition) {
	r.stopFetching(p.tp)
	// Nothing of p may be in flight when p.done is read.
	if p.drain(ctx) != nil {
		return
	}
	p.mu.Lock()
	err := p.failed
	from := p.done + 1
	p.mu.Unlock()
	r.resume(ctx, p, from, err, time.Second)
}

// resume restarts p at source offset from after err, or stops it when err
// is fatal. p must have nothing in flight.
func (r *Replicator) resume(ctx context.Context, p *partition, from int64, err error, delay time.Duration) {
	p.mu.Lock()
	if from <= 0 && p.base > 0 {
		from = p.base // nothing copied yet: where this partition began
	}
	isFatal := fatal(err)
	if errors.Is(err, kerr.MessageTooLarge) && !p.failedCareful {
		// The target refused a whole batch: send what was fetched one
		// record at a time to copy the records before the large one and
		// stop exactly at it.
		isFatal = false
		p.carefulUntil = p.next - 1
	}
	p.gen++
	p.last = nil
	if err != nil {
		p.lastErr = err
	}
	p.failed = nil
	p.done = from - 1
	p.next = from
	p.stopped = isFatal
	p.mu.Unlock()
	if err != nil {
		r.cfg.Metrics.PartitionErrors.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)), strconv.FormatBool(isFatal)).Inc()
	}
	if isFatal {
		r.cfg.Log.Error("partition stopped: the record cannot be written to the target; fix the cause and restart kmirror",
			"topic", p.tp.Topic, "partition", p.tp.Partition, "offset", from, "remote", p.remote, "err", err)
		return
	}
	if err != nil {
		r.cfg.Log.Warn("partition restarting after a produce error", "topic", p.tp.Topic, "partition", p.tp.Partition, "from", from, "err", err)
		// The error may come from stale metadata, e.g. partitions just added.
		for _, cl := range r.producers() {
			cl.ForceMetadataRefresh()
		}
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	r.startFetching(p.tp, from)
}

// stopFetching stops fetching tp until startFetching.
func (r *Replicator) stopFetching(tp progress.TP) {
	if r.cfg.Group {
		r.cfg.Source.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		return
	}
	r.source(tp).RemoveConsumePartitions(map[string][]int32{tp.Topic: {tp.Partition}})
}

// startFetching fetches tp from source offset from (the log start when
// from is 0 or less).
func (r *Replicator) startFetching(tp progress.TP, from int64) {
	if r.cfg.Group {
		r.cfg.Source.SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.Topic: {tp.Partition: {Epoch: -1, Offset: max(from, 0)}}})
		if !r.paused.Load() {
			r.cfg.Source.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		}
		return
	}
	off := kgo.NewOffset().At(from)
	if from <= 0 {
		off = kgo.NewOffset().AtStart()
	}
	cl := r.source(tp)
	cl.RemoveConsumePartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: off}})
}

// fetchError handles an error fetching one partition. An offset out of
// range means records are gone from the source before they were copied:
// that is reported with the lost range, never skipped silently.
func (r *Replicator) fetchError(ctx context.Context, tp progress.TP, err error) {
	p := r.lookup(tp)
	if p == nil {
		return
	}
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		r.cfg.Log.Warn("fetch error", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return
	}
	starts, err1 := r.cfg.SourceAdmin.ListStartOffsets(ctx, tp.Topic)
	ends, err2 := r.cfg.SourceAdmin.ListEndOffsets(ctx, tp.Topic)
	if err := errors.Join(err1, err2); err != nil {
		r.cfg.Log.Warn("cannot list offsets after offset out of range; retrying", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return
	}
	start, ok1 := starts.Lookup(tp.Topic, tp.Partition)
	end, ok2 := ends.Lookup(tp.Topic, tp.Partition)
	if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
		r.cfg.Log.Warn("cannot list offsets after offset out of range; retrying", "topic", tp.Topic, "partition", tp.Partition)
		return
	}
	p.mu.Lock()
	want := p.next
	resume := want
	switch {
	case want < start.Offset:
		lost := start.Offset - want
		r.cfg.Log.Error("source records lost before replication: removed upstream (retention or DeleteRecords) before kmirror copied them",
			"topic", tp.Topic, "partition", tp.Partition, "first_lost", want, "last_lost", start.Offset-1, "count", lost)
		r.cfg.Metrics.RecordsLost.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, tp.Topic, strconv.Itoa(int(tp.Partition))).Add(float64(lost))
		resume = start.Offset
	case want > end.Offset:
		r.cfg.Log.Error("source partition is shorter than what was replicated: the topic was deleted and re-created, or its log truncated; records written after offset "+
			strconv.FormatInt(want-1, 10)+" of the old log and not yet copied are lost; continuing from the log start",
			"topic", tp.Topic, "partition", tp.Partition, "expected", want, "log_start", start.Offset, "log_end", end.Offset)
		r.cfg.Metrics.RecordsLost.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, tp.Topic, strconv.Itoa(int(tp.Partition))).Add(0)
		resume = start.Offset
	}
	if resume != want {
		p.next = resume
		p.skipLocked(resume - 1)
		if resume < want {
			// The log restarted below what was done: progress follows it.
			p.done, p.reset = resume-1, true
		}
	}
	p.mu.Unlock()
	r.startFetching(tp, resume)
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

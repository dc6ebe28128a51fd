// Package replicate is the record path: a datapath.Engine that copies the
// records of assigned source partitions, decoded by franz-go consumers, to
// the same partition of their remote topics through franz-go producers.
//
// The Replicator does not decide which partitions it owns: Assign and Revoke
// are its inputs (all partitions of a flow in one process, or a Kafka group
// assignment through datapath.Group).
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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/throttle"
)

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
	// AddOrigin writes datapath.OriginHeader on records that lack it.
	AddOrigin bool
	// Throttle bounds the bytes per second copied; nil is no limit.
	Throttle *throttle.Limiter
	// Group means Source is a member of a Kafka consumer group that hands
	// out the partitions (several workers share a flow, datapath.Group):
	// Assign and Revoke only prepare and drop their state, the group
	// consumer fetches them.
	Group bool
	// Transactional is exactly-once mode: Target is a transactional
	// producer and progress is written in the same transactions as the
	// records (see eos.go).
	Transactional bool
	// SlotProducer, in exactly-once group mode, makes the transactional
	// producer of a slot (internal/slots) of Slots; Target then carries
	// no transactions.
	SlotProducer func(slot int) (*kgo.Client, error)
	Slots        int
	// TopicGone, if set, is called when producing to a remote topic
	// failed because the target does not know it (datapath.TopicGone):
	// deleted on the target, topic sync makes it again.
	TopicGone func(remote string)
	Metrics   *metrics.Metrics
	Log       *slog.Logger
}

// Replicator runs the record path of one flow.
type Replicator struct {
	datapath.Core
	cfg     Config
	sources []*kgo.Client // Source, then MoreSources: one per lane

	mu       sync.Mutex
	parts    map[progress.TP]*partition
	restarts []*partition // failed partitions, handled by the poll loop
	wake     func()       // ends the poll in progress, so restarts are seen

	acks atomic.Int64 // records acknowledged in all

	commits chan commitRequest // exactly-once: commits asked of the poll loop
	txns    map[int]*txn       // exactly-once: the producers by slot
	fatal   error              // exactly-once: the single producer was fenced
	stopped chan struct{}      // closed when Run returns: no poll loop serves commits
}

// New returns a Replicator; call Run to start it.
func New(cfg Config) *Replicator {
	sources := []*kgo.Client{cfg.Source}
	if !cfg.Group {
		sources = append(sources, cfg.MoreSources...)
	}
	r := &Replicator{
		Core: datapath.Core{
			SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias, SourceAdmin: cfg.SourceAdmin,
			Progress: cfg.Progress, Syncs: cfg.Syncs, Metrics: cfg.Metrics, Log: cfg.Log,
		},
		cfg: cfg, sources: sources, parts: make(map[progress.TP]*partition), commits: make(chan commitRequest, 8),
		txns: make(map[int]*txn), stopped: make(chan struct{}),
	}
	if cfg.Transactional && cfg.SlotProducer == nil {
		r.txns[0] = &txn{cl: cfg.Target}
	}
	return r
}

// source is the client that fetches tp.
func (r *Replicator) source(tp progress.TP) *kgo.Client {
	return r.sources[datapath.Lane(tp, len(r.sources))]
}

// byLane splits partitions by the client that fetches them.
func byLane[V any](r *Replicator, m map[string]map[int32]V) []map[string]map[int32]V {
	out := make([]map[string]map[int32]V, len(r.sources))
	for topic, ps := range m {
		for part, v := range ps {
			i := datapath.Lane(progress.TP{Topic: topic, Partition: part}, len(r.sources))
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
	txn    *txn // exactly-once: the producer of its records and progress

	recordCount, byteCount prometheus.Counter
	recordAge, latency     *metrics.Window

	mu sync.Mutex
	datapath.Ledger
	gen      int      // bumped at every restart; acks of older generations are ignored
	next     int64    // lowest source offset accepted from fetches
	inflight int      // records sent and not yet acknowledged, all generations
	last     *pending // newest record in flight in this generation
	failed   error    // set on the first produce error of a generation
	stopped  bool     // a fatal error stopped the partition
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
// are left as they are. In group mode the group consumer fetches them.
func (r *Replicator) Assign(ps []datapath.Partition) {
	add := make(map[string]map[int32]kgo.Offset)
	var added []datapath.Partition
	r.mu.Lock()
	for _, a := range ps {
		if _, ok := r.parts[a.TP]; ok {
			continue
		}
		p := r.newPartition(a)
		if r.cfg.Transactional {
			if p.txn = r.txns[r.slotOf(a.TP)]; p.txn == nil || p.txn.fenced {
				r.cfg.Log.Error("exactly-once: partition not replicated: its slot could not be taken; it is retried at the next rebalance",
					"topic", a.TP.Topic, "partition", a.TP.Partition, "slot", r.slotOf(a.TP))
				continue
			}
		}
		off, from := kgo.NewOffset().AtStart(), "log start"
		if saved, ok := r.cfg.Progress.Get(a.TP); ok && saved >= 0 {
			p.Done, p.next = saved, saved+1
			off, from = kgo.NewOffset().At(saved+1), strconv.FormatInt(saved+1, 10)
		} else if r.cfg.StartAtEnd {
			off, from = kgo.NewOffset().AtEnd(), "log end"
		}
		r.parts[a.TP] = p
		if add[a.TP.Topic] == nil {
			add[a.TP.Topic] = make(map[int32]kgo.Offset)
		}
		add[a.TP.Topic][a.TP.Partition] = off
		added = append(added, a)
		if !r.cfg.Group { // datapath.Group logs the assignment
			r.cfg.Log.Info("replicating partition", "topic", a.TP.Topic, "partition", a.TP.Partition, "remote", a.Remote, "from", from)
		}
	}
	r.mu.Unlock()
	r.awaitProducers(added)
	if r.cfg.Group {
		// A restart pauses its partition on the group consumer and
		// resumes it later, unless the partition was revoked meanwhile;
		// franz-go keeps the pause across assignments, so a partition
		// handed back would never be fetched again. It starts resumed.
		if !r.Paused() {
			r.cfg.Source.ResumeFetchPartitions(datapath.Lists(add))
		}
		return
	}
	for i, m := range byLane(r, add) {
		if len(m) == 0 {
			continue
		}
		if r.Paused() {
			for t := range m {
				r.sources[i].PauseFetchTopics(t)
			}
		}
		r.sources[i].AddConsumePartitions(m)
	}
}

func (r *Replicator) newPartition(a datapath.Partition) *partition {
	m := r.cfg.Metrics
	l := r.labels(a.TP, a.Remote)
	return &partition{
		tp:           a.TP,
		remote:       a.Remote,
		Ledger:       datapath.NewLedger(),
		carefulUntil: -1,
		base:         -1,
		recordCount:  m.RecordCount.With(l),
		byteCount:    m.ByteCount.With(l),
		recordAge:    m.RecordAgeMs.With(l),
		latency:      m.ReplicationLatencyMs.With(l),
	}
}

// labels are the metric labels of tp, whose remote topic is remote.
func (r *Replicator) labels(tp progress.TP, remote string) prometheus.Labels {
	return prometheus.Labels{"source": r.cfg.SourceAlias, "target": r.cfg.TargetAlias, "topic": remote, "partition": strconv.Itoa(int(tp.Partition))}
}

// Revoke stops replicating tps, waits for their records in flight and saves
// their progress.
func (r *Replicator) Revoke(ctx context.Context, tps []progress.TP) error {
	if !r.cfg.Transactional {
		return r.Release(ctx, revoker{r}, tps, true)
	}
	revoker{r}.MarkRevoked(tps)
	// Their progress goes out with the next transaction. Whether or not
	// that works (a fenced worker's does not), they are dropped: what was
	// not committed is copied again by the next owner.
	err := r.Commit(ctx)
	revoker{r}.Delete(tps)
	r.releaseSlots(false)
	return err
}

// revoker is the Replicator's side of datapath.Core.Release.
type revoker struct{ r *Replicator }

func (v revoker) MarkRevoked(tps []progress.TP) []progress.TP {
	r := v.r
	if !r.cfg.Group {
		rm := make(map[string][]int32)
		for _, tp := range tps {
			rm[tp.Topic] = append(rm[tp.Topic], tp.Partition)
		}
		for _, cl := range r.sources {
			cl.RemoveConsumePartitions(rm) // a no-op for those it does not fetch
		}
	}
	var mine []progress.TP
	for _, tp := range tps {
		if p := r.lookup(tp); p != nil {
			p.mu.Lock()
			p.revoked = true // drops records of this partition still buffered
			p.mu.Unlock()
			mine = append(mine, tp)
		}
	}
	return mine
}

func (v revoker) InFlight(tp progress.TP) int {
	p := v.r.lookup(tp)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight
}

func (v revoker) Position(tp progress.TP) (int64, bool) {
	p := v.r.lookup(tp)
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Position()
}

// Delete forgets tps and drops their metric series: a Replicator
// releases partitions only when they leave it (Rewind keeps them).
func (v revoker) Delete(tps []progress.TP) {
	var gone []*partition
	topics := make(map[string]bool) // those with no partition left
	v.r.mu.Lock()
	for _, tp := range tps {
		if p := v.r.parts[tp]; p != nil {
			gone = append(gone, p)
			topics[tp.Topic] = true
		}
		delete(v.r.parts, tp)
	}
	for tp := range v.r.parts {
		delete(topics, tp.Topic)
	}
	v.r.mu.Unlock()
	for _, p := range gone {
		v.r.cfg.Metrics.ForgetPartition(v.r.labels(p.tp, p.remote), p.tp.Topic)
	}
	for topic := range topics {
		v.r.cfg.Metrics.ForgetTopic(v.r.cfg.SourceAlias, v.r.cfg.TargetAlias, topic)
	}
}

// drain waits until no record of p is in flight.
func (p *partition) drain(ctx context.Context) error {
	return datapath.WaitIdle(ctx, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.inflight == 0
	})
}

// Positions returns, for every assigned partition with progress, the last
// source offset that is safely on the target.
func (r *Replicator) Positions() map[progress.TP]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[progress.TP]int64, len(r.parts))
	for tp, p := range r.parts {
		p.mu.Lock()
		if off, ok := p.Position(); ok {
			out[tp] = off
		}
		p.mu.Unlock()
	}
	return out
}

// Commit saves the progress of every partition and publishes the offset
// syncs that were held back.
func (r *Replicator) Commit(ctx context.Context) error {
	if r.cfg.Transactional {
		return r.eosCommit(ctx)
	}
	return r.Save(ctx, r.Positions())
}

// Run polls the source and produces to the target until ctx ends, then
// waits up to drain for the records in flight and saves progress one last
// time: of every record the target acknowledged, even when some were not
// in time.
func (r *Replicator) Run(ctx context.Context, drain time.Duration) error {
	// Records are produced under their own context, so that stopping
	// lets those already polled reach the target instead of failing them.
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	defer close(r.stopped)
	for ctx.Err() == nil {
		if r.cfg.Transactional {
			if err := r.eosStep(ctx); err != nil {
				r.releaseSlots(true)
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
		err := r.commitTxn(dctx)
		r.releaseSlots(true)
		r.mu.Lock()
		fatal := r.fatal
		r.mu.Unlock()
		return errors.Join(fatal, err)
	}
	if err := r.flushAll(dctx); err != nil {
		// The target did not acknowledge everything in time: save the
		// progress of what it did (Positions counts acknowledged records
		// only), in a time of its own; the rest is copied again at the
		// next start.
		cctx, ccancel := context.WithTimeout(context.Background(), max(drain/2, 5*time.Second))
		defer ccancel()
		return errors.Join(fmt.Errorf("waiting for records in flight: %w", err), r.Commit(cctx))
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

var _ datapath.Engine = (*Replicator)(nil)

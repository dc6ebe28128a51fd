package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/lograte"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/wire"
)

// Settings are the translation settings of a flow.
type Settings struct {
	Mode           Mode
	IndexTopic     string // "" in mm2 mode
	IndexRetention time.Duration
	MaxSyncs       int
}

// FlowSettings maps the kmirror.offset.* settings of f, which config
// read and checked, filling in the defaults.
func FlowSettings(f *config.Flow) Settings {
	s := Settings{Mode: Exact, IndexRetention: offsetsync.DefaultIndexRetention, MaxSyncs: DefaultMaxSyncs}
	if f.OffsetTranslation == config.TranslationMM2 {
		s.Mode = MM2
	} else {
		s.IndexTopic = offsetsync.IndexTopic(f.Source)
	}
	if f.OffsetIndexRetention != 0 {
		s.IndexRetention = f.OffsetIndexRetention
	}
	if f.MaxSyncsPerPartition > 0 {
		s.MaxSyncs = f.MaxSyncsPerPartition
	}
	return s
}

// SetupWriter prepares the flow's offset-sync writer for the translation
// mode: in exact mode it creates the offset index topic on the target
// (through tgtAdm) and switches w to exact mode, writing index entries
// through indexCl, a producer on the target that is not the replication
// producer (w's own client when the offset-syncs topic is on the target).
// In mm2 mode it does nothing.
func SetupWriter(ctx context.Context, f *config.Flow, w *offsetsync.Writer, tgtAdm *kadm.Client, indexCl *kgo.Client) error {
	s := FlowSettings(f)
	if s.Mode != Exact {
		return nil
	}
	if err := offsetsync.CreateIndexTopic(ctx, tgtAdm, s.IndexTopic, f.OffsetSyncsTopicReplicationFactor,
		"offset-syncs.topic.replication.factor", s.IndexRetention); err != nil {
		return fmt.Errorf("flow %s: %w", f.Name(), err)
	}
	w.EnableExact(indexCl, s.IndexTopic)
	return nil
}

// WriteTimeout bounds each write of a group's checkpoints: a target that
// does not answer fails the write (retried at the next interval) instead
// of holding up the task; a stop ends the wait at once.
const WriteTimeout = 30 * time.Second

// Config configures a Task.
type Config struct {
	Flow    *config.Flow
	Metrics *metrics.Metrics // nil: a private registry
	Log     *slog.Logger     // nil: slog.Default

	// TransactionalID, when set, makes the task write each round's
	// checkpoints in one transaction under it (group mode): a task that
	// starts fences the one before it, which may still believe it leads
	// the flow. "" writes them plainly.
	TransactionalID string
}

// ErrFenced ends a task whose transactional ID another task took (a new
// leader of the flow). ErrTxnUnknown ends one whose transaction could be
// neither committed nor aborted. Either way the task stops as if it had
// lost the lead, and should not start again at once (Yielded).
var (
	ErrFenced     = errors.New("another worker's checkpoint task took over this flow's checkpoints (fenced)")
	ErrTxnUnknown = errors.New("a checkpoint transaction ended in an unknown state")
)

// Yielded reports whether a task ended with ErrFenced or ErrTxnUnknown.
func Yielded(err error) bool { return errors.Is(err, ErrFenced) || errors.Is(err, ErrTxnUnknown) }

// Task runs the checkpoint side of one flow.
type Task struct {
	cfg      *config.Flow
	set      Settings
	pol      policy.Policy
	topics   *policy.Filter
	groups   *policy.Filter
	m        *metrics.Metrics
	log      *slog.Logger
	store    *Store
	cpTopic  string
	syncs    string
	syncConn []kgo.Opt // cluster holding the offset-syncs topic
	tgtConn  []kgo.Opt

	srcAdm, tgtAdm *kadm.Client
	producer       *kgo.Client // transactional while txnID is set
	txnID          string      // "" once the target refused it (plain writes)
	closers        []func()

	// writeTimeout bounds each write of a group's checkpoints
	// (WriteTimeout unless a test sets it).
	writeTimeout time.Duration

	// logs limits the per-group warnings that repeat every interval.
	logs lograte.Limiter

	mu     sync.Mutex
	last   map[string]map[cpKey]wire.Checkpoint // CheckpointStore: group -> partition -> last
	known  int64                                // the checkpoints topic (partition 0) is applied to last up to here
	marks  int64                                // commit markers of this task's transactions past known
	reads  int                                  // times the checkpoints topic was read
	listed []string                             // groups found at the last refresh
	states map[string]string                    // their state on the source then
}

type cpKey struct {
	topic     string
	partition int32
}

// New builds a Task and its clients; Run starts it.
func New(c Config) (*Task, error) {
	f := c.Flow
	t := &Task{cfg: f, m: c.Metrics, log: c.Log, last: make(map[string]map[cpKey]wire.Checkpoint), writeTimeout: WriteTimeout,
		txnID: c.TransactionalID}
	if t.m == nil {
		t.m = metrics.New()
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.log = t.log.With("task", "checkpoint")
	t.set, t.pol, t.topics, t.groups, t.syncs = FlowSettings(f), f.Policy, f.TopicFilter, f.GroupFilter, f.OffsetSyncsTopic()
	t.cpTopic = t.pol.CheckpointsTopic(f.Source)
	t.store = NewStore(t.set.Mode, t.set.MaxSyncs)

	syncProps := f.TargetConsumer
	if f.OffsetSyncsTopicLocation == "source" {
		syncProps = f.SourceConsumer
	}
	var err error
	if t.syncConn, err = t.conn("offset-syncs-consumer", clients.Consumer, syncProps); err != nil {
		return nil, err
	}
	if t.tgtConn, err = t.conn("checkpoint-target-consumer", clients.Consumer, f.TargetConsumer); err != nil {
		return nil, err
	}
	srcAdm, err := t.client("checkpoint-source-admin", clients.Admin, f.SourceAdmin)
	if err != nil {
		t.Close()
		return nil, err
	}
	tgtAdm, err := t.client("checkpoint-target-admin", clients.Admin, f.TargetAdmin)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.srcAdm, t.tgtAdm = kadm.NewClient(srcAdm), kadm.NewClient(tgtAdm)
	if err := t.newProducer(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// newProducer makes (or makes again) the task's producer on the target:
// transactional under t.txnID when set.
func (t *Task) newProducer() error {
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())}
	if t.txnID != "" {
		opts = append(opts, kgo.TransactionalID(t.txnID))
	}
	cl, _, err := clients.New(clients.ID(t.cfg.Name(), "checkpoint-producer"), clients.Producer, t.cfg.TargetProducer, opts...)
	if err != nil {
		return fmt.Errorf("flow %s, checkpoint-producer client: %w", t.cfg.Name(), err)
	}
	if t.producer != nil {
		t.producer.Close()
	}
	t.producer = cl
	return nil
}

func (t *Task) conn(role string, kind clients.Role, props map[string]string) ([]kgo.Opt, error) {
	opts, err := clients.Build(clients.ID(t.cfg.Name(), role), kind, props)
	if err != nil {
		return nil, fmt.Errorf("flow %s, %s client: %w", t.cfg.Name(), role, err)
	}
	return opts, nil
}

func (t *Task) client(role string, kind clients.Role, props map[string]string, extra ...kgo.Opt) (*kgo.Client, error) {
	cl, _, err := clients.New(clients.ID(t.cfg.Name(), role), kind, props, extra...)
	if err != nil {
		return nil, fmt.Errorf("flow %s, %s client: %w", t.cfg.Name(), role, err)
	}
	t.closers = append(t.closers, cl.Close)
	return cl, nil
}

// Close releases the clients; Run calls it when it returns.
func (t *Task) Close() {
	if t.producer != nil {
		t.producer.Close()
		t.producer = nil
	}
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
}

// Store returns the task's offset-sync store.
func (t *Task) Store() *Store { return t.store }

// Run creates the checkpoints topic, fences the task before it (with a
// transactional ID), loads the last checkpoints, follows the offset syncs,
// and emits checkpoints (and syncs group offsets) at the configured
// intervals until ctx ends. It returns an error when the task cannot
// start, and one that Yielded reports when another task fenced it.
func (t *Task) Run(ctx context.Context) error {
	defer t.Close()
	f := t.cfg
	if err := t.createTopic(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("flow %s: %w", f.Name(), err)
	}
	// Fence first, then read: whatever the task before wrote is then
	// committed or aborted, and nothing more of it comes.
	if err := t.fence(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("flow %s: %w", f.Name(), err)
	}
	if err := t.loadCheckpoints(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		t.log.Warn("could not read the checkpoints topic; monotonicity starts afresh", "topic", t.cpTopic, "err", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the wait: a fenced task ends its follower too
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := t.followSyncs(ctx, false); err != nil && ctx.Err() == nil {
			t.log.Error("following offset syncs stopped", "topic", t.syncs, "err", err)
		}
	}()

	t.refreshGroups(ctx)
	emit := ticker(f.EmitCheckpointsEnabled, f.EmitCheckpointsInterval)
	refresh := ticker(f.RefreshGroupsEnabled, f.RefreshGroupsInterval)
	syncGroups := ticker(f.SyncGroupOffsetsEnabled, f.SyncGroupOffsetsInterval)
	defer emit.Stop()
	defer refresh.Stop()
	defer syncGroups.Stop()
	t.log.Info("checkpoint task started", "mode", t.set.Mode, "checkpoints", t.cpTopic, "offset_syncs", t.syncs)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-refresh.C:
			t.refreshGroups(ctx)
		case <-emit.C:
			if !t.store.Ready() {
				continue
			}
			if err := t.EmitOnce(ctx); err != nil {
				return fmt.Errorf("flow %s: %w", f.Name(), err)
			}
		case <-syncGroups.C:
			if t.store.Ready() {
				t.SyncGroupsOnce(ctx)
			}
		}
	}
}

// createTopic makes the checkpoints topic if it is missing. A worker
// that starts leading a flow mid-run can find the target unreachable or
// without a controller for a while: such errors are retried until ctx
// ends, with a warning; a refusal (a replication factor the target
// cannot have, no permission) ends the task at once.
func (t *Task) createTopic(ctx context.Context) error {
	spec := internaltopic.Compacted(t.cpTopic, t.cfg.CheckpointsTopicReplicationFactor, "checkpoints.topic.replication.factor")
	tries := 0
	return backoff.Retry(ctx, backoff.Policy{First: 200 * time.Millisecond, Max: 10 * time.Second, For: 1000 * time.Hour},
		func(err error) bool {
			if !internaltopic.Passing(ctx, t.tgtAdm, spec, err) {
				return false
			}
			if tries++; tries == 1 || tries%10 == 0 {
				t.log.Warn("could not create the checkpoints topic; retrying", "topic", t.cpTopic, "attempts", tries, "err", err)
			}
			return true
		},
		func() error {
			_, err := internaltopic.CreateOnce(ctx, t.tgtAdm, spec)
			return err
		})
}

// fenceFor bounds how long fence retries errors that pass by themselves
// before the task writes plainly: a target whose transaction coordinator
// never comes up (a one-broker cluster with transaction.state.log.*
// settings it cannot meet) would otherwise get no checkpoints at all.
var fenceFor = 2 * time.Minute

// fence takes the task's transactional ID (InitProducerID): the
// coordinator aborts what a task before it left open and refuses that
// task's writes from then on. A target that does not let kmirror use the
// ID, or whose coordinator does not answer within fenceFor, gets plain
// writes, with a warning. Errors that pass by themselves are retried
// meanwhile, each with a new producer (franz-go keeps a producer ID's
// failure).
func (t *Task) fence(ctx context.Context) error {
	if t.txnID == "" {
		return nil
	}
	plain := func(why string, err error) error {
		t.log.Warn(why+": checkpoints are written without fencing, and two workers that both believe they lead the flow can both write them",
			"transactional_id", t.txnID, "err", err)
		t.txnID = ""
		return t.newProducer()
	}
	tries := 0
	err := backoff.Retry(ctx, backoff.Policy{First: 200 * time.Millisecond, Max: 10 * time.Second, For: fenceFor},
		func(err error) bool {
			if errors.Is(err, ErrFenced) || !kafkaerr.Transient(err) {
				return false
			}
			if tries++; tries == 1 || tries%10 == 0 {
				t.log.Warn("could not take the checkpoints' transactional ID; retrying", "transactional_id", t.txnID, "attempts", tries, "err", err)
			}
			return t.newProducer() == nil
		},
		func() error {
			_, _, err := t.producer.ProducerID(ctx)
			switch {
			case err == nil:
				t.log.Info("checkpoints are written in transactions; a task before this one is fenced", "transactional_id", t.txnID)
				return nil
			case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
				return plain("the target does not let kmirror use the checkpoints' transactional ID (grant WRITE and DESCRIBE on it)", err)
			case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
				return fmt.Errorf("%w: %v", ErrFenced, err)
			}
			return err
		})
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrFenced) && kafkaerr.Transient(err) {
		return plain(fmt.Sprintf("the target's transaction coordinator did not answer for %v", fenceFor), err)
	}
	return err
}

// ticker returns a ticker for an enabled interval, else one that never
// fires.
func ticker(enabled bool, d time.Duration) *time.Ticker {
	if !enabled || d <= 0 {
		tk := time.NewTicker(time.Hour)
		tk.Stop()
		return tk
	}
	return time.NewTicker(d)
}

// skipper decodes records of an internal topic, warning about and
// counting the ones it cannot read.
func skipper[T any](t *Task, cluster string, decode func(k, v []byte) (T, error)) *wire.Skipper[T] {
	return &wire.Skipper[T]{Decode: decode, OnSkip: func(e *wire.DecodeError) {
		t.log.Warn("skipping a record that is not in MM2's format", "record", e.Error())
		t.m.CorruptRecords.WithLabelValues(cluster, e.Topic).Inc()
	}}
}

// loadCheckpoints reads the checkpoints topic (MM2's CheckpointStore).
func (t *Task) loadCheckpoints(ctx context.Context) error {
	t.mu.Lock()
	t.last, t.known, t.marks = make(map[string]map[cpKey]wire.Checkpoint), 0, 0
	t.mu.Unlock()
	return t.readCheckpoints(ctx)
}

// readCheckpoints applies what the checkpoints topic holds past t.known
// to t.last, in log order, and moves t.known to the end it read to.
func (t *Task) readCheckpoints(ctx context.Context) error {
	sk := skipper(t, t.cfg.Target, wire.DecodeCheckpoint)
	t.mu.Lock()
	from := t.known
	t.mu.Unlock()
	var read []wire.Checkpoint
	ends, err := readlog.From(ctx, t.tgtConn, t.cpTopic, map[int32]int64{0: from}, func(r *kgo.Record) {
		if r.Partition != 0 {
			return
		}
		if c, ok := sk.Record(r); ok {
			read = append(read, c)
		}
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads++
	for _, c := range read {
		if t.last[c.Group] == nil {
			t.last[c.Group] = make(map[cpKey]wire.Checkpoint)
		}
		t.last[c.Group][cpKey{c.Topic, c.Partition}] = c
	}
	t.known, t.marks = ends[0], 0
	return nil
}

// catchUp makes t.last hold the newest checkpoints before a round. Another
// worker may have led the flow meanwhile (a worker stopped past its
// session comes back believing it still leads) and written checkpoints
// from newer offset syncs: they count as the last ones, so that none this
// worker writes goes back from them. One ListOffsets request per round
// tells whether anyone but this task wrote; only then is the topic read.
func (t *Task) catchUp(ctx context.Context) error {
	ends, err := t.tgtAdm.ListEndOffsets(ctx, t.cpTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return err
	}
	end, ok := ends.Lookup(t.cpTopic, 0)
	if !ok {
		return fmt.Errorf("no partition 0 listed for %s", t.cpTopic)
	}
	t.mu.Lock()
	if end.Offset < t.known {
		// The topic was deleted and made again: read it all.
		t.known, t.marks = 0, 0
	}
	behind := false
	switch {
	case end.Offset == t.known+t.marks:
		// Past t.known only this task's commit markers.
		t.known, t.marks = end.Offset, 0
	case end.Offset > t.known+t.marks:
		behind = true
	}
	// Below t.known+t.marks: a marker of this task is not written yet.
	t.mu.Unlock()
	if !behind {
		return nil
	}
	return t.readCheckpoints(ctx)
}

// wroteLocked notes checkpoints this task has written (offsets set by the
// producer): while they follow t.known without a gap, nobody else wrote
// in between and the topic need not be read for them. A transaction's
// records are followed by its commit marker, which takes an offset too
// (committed set): it is counted in t.marks until a catchUp or the next
// write finds the topic's end where it should be. t.mu is held.
func (t *Task) wroteLocked(recs []*kgo.Record, committed bool) {
	offs := make([]int64, 0, len(recs))
	for _, r := range recs {
		offs = append(offs, r.Offset)
	}
	slices.Sort(offs)
	if len(offs) > 0 && t.marks > 0 && offs[0] == t.known+t.marks {
		// A transaction's records come after the markers of the ones
		// before it: nothing else lies between.
		t.known, t.marks = offs[0], 0
	}
	for _, o := range offs {
		if o == t.known {
			t.known++
		}
	}
	if committed {
		t.marks++
	}
}

// followSyncs fills the store: in exact mode from the offset index first,
// then from the offset-syncs topic, read from its start. It marks the store
// ready once the syncs topic is read to the end it had at start, then
// follows it until ctx ends, or returns then when once is set.
func (t *Task) followSyncs(ctx context.Context, once bool) error {
	indexed, err := t.readIndex(ctx)
	if err != nil {
		return err
	}
	end, err := t.syncsEnd(ctx)
	if err != nil {
		return err
	}
	// Syncs of indexed partitions read before the end: the index already
	// holds their history up to its last entry, so only the syncs written
	// since then count (see afterIndex).
	latest := make(map[cpKey][]keptSync)
	ready := func() {
		t.ready(latest)
		latest = nil
	}
	if end == 0 {
		ready()
		if once {
			return nil
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.syncs: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, t.syncConn...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	sk := skipper(t, t.syncCluster(), wire.DecodeOffsetSync)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(_ string, _ int32, err error) {
			t.log.Warn("reading offset syncs", "topic", t.syncs, "err", err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			s, ok := wire.OffsetSync{}, false
			if !r.Attrs.IsControl() {
				s, ok = sk.Record(r)
			}
			if ok {
				k := cpKey{s.Topic, s.Partition}
				if last, ok := indexed[k]; ok && latest != nil {
					latest[k] = afterIndex(latest[k], keptSync{s, r.ProducerID}, last)
				} else {
					t.store.ApplyFrom(s, r.ProducerID)
				}
			}
			if latest != nil && r.Offset >= end-1 {
				ready()
			}
		})
		if once && latest == nil {
			return nil
		}
	}
}

// readIndex applies the flow's offset index, if it keeps one, and returns
// the upstream offset of each partition's last entry. An index that
// cannot be read is logged: history is then what the offset-syncs topic
// kept.
func (t *Task) readIndex(ctx context.Context) (map[cpKey]int64, error) {
	indexed := make(map[cpKey]int64)
	if t.set.IndexTopic == "" {
		return indexed, nil
	}
	sk := skipper(t, t.cfg.Target, wire.DecodeOffsetSync)
	err := readlog.ToEnd(ctx, t.tgtConn, t.set.IndexTopic, func(r *kgo.Record) {
		if s, ok := sk.Record(r); ok && s.UpstreamOffset >= 0 && s.DownstreamOffset >= 0 {
			// With the writer's producer ID, as the offset-syncs
			// topic's: no run across two writers' entries. (With the
			// syncs topic on the source, the index has a producer of
			// its own: the run from the index's last entry to the
			// next sync read there ends, and translates as MM2 does.)
			t.store.ApplyFrom(s, r.ProducerID)
			indexed[cpKey{s.Topic, s.Partition}] = s.UpstreamOffset
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t.log.Warn("offset index not read; history is what the offset-syncs topic kept", "topic", t.set.IndexTopic, "err", err)
	}
	return indexed, nil
}

// ready applies the syncs of indexed partitions kept while reading up to
// the end (latest), partition by partition in order, and marks the store
// ready: translations may start.
func (t *Task) ready(latest map[cpKey][]keptSync) {
	keys := make([]cpKey, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].topic < keys[j].topic || keys[i].topic == keys[j].topic && keys[i].partition < keys[j].partition
	})
	for _, k := range keys {
		for _, s := range latest[k] {
			t.store.ApplyFrom(s.OffsetSync, s.pid)
		}
	}
	t.store.SetReady()
}

// keptSync is a sync kept until the offset-syncs topic is read to its
// end, with the producer ID of its record (Store.ApplyFrom).
type keptSync struct {
	wire.OffsetSync
	pid int64
}

// afterIndex appends s, the next sync the offset-syncs topic holds for a
// partition whose index ends with an entry at upstream offset last, to
// kept, and returns the syncs to apply over the index: from the last one
// at or before last on. The index was read to its end before the syncs
// topic, so the writer may have added run boundaries since; applying only
// the newest sync would join the index's last entry to it as one run and
// translate an offset past a marker or an aborted transaction in between
// too far ahead (a consumer resuming there would miss records).
func afterIndex(kept []keptSync, s keptSync, last int64) []keptSync {
	if s.UpstreamOffset <= last {
		return append(kept[:0], s) // the index holds the history up to here
	}
	return append(kept, s)
}

func (t *Task) syncCluster() string {
	if t.cfg.OffsetSyncsTopicLocation == "source" {
		return t.cfg.Source
	}
	return t.cfg.Target
}

// syncsEnd returns the last stable offset of the offset-syncs topic
// (0 if the topic does not exist yet).
func (t *Task) syncsEnd(ctx context.Context) (int64, error) {
	cl, err := kgo.NewClient(t.syncConn...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListCommittedOffsets(ctx, t.syncs)
		if err == nil {
			if o, ok := ends.Lookup(t.syncs, 0); ok {
				if o.Err == nil {
					return o.Offset, nil
				}
				err = o.Err
			} else {
				return 0, nil
			}
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, nil
		}
		t.log.Warn("listing the end of the offset-syncs topic; retrying", "topic", t.syncs, "err", err)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// refreshGroups lists the source's consumer groups that pass the group
// filter.
func (t *Task) refreshGroups(ctx context.Context) {
	listed, err := t.srcAdm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		t.log.Warn("listing consumer groups on the source failed", "err", err)
		return
	}
	var gs []string
	states := make(map[string]string)
	for _, g := range listed.Sorted() {
		if g.GroupType == "share" || g.GroupType == "streams" || (g.ProtocolType != "" && g.ProtocolType != "consumer") {
			continue
		}
		if t.groups.Match(g.Group) {
			gs = append(gs, g.Group)
			states[g.Group] = g.State
		}
	}
	t.mu.Lock()
	t.listed, t.states = gs, states
	if err == nil {
		t.dropUnlistedLocked(gs)
	}
	t.mu.Unlock()
}

// dropUnlistedLocked forgets the groups not in listed, gone from the
// source (or the filter): they are checkpointed no more, so their last
// checkpoints and series go; t.mu is held.
func (t *Task) dropUnlistedLocked(listed []string) {
	keep := make(map[string]bool, len(listed))
	for _, g := range listed {
		keep[g] = true
	}
	for g, last := range t.last {
		if !keep[g] {
			for k := range last {
				t.m.ForgetCheckpoint(t.cfg.Source, t.cfg.Target, g, k.topic, k.partition)
			}
			delete(t.last, g)
		}
	}
	for _, gs := range t.m.LastCheckpoints.Groups() {
		if gs.Source == t.cfg.Source && gs.Target == t.cfg.Target && !keep[gs.Group] {
			t.m.LastCheckpoints.DeleteGroup(gs.Source, gs.Target, gs.Group)
		}
	}
}

// noteChecked records, for the dashboard, that group's committed offsets
// offs were fetched at at and that translated of them got a translation,
// and its state on the source at the last listing; a group with no
// committed offset in a replicated topic is not recorded. t.mu is held.
func (t *Task) noteChecked(group string, offs kadm.OffsetResponses, translated int, at time.Time) {
	committed := 0
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 && t.topics.Match(o.Topic) {
			committed++
		}
	})
	if committed == 0 { // nothing of it is replicated: no cutover to plan
		t.m.LastCheckpoints.DeleteGroup(t.cfg.Source, t.cfg.Target, group)
		return
	}
	t.m.LastCheckpoints.UpdateGroup(t.cfg.Source, t.cfg.Target, group, func(gs *metrics.GroupStatus) {
		gs.Interval, gs.CheckedAt, gs.Sync = t.cfg.EmitCheckpointsInterval, at, t.cfg.SyncGroupOffsetsEnabled
		gs.Committed, gs.Untranslated = committed, max(committed-translated, 0)
		gs.SourceState = t.states[group]
	})
}

// pruneLocked forgets the last checkpoints of group's partitions that it
// has no committed offset for any more (their topic was deleted, or the
// offsets expired), and their series; t.mu is held.
func (t *Task) pruneLocked(group string, offs kadm.OffsetResponses) {
	last := t.last[group]
	if len(last) == 0 {
		return
	}
	has := make(map[cpKey]bool)
	offs.Each(func(o kadm.OffsetResponse) {
		has[cpKey{t.rename(o.Topic), o.Partition}] = true
	})
	for k := range last {
		if !has[k] {
			delete(last, k)
			t.m.ForgetCheckpoint(t.cfg.Source, t.cfg.Target, group, k.topic, k.partition)
		}
	}
}

// rename names a source topic on the target, as MM2's checkpoint task
// does: a topic that came from the target gets its original name back.
func (t *Task) rename(topic string) string {
	if src, ok := t.pol.TopicSource(topic); ok && src == t.cfg.Target {
		return t.pol.OriginalTopic(topic)
	}
	return t.pol.FormatRemoteTopic(t.cfg.Source, topic)
}

// translateGroup turns a group's committed source offsets into checkpoints.
func (t *Task) translateGroup(group string, offs kadm.OffsetResponses) []wire.Checkpoint {
	var out []wire.Checkpoint
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At < 0 || !t.topics.Match(o.Topic) {
			return
		}
		down, ok := t.store.Translate(o.Topic, o.Partition, o.At)
		if !ok || down < 0 {
			return
		}
		out = append(out, wire.Checkpoint{Group: group, Topic: t.rename(o.Topic), Partition: o.Partition,
			UpstreamOffset: o.At, DownstreamOffset: down, Metadata: o.Metadata})
	})
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

// newer is MM2's rule for emitting a checkpoint over the last one: a first
// checkpoint, an upstream rewind, or a downstream advance.
func newer(c wire.Checkpoint, last wire.Checkpoint, had bool) bool {
	return !had || c.UpstreamOffset < last.UpstreamOffset || c.DownstreamOffset > last.DownstreamOffset
}

// emitted are the checkpoints of one group written in a round.
type emitted struct {
	group string
	at    time.Time // when its offsets were fetched
	cps   []wire.Checkpoint
}

// EmitOnce computes the checkpoints of every listed group and writes those
// that are new, all in one write (one transaction with a transactional
// ID). It returns an error only when the task must stop (Yielded); other
// failures are logged and retried at the next interval.
func (t *Task) EmitOnce(ctx context.Context) error {
	t.mu.Lock()
	groups := append([]string(nil), t.listed...)
	t.mu.Unlock()
	if len(groups) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.writeTimeout)
	err := t.catchUp(cctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			// Without the newest checkpoints one could go back: wait.
			t.logs.Warn(t.log, "read checkpoints|"+err.Error(), "reading the checkpoints topic failed; checkpoints wait for the next interval", "topic", t.cpTopic, "err", err)
		}
		return nil
	}
	round, recs := t.translateRound(groups, t.srcAdm.FetchManyOffsets(ctx, groups...))
	if len(recs) == 0 {
		return nil
	}
	// The wait is bounded: a target that does not answer holds up no
	// stop.
	wctx, cancel := context.WithTimeout(ctx, t.writeTimeout)
	err = t.write(wctx, recs)
	cancel()
	switch {
	case ctx.Err() != nil: // stopping: the next leader fences what is left
		return nil
	case Yielded(err):
		return err
	case err != nil:
		t.logs.Warn(t.log, "write checkpoints|"+err.Error(), "writing checkpoints failed; retrying at the next interval", "groups", len(round), "err", err)
		return nil
	}
	t.wrote(round)
	return nil
}

// translateRound turns the groups' fetched offsets into the checkpoints
// that are new (MM2's rule, newer) and their records.
func (t *Task) translateRound(groups []string, fetched kadm.FetchOffsetsResponses) ([]emitted, []*kgo.Record) {
	var round []emitted
	var recs []*kgo.Record
	for _, g := range groups {
		r, ok := fetched[g]
		if !ok {
			continue
		}
		if r.Err != nil {
			t.logs.Warn(t.log, "fetch offsets|"+r.Err.Error(), "fetching committed offsets on the source failed", "group", g, "err", r.Err)
			continue
		}
		e := emitted{group: g, at: time.Now()}
		t.mu.Lock()
		t.pruneLocked(g, r.Fetched)
		last := t.last[g]
		translated := t.translateGroup(g, r.Fetched)
		t.noteChecked(g, r.Fetched, len(translated), e.at)
		for _, c := range translated {
			prev, had := last[cpKey{c.Topic, c.Partition}]
			if !newer(c, prev, had) {
				continue
			}
			key, value, err := wire.Encode(c)
			if err != nil {
				continue
			}
			e.cps = append(e.cps, c)
			recs = append(recs, &kgo.Record{Topic: t.cpTopic, Partition: 0, Key: key, Value: value, Timestamp: e.at})
		}
		t.mu.Unlock()
		if len(e.cps) > 0 {
			round = append(round, e)
		}
	}
	return round, recs
}

// wrote makes a written round's checkpoints the last ones, and sets their
// latency and dashboard entries.
func (t *Task) wrote(round []emitted) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range round {
		ms := float64(time.Since(e.at).Milliseconds())
		if t.last[e.group] == nil {
			t.last[e.group] = make(map[cpKey]wire.Checkpoint)
		}
		for _, c := range e.cps {
			t.last[e.group][cpKey{c.Topic, c.Partition}] = c
			t.m.CheckpointLatencyMs.WithLabelValues(t.cfg.Source, t.cfg.Target, e.group, c.Topic, strconv.Itoa(int(c.Partition))).Set(ms)
			t.m.LastCheckpoints.Set(metrics.Checkpoint{Source: t.cfg.Source, Target: t.cfg.Target, Group: e.group, Topic: c.Topic,
				Partition: c.Partition, Upstream: c.UpstreamOffset, Downstream: c.DownstreamOffset, At: time.Now()})
		}
	}
}

// write writes a round's checkpoints: plainly, or in one transaction when
// the task has a transactional ID. A transaction that fails is aborted;
// one the coordinator fenced, or that can be neither committed nor
// aborted, ends the task (Yielded). On success the records' offsets (and
// the commit marker that follows them) are noted, so that the next
// catchUp need not read them back.
func (t *Task) write(ctx context.Context, recs []*kgo.Record) error {
	if t.txnID == "" {
		err := clients.ProduceWait(ctx, t.producer, recs...)
		if err == nil {
			t.mu.Lock()
			t.wroteLocked(recs, false)
			t.mu.Unlock()
		}
		return err
	}
	if err := t.producer.BeginTransaction(); err != nil {
		return t.txnErr(err, ErrTxnUnknown)
	}
	err := clients.ProduceWait(ctx, t.producer, recs...)
	if err == nil {
		if err = t.producer.EndTransaction(ctx, kgo.TryCommit); err == nil {
			t.mu.Lock()
			t.wroteLocked(recs, true)
			t.mu.Unlock()
			return nil
		}
	}
	// Aborted records stay in the log (read_committed skips them): the
	// topic's end passes t.known and the next catchUp reads it. A stop
	// waits for the abort only briefly: the next task's fence aborts
	// what is left open.
	wait := t.writeTimeout
	if errors.Is(ctx.Err(), context.Canceled) {
		wait = stopAbort
	}
	actx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	aerr := t.producer.AbortBufferedRecords(actx)
	if aerr == nil {
		aerr = t.producer.EndTransaction(actx, kgo.TryAbort)
	}
	if aerr != nil {
		return t.txnErr(aerr, ErrTxnUnknown)
	}
	return t.txnErr(err, nil)
}

// stopAbort bounds the abort of a transaction a stop interrupted.
const stopAbort = 2 * time.Second

// txnErr returns err as ErrFenced when the coordinator fenced the task,
// as ErrTxnUnknown when the transactional ID is no longer allowed, else
// wrapped in otherwise (nil: err as it is).
func (t *Task) txnErr(err error, otherwise error) error {
	switch {
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return fmt.Errorf("%w: %v", ErrFenced, err)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		// A permission taken away: the next start writes plainly.
		return fmt.Errorf("%w: %v", ErrTxnUnknown, err)
	}
	if otherwise != nil {
		return fmt.Errorf("%w: %v", otherwise, err)
	}
	return err
}

// Checkpoints returns the last checkpoint of every partition of group.
func (t *Task) Checkpoints(group string) []wire.Checkpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []wire.Checkpoint
	for _, c := range t.last[group] {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

// Translate reads the flow's offset syncs once and translates the offsets
// group has committed on the source into checkpoints for the target
// (downstream topic names). It is what `kmirror offsets` prints.
func Translate(ctx context.Context, f *config.Flow, group string, log *slog.Logger) ([]wire.Checkpoint, error) {
	t, err := New(Config{Flow: f, Log: log})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if err := t.followSyncs(ctx, true); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	offs, err := t.srcAdm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching offsets of group %s on %s: %w", group, f.Source, err)
	}
	return t.translateGroup(group, offs), nil
}

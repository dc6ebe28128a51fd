package flow

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/passthrough"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// groupHooks forwards the group consumer's callbacks to the replicator,
// which is created after the consumer; no callback fires before the first
// topic is subscribed, and that happens after the replicator exists.
type groupHooks struct {
	rep   groupPath
	store *progress.Store
	log   *slog.Logger
	// paused: the group consumer only spreads partitions and never
	// fetches them (passthrough fetches on its own).
	paused bool

	mu         sync.Mutex
	remotes    map[string]string // source topic -> remote topic
	subscribed map[string]bool
	owned      map[progress.TP]bool // assigned to this worker now
}

// track records what the group assigned to this worker (add) or took away.
func (h *groupHooks) track(m map[string][]int32, add bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.owned == nil {
		h.owned = make(map[progress.TP]bool)
	}
	for _, tp := range tpsOf(m) {
		if add {
			h.owned[tp] = true
		} else {
			delete(h.owned, tp)
		}
	}
}

// ownedOf returns the partitions of topic assigned to this worker.
func (h *groupHooks) ownedOf(topic string) []progress.TP {
	h.mu.Lock()
	defer h.mu.Unlock()
	var tps []progress.TP
	for tp := range h.owned {
		if tp.Topic == topic {
			tps = append(tps, tp)
		}
	}
	return tps
}

// leads reports whether this worker runs the flow's checkpoints: the one
// the group gave partition 0 of the first subscribed topic (by name). The
// group coordinator gives a partition to one member at a time, so the role
// moves with it when a worker dies or the group rebalances; in between,
// two or none may run for a moment, which checkpoints tolerate (same
// records, and group offsets only ever move forward).
func (h *groupHooks) leads() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := ""
	for t := range h.subscribed {
		if first == "" || t < first {
			first = t
		}
	}
	return first != "" && h.owned[progress.TP{Topic: first, Partition: 0}]
}

func (h *groupHooks) remote(topic string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.remotes[topic]
}

func (h *groupHooks) options(group string, props map[string]string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			// Another worker may have saved progress for these
			// partitions since this one last read it.
			if err := h.store.CatchUp(ctx); err != nil {
				h.log.Warn("reading the progress other workers saved failed; assigned partitions resume from older progress and copy some records again", "err", err)
			}
			h.track(m, true)
			h.rep.GroupAssigned(ctx, cl, m)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			h.track(m, false)
			h.rep.GroupRevoked(ctx, cl, m)
		}),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			h.track(m, false)
			h.rep.GroupRevoked(ctx, cl, m)
		}),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			return h.rep.GroupOffsets(ctx, m)
		}),
	}
	if ms, err := strconv.Atoi(props["session.timeout.ms"]); err == nil && ms > 0 {
		opts = append(opts, kgo.SessionTimeout(time.Duration(ms)*time.Millisecond))
	}
	if ms, err := strconv.Atoi(props["heartbeat.interval.ms"]); err == nil && ms > 0 {
		opts = append(opts, kgo.HeartbeatInterval(time.Duration(ms)*time.Millisecond))
	}
	return opts
}

// groupPath is a data path that the group consumer's callbacks drive.
type groupPath interface {
	GroupAssigned(context.Context, *kgo.Client, map[string][]int32)
	GroupRevoked(context.Context, *kgo.Client, map[string][]int32)
	GroupOffsets(context.Context, map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error)
}

// ptGroup drives passthrough from the group's assignments. The group
// consumer's own fetching is paused; the pipeline fetches the partitions
// it is given (Assign skips ones it has).
type ptGroup struct {
	pl     *passthrough.Pipeline
	store  *progress.Store
	remote func(string) string
	log    *slog.Logger
}

func (g *ptGroup) GroupAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	var ps []replicate.Partition
	for _, tp := range tpsOf(assigned) {
		ps = append(ps, replicate.Partition{TP: tp, Remote: g.remote(tp.Topic)})
		from := int64(-1)
		if saved, ok := g.store.Get(tp); ok && saved >= 0 {
			from = saved + 1
		}
		g.log.Info("partition assigned to this worker", "topic", tp.Topic, "partition", tp.Partition, "remote", g.remote(tp.Topic), "from", from)
	}
	g.pl.Assign(ps)
}

func (g *ptGroup) GroupRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	tps := tpsOf(revoked)
	if len(tps) == 0 {
		return
	}
	if err := g.pl.Revoke(ctx, tps); err != nil {
		g.log.Warn("saving the progress of revoked partitions failed; the next owner copies some records again", "partitions", len(tps), "err", err)
		return
	}
	g.log.Info("partitions handed back to the group", "partitions", len(tps))
}

// tpsOf lists the partitions of a group callback's map.
func tpsOf(m map[string][]int32) []progress.TP {
	var tps []progress.TP
	for topic, parts := range m {
		for _, part := range parts {
			tps = append(tps, progress.TP{Topic: topic, Partition: part})
		}
	}
	return tps
}

// GroupOffsets gives the paused group consumer positions it never uses.
func (g *ptGroup) GroupOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for _, ps := range offsets {
		for part := range ps {
			ps[part] = kgo.NewOffset().AtStart()
		}
	}
	return offsets, nil
}

// rewind stops tps, partitions of a re-created topic, so that they start
// again from their reset progress once rewound is called.
func (g *ptGroup) rewind(ctx context.Context, tps []progress.TP) (rewound func(), err error) {
	var ps []replicate.Partition
	for _, tp := range tps {
		ps = append(ps, replicate.Partition{TP: tp, Remote: g.remote(tp.Topic)})
	}
	if err := g.pl.Revoke(ctx, tps); err != nil {
		return nil, err
	}
	return func() { g.pl.Assign(ps) }, nil
}

// subscribe makes the group consumer follow the topics that are ready:
// new ones are added, gone ones purged, and metadata is refreshed so that
// added partitions reach the group.
func (f *Flow) subscribe(consumer, producer *kgo.Client, h *groupHooks, ts []topicsync.Topic) {
	h.mu.Lock()
	if h.subscribed == nil {
		h.subscribed = make(map[string]bool)
	}
	live := make(map[string]bool)
	var add, gone []string
	for _, t := range ts {
		if !t.Ready {
			continue
		}
		live[t.Name] = true
		h.remotes[t.Name] = t.Remote
		if !h.subscribed[t.Name] {
			h.subscribed[t.Name] = true
			add = append(add, t.Name)
		}
	}
	for t := range h.subscribed {
		if !live[t] {
			delete(h.subscribed, t)
			gone = append(gone, t)
		}
	}
	h.mu.Unlock()
	if len(gone) > 0 {
		f.log.Info("source topics gone; no longer replicated", "topics", gone)
		consumer.PurgeTopicsFromConsuming(gone...)
	}
	producer.ForceMetadataRefresh()
	if len(add) > 0 {
		if h.paused {
			consumer.PauseFetchTopics(add...) // before they are consumed
		}
		consumer.AddConsumeTopics(add...)
	}
	consumer.ForceMetadataRefresh()
}

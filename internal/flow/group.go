package flow

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/replicate"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// WorkersKey chooses how a flow's partitions are shared: "single" (the
// default: this process replicates every partition) or "group" (every
// kmirror running the flow joins a Kafka consumer group on the source
// cluster, whose coordinator spreads the partitions over the workers and
// hands a dead worker's partitions to the others). GroupIDKey names the
// group, by default kmirror-SOURCE->TARGET; the group never gets committed
// offsets. session.timeout.ms and heartbeat.interval.ms of the source
// consumer tune how fast a dead worker is noticed.
const (
	WorkersKey = "kmirror.workers"
	GroupIDKey = "kmirror.workers.group.id"
)

// GroupID returns the consumer group of a flow in group mode, or "".
func GroupID(c *config.Flow) string {
	if c.Settings[WorkersKey] != "group" {
		return ""
	}
	if id := c.Settings[GroupIDKey]; id != "" {
		return id
	}
	return "kmirror-" + c.Name()
}

// groupHooks forwards the group consumer's callbacks to the replicator,
// which is created after the consumer; no callback fires before the first
// topic is subscribed, and that happens after the replicator exists.
type groupHooks struct {
	rep   *replicate.Replicator
	store *progress.Store
	log   *slog.Logger

	mu         sync.Mutex
	remotes    map[string]string // source topic -> remote topic
	subscribed map[string]bool
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
			h.rep.GroupAssigned(ctx, cl, m)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) { h.rep.GroupRevoked(ctx, cl, m) }),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) { h.rep.GroupRevoked(ctx, cl, m) }),
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
		consumer.AddConsumeTopics(add...)
	}
	consumer.ForceMetadataRefresh()
}

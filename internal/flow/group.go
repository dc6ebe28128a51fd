package flow

import (
	"maps"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/slots"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// groupHooks runs a flow's group consumer: its callbacks go to the data
// path through adapter, whose Engine and Progress are set after the
// consumer is made (no callback fires before the first topic is
// subscribed, and that happens after the data path exists); it keeps the
// subscription and knows whether this worker leads the flow.
type groupHooks struct {
	adapter *datapath.Group

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
	for _, tp := range datapath.TPs(m) {
		if add {
			h.owned[tp] = true
		} else {
			delete(h.owned, tp)
		}
	}
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

// options are the group consumer's. Exactly-once (slots > 0) hands out
// whole slots (internal/slots) instead of balancing partitions one by one.
func (h *groupHooks) options(p Plan) []kgo.Opt {
	balancer := kgo.CooperativeStickyBalancer()
	if p.Slots > 0 {
		balancer = slots.Balancer(p.Slots)
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(p.Group),
		kgo.DisableAutoCommit(),
		kgo.Balancers(balancer),
	}
	opts = append(opts, h.adapter.Options()...)
	if p.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(p.SessionTimeout))
	}
	if p.HeartbeatInterval > 0 {
		opts = append(opts, kgo.HeartbeatInterval(p.HeartbeatInterval))
	}
	return opts
}

// subscribe makes the group consumer follow the topics of which the
// target hosts a partition (the adapter keeps back those it does not
// host yet): new ones are added, gone ones purged, and metadata is
// refreshed so that added partitions reach the group. It returns the
// topics subscribed.
func (f *Flow) subscribe(consumer, producer *kgo.Client, h *groupHooks, ts []topicsync.Topic) map[string]bool {
	h.mu.Lock()
	if h.subscribed == nil {
		h.subscribed = make(map[string]bool)
	}
	live := make(map[string]bool)
	var add, gone []string
	for _, t := range ts {
		live[t.Name] = true
		if t.Hosted == 0 {
			continue
		}
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
	subscribed := maps.Clone(h.subscribed)
	h.mu.Unlock()
	if len(gone) > 0 {
		f.log.Info("source topics gone; no longer replicated", "topics", gone)
		consumer.PurgeTopicsFromConsuming(gone...)
	}
	producer.ForceMetadataRefresh()
	if len(add) > 0 {
		if h.adapter.OwnFetches {
			consumer.PauseFetchTopics(add...) // before they are consumed
		}
		consumer.AddConsumeTopics(add...)
	}
	consumer.ForceMetadataRefresh()
	return subscribed
}

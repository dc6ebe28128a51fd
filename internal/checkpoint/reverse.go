package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/config"
)

// Reverse translation: a group that read the remote copy of a topic on the
// target (A.orders on B) moves back to the original topic on the source
// (orders on A). The flow's offset syncs, read from the downstream side,
// map the group's committed downstream offset D to an upstream offset U.
//
// Safety rule (no loss on failback): every upstream record whose copy on
// the target sits at or after D has an upstream offset >= U.

// TranslateBack returns the upstream offset on topic/partition (the name
// on the source) for a group committed at downstream offset down on the
// target. ok is false when there is no safe answer: the store is not
// ready, the partition has no syncs, or down is before the oldest retained
// sync (the records before it cannot be placed upstream).
func (s *Store) TranslateBack(topic string, partition int32, down int64) (up int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.ready {
		return -1, false
	}
	return translateBack(s.parts[tp{topic, partition}], s.mode, down)
}

// translateBack mirrors translate. Entries have strictly increasing up and
// down offsets, so they are sorted by down too. With s the last sync at or
// before down:
//
//   - down == s.down: s.up (the record at down is the copy of s.up);
//   - exact mode, inside the run after s: s.up + (down - s.down), and past
//     the run's end (a downstream gap of foreign records) the next sync's
//     upstream offset, i.e. s.up + min(down-s.down, n);
//   - otherwise (mm2 mode, thinned history, past the newest sync): s.up+1,
//     since every copy after s.down comes from an offset after s.up.
func translateBack(es []entry, mode Mode, down int64) (int64, bool) {
	if len(es) == 0 || down < 0 {
		return -1, false
	}
	i := sort.Search(len(es), func(i int) bool { return es[i].down > down }) - 1
	if i < 0 {
		return -1, false
	}
	e := es[i]
	switch {
	case e.down == down:
		return e.up, true
	case mode == Exact && e.run && i+1 < len(es):
		n := es[i+1]
		return e.up + min(down-e.down, n.up-e.up, n.down-e.down), true
	default:
		return e.up + 1, true
	}
}

// Back is one partition of a reverse translation. The names follow the
// flow: Upstream is on the flow's source, Downstream on its target.
type Back struct {
	Topic       string // the topic on the source (orders on A)
	RemoteTopic string // its copy on the target that the group read (A.orders on B)
	Partition   int32
	Upstream    int64  // where the group resumes on the source; -1: no translation
	Downstream  int64  // the group's committed offset on the target
	Metadata    string // the commit's metadata, kept
	Reason      string // why there is no translation, when Upstream is -1
}

// TranslateBack translates the offsets group committed on f's target, on
// the remote copies of f.Source's topics, back to offsets of the original
// topics on f.Source, through f's offset syncs (and, in exact mode, its
// offset index). f is the flow that copied the topics (A->B); the result
// is what the group needs on A after it ran on B. Partitions without a
// safe translation are returned with Upstream -1 and a Reason. It returns
// no rows when the group committed nothing on remote topics from f.Source.
func TranslateBack(ctx context.Context, f *config.Flow, group string, log *slog.Logger) ([]Back, error) {
	t, err := New(Config{Flow: f, Log: log})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	offs, err := t.tgtAdm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching offsets of group %s on %s: %w", group, f.Target, err)
	}
	var out []Back
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At < 0 || t.pol.IsInternalTopic(o.Topic) {
			return
		}
		if src, ok := t.pol.TopicSource(o.Topic); !ok || src != f.Source {
			return
		}
		up, ok := t.pol.UpstreamTopic(o.Topic)
		if !ok || up == "" {
			return
		}
		out = append(out, Back{Topic: up, RemoteTopic: o.Topic, Partition: o.Partition,
			Upstream: -1, Downstream: o.At, Metadata: o.Metadata})
	})
	if len(out) == 0 {
		return nil, nil
	}
	if err := t.followSyncs(ctx, true); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		b := &out[i]
		if u, ok := t.store.TranslateBack(b.Topic, b.Partition, b.Downstream); ok {
			b.Upstream = u
			continue
		}
		if t.store.Has(b.Topic, b.Partition) {
			b.Reason = fmt.Sprintf("offset %d is before the oldest offset sync kept for %s-%d", b.Downstream, b.Topic, b.Partition)
		} else {
			b.Reason = fmt.Sprintf("flow %s has no offset syncs for %s-%d", f.Name(), b.Topic, b.Partition)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out, nil
}

package replicate

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
)

// Several workers share a flow through a Kafka consumer group on the source
// cluster: the group coordinator hands out the partitions, moves them when a
// worker joins or leaves, and takes them from a worker that stops answering.
// kmirror never commits offsets to that group; where a partition resumes is
// its progress on the target, read when the partition is assigned. These
// methods are the group consumer's callbacks (Config.Group).

// GroupAssigned is kgo's OnPartitionsAssigned: it prepares the state of
// newly assigned partitions.
func (r *Replicator) GroupAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, ps := range assigned {
		for _, part := range ps {
			tp := progress.TP{Topic: topic, Partition: part}
			if _, ok := r.parts[tp]; ok {
				continue
			}
			p := r.newPartition(Partition{TP: tp, Remote: r.cfg.Remote(topic)})
			if saved, ok := r.cfg.Progress.Get(tp); ok && saved >= 0 {
				p.done, p.next = saved, saved+1
			}
			r.parts[tp] = p
			r.cfg.Log.Info("partition assigned to this worker", "topic", topic, "partition", part, "remote", p.remote, "from", p.next)
		}
	}
}

// GroupOffsets is kgo's AdjustFetchOffsetsFn: assigned partitions start
// after their progress on the target, whatever the group has committed.
func (r *Replicator) GroupOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for topic, ps := range offsets {
		for part := range ps {
			switch saved, ok := r.cfg.Progress.Get(progress.TP{Topic: topic, Partition: part}); {
			case ok && saved >= 0:
				ps[part] = kgo.NewOffset().At(saved + 1).WithEpoch(-1)
			case r.cfg.StartAtEnd:
				ps[part] = kgo.NewOffset().AtEnd()
			default:
				ps[part] = kgo.NewOffset().AtStart()
			}
		}
	}
	return offsets, nil
}

// GroupRevoked is kgo's OnPartitionsRevoked and OnPartitionsLost: the
// records in flight of the partitions finish and their progress is saved
// before another worker takes them.
func (r *Replicator) GroupRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	var tps []progress.TP
	for topic, ps := range revoked {
		for _, part := range ps {
			tps = append(tps, progress.TP{Topic: topic, Partition: part})
		}
	}
	if len(tps) == 0 {
		return
	}
	if err := r.Revoke(ctx, tps); err != nil {
		r.cfg.Log.Warn("saving the progress of revoked partitions failed; the next owner copies some records again", "partitions", len(tps), "err", err)
		return
	}
	r.cfg.Log.Info("partitions handed back to the group", "partitions", len(tps))
}

// RewindTopic restarts every partition of topic that this worker owns at
// the log start, for a source topic that was deleted and re-created: the
// old progress belongs to the old topic.
func (r *Replicator) RewindTopic(ctx context.Context, topic string) {
	r.mu.Lock()
	var mine []*partition
	for tp, p := range r.parts {
		if tp.Topic == topic {
			mine = append(mine, p)
		}
	}
	r.mu.Unlock()
	for _, p := range mine {
		r.stopFetching(p.tp)
		if p.drain(ctx) != nil {
			return
		}
		p.mu.Lock()
		p.base, p.reset = -1, true
		p.mu.Unlock()
		r.resume(ctx, p, 0, nil, 0)
	}
}

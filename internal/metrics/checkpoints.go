package metrics

import (
	"sort"
	"sync"
	"time"
)

// Checkpoint is the last checkpoint written for one group partition: the
// group's committed source offset and its translation on the target.
type Checkpoint struct {
	Source, Target string
	Group, Topic   string // Topic is the target's (remote) topic
	Partition      int32
	Upstream       int64
	Downstream     int64
	At             time.Time // when the target acknowledged it
}

// Checkpoints keeps the last checkpoint of every group partition, and
// the status of every group, for the dashboard; it is not exported to Prometheus (offsets are no metric).
type Checkpoints struct {
	mu     sync.Mutex
	m      map[cpKey]Checkpoint
	groups map[groupKey]*GroupStatus
}

type cpKey struct {
	source, target, group, topic string
	partition                    int32
}

// Set records c; on a nil Checkpoints it does nothing.
func (cs *Checkpoints) Set(c Checkpoint) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = make(map[cpKey]Checkpoint)
	}
	cs.m[cpKey{c.Source, c.Target, c.Group, c.Topic, c.Partition}] = c
}

// All returns every recorded checkpoint by source, target, group, topic
// and partition.
func (cs *Checkpoints) All() []Checkpoint {
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	out := make([]Checkpoint, 0, len(cs.m))
	for _, c := range cs.m {
		out = append(out, c)
	}
	cs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Source != b.Source:
			return a.Source < b.Source
		case a.Target != b.Target:
			return a.Target < b.Target
		case a.Group != b.Group:
			return a.Group < b.Group
		case a.Topic != b.Topic:
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// Delete forgets the checkpoint of one group partition; on a nil
// Checkpoints it does nothing.
func (cs *Checkpoints) Delete(source, target, group, topic string, partition int32) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.m, cpKey{source, target, group, topic, partition})
}

// GroupStatus is what the checkpoint task last found of one consumer
// group of a flow, for the dashboard's cutover panel: whether its
// committed offsets were all translated, how recently, and, with
// sync.group.offsets.enabled, whether the target group holds them.
type GroupStatus struct {
	Source, Target, Group string
	// Interval is emit.checkpoints.interval: how often CheckedAt moves.
	Interval time.Duration
	// CheckedAt is when the group's committed offsets were last fetched
	// from the source and translated (a checkpoint is written only when
	// one moved, so a checkpoint's age alone says little).
	CheckedAt time.Time
	// Committed counts the group's source partitions with a committed
	// offset in replicated topics; Untranslated those of them with no
	// translation yet (no offset sync at or below the committed offset).
	Committed, Untranslated int
	// SourceState is the group's state on the source at the last group
	// listing (refresh.groups.interval; "" before Kafka 2.6): Empty, or
	// Stable, ... while it has members there.
	SourceState string
	// Sync is sync.group.offsets.enabled; SyncedAt the last pass over the
	// group; TargetState its state on the target then ("" for none, or
	// as the broker names it: Empty, Stable, ...); SyncBehind the
	// partitions whose target offset was still behind its checkpoint
	// after that pass (-1: not known, the group is active on the target).
	Sync        bool
	SyncedAt    time.Time
	TargetState string
	SyncBehind  int
}

type groupKey struct{ source, target, group string }

// UpdateGroup applies f to the status of one group, a new one holding only
// its names; on a nil Checkpoints it does nothing.
func (cs *Checkpoints) UpdateGroup(source, target, group string, f func(*GroupStatus)) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.groups == nil {
		cs.groups = make(map[groupKey]*GroupStatus)
	}
	k := groupKey{source, target, group}
	g := cs.groups[k]
	if g == nil {
		g = &GroupStatus{Source: source, Target: target, Group: group}
		cs.groups[k] = g
	}
	f(g)
}

// Groups returns the status of every group by source, target and group.
func (cs *Checkpoints) Groups() []GroupStatus {
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	out := make([]GroupStatus, 0, len(cs.groups))
	for _, g := range cs.groups {
		out = append(out, *g)
	}
	cs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Target != b.Target {
			return a.Target < b.Target
		}
		return a.Group < b.Group
	})
	return out
}

// DeleteGroup forgets the status of a group no longer checkpointed; on a
// nil Checkpoints it does nothing.
func (cs *Checkpoints) DeleteGroup(source, target, group string) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.groups, groupKey{source, target, group})
}

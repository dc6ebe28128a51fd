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

// Checkpoints keeps the last checkpoint of every group partition for the
// dashboard; it is not exported to Prometheus (offsets are no metric).
type Checkpoints struct {
	mu sync.Mutex
	m  map[cpKey]Checkpoint
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

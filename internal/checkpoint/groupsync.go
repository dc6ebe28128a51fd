package checkpoint

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/wire"
)

// targetGroup is what group offset sync needs to know about a group on
// the target.
type targetGroup struct {
	exists bool
	active bool            // members, or a state other than Empty
	state  string          // as described, for logs
	offs   map[cpKey]int64 // committed offsets when exists and idle
}

// planCommit returns the offsets to commit into a target group: nothing
// while it is active; every checkpoint if it does not exist; otherwise
// only partitions where the checkpoint is ahead of what is committed, so
// a group is never moved backwards.
func planCommit(g targetGroup, cps []wire.Checkpoint) []wire.Checkpoint {
	if g.active {
		return nil
	}
	var out []wire.Checkpoint
	for _, c := range cps {
		if g.exists {
			if cur, ok := g.offs[cpKey{c.Topic, c.Partition}]; ok && cur >= c.DownstreamOffset {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// describeTarget finds out, for each group, whether it exists on the
// target and has members, for classic groups and groups of the consumer
// protocol (KIP-848) alike.
func (t *Task) describeTarget(ctx context.Context, groups []string) (map[string]*targetGroup, error) {
	listed, err := t.tgtAdm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, err
	}
	out := make(map[string]*targetGroup, len(groups))
	var classic, consumer []string
	for _, g := range groups {
		l, ok := listed[g]
		tg := &targetGroup{}
		out[g] = tg
		if !ok || l.State == "Dead" {
			continue
		}
		tg.exists, tg.state = true, l.State
		switch l.GroupType {
		case "consumer":
			consumer = append(consumer, g)
		case "", "classic":
			classic = append(classic, g)
		default: // share or streams groups are not ours to move
			tg.active = true
		}
	}
	if len(classic) > 0 {
		ds, err := t.tgtAdm.DescribeGroups(ctx, classic...)
		if err != nil && len(ds) == 0 {
			return nil, err
		}
		for _, g := range classic {
			d, ok := ds[g]
			switch {
			case !ok || d.Err != nil:
				out[g].active = true // unknown: leave it alone
			case d.State == "Dead":
				out[g].exists = false
			default:
				out[g].state = d.State
				out[g].active = d.State != "Empty" || len(d.Members) > 0
			}
		}
	}
	if len(consumer) > 0 {
		ds, err := t.tgtAdm.DescribeConsumerGroups(ctx, consumer...)
		if err != nil && len(ds) == 0 {
			return nil, err
		}
		for _, g := range consumer {
			d, ok := ds[g]
			switch {
			case !ok || d.Err != nil:
				out[g].active = true
			case d.State == "Dead":
				out[g].exists = false
			default:
				out[g].state = d.State
				out[g].active = d.State != "Empty" || len(d.Members) > 0
			}
		}
	}
	return out, nil
}

// SyncGroupsOnce commits the last checkpoints into the target's consumer
// groups that have no active members there, never moving a partition
// backwards.
func (t *Task) SyncGroupsOnce(ctx context.Context) {
	t.mu.Lock()
	var groups []string
	for g := range t.last {
		if t.groups.Match(g) {
			groups = append(groups, g)
		}
	}
	t.mu.Unlock()
	if len(groups) == 0 {
		return
	}
	sort.Strings(groups)
	described, err := t.describeTarget(ctx, groups)
	if err != nil {
		t.log.Warn("describing consumer groups on the target failed", "err", err)
		return
	}
	for _, g := range groups {
		tg := described[g]
		if tg.active {
			t.log.Debug("not syncing offsets of a group active on the target", "group", g, "state", tg.state)
			t.noteSynced(g, tg.state, -1)
			continue
		}
		if tg.exists {
			offs, err := t.tgtAdm.FetchOffsets(ctx, g)
			if err != nil {
				t.logs.Warn(t.log, "fetch target offsets|"+err.Error(), "fetching offsets on the target failed", "group", g, "err", err)
				continue
			}
			tg.offs = make(map[cpKey]int64)
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Err == nil && o.At >= 0 {
					tg.offs[cpKey{o.Topic, o.Partition}] = o.At
				}
			})
		}
		plan := planCommit(*tg, t.Checkpoints(g))
		if len(plan) == 0 {
			t.noteSynced(g, tg.state, 0)
			continue
		}
		commit := make(kadm.Offsets)
		for _, c := range plan {
			commit.Add(kadm.Offset{Topic: c.Topic, Partition: c.Partition, At: c.DownstreamOffset, LeaderEpoch: -1, Metadata: c.Metadata})
		}
		resp, err := t.tgtAdm.CommitOffsets(ctx, g, commit)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			// A member that joined since the describe makes the broker
			// refuse the commit, which is what we want.
			t.logs.Warn(t.log, "commit target offsets|"+err.Error(), "committing translated offsets on the target failed", "group", g, "err", err)
			t.noteSynced(g, tg.state, len(plan))
			continue
		}
		if !tg.exists {
			tg.state = "Empty" // the commit created it
		}
		t.noteSynced(g, tg.state, 0)
		t.m.GroupOffsetsSynced.WithLabelValues(t.cfg.Source, t.cfg.Target, g).Add(float64(len(plan)))
		t.log.Debug("synced group offsets to the target", "group", g, "partitions", len(plan))
	}
}

// noteSynced records, for the dashboard, a sync pass over group: its state
// on the target and how many partitions stayed behind their checkpoint
// (-1: not known).
func (t *Task) noteSynced(group, state string, behind int) {
	now := time.Now()
	t.m.LastCheckpoints.UpdateGroup(t.cfg.Source, t.cfg.Target, group, func(gs *metrics.GroupStatus) {
		gs.Sync, gs.SyncedAt, gs.TargetState, gs.SyncBehind = true, now, state, behind
	})
}

package flow

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/internaltopic"
)

// RunCheckpointsOnly emits the checkpoints of a pair, and syncs its group
// offsets when sync.group.offsets.enabled is set, without replicating
// records or emitting heartbeats: MirrorCheckpointConnector's work. It
// reads the offset syncs that the pair's replication writes, whether a
// MirrorSourceConnector, MM2 or kmirror run writes them. In group mode
// only the worker that leads the pair's worker group runs the task.
func (f *Flow) RunCheckpointsOnly(ctx context.Context) error {
	defer f.close()
	c := f.cfg
	var tgtAdm *kadm.Client
	for _, side := range []struct {
		alias string
		props map[string]string
	}{{c.Source, c.SourceAdmin}, {c.Target, c.TargetAdmin}} {
		cl, _, err := f.client("checkpoints-"+side.alias+"-admin", clients.Admin, side.props)
		if err != nil {
			return err
		}
		tgtAdm = kadm.NewClient(cl)
		if err := reachable(ctx, tgtAdm, side.alias); err != nil {
			return err
		}
	}
	if !c.EmitCheckpointsEnabled && !c.SyncGroupOffsetsEnabled {
		f.log.Warn("emit.checkpoints.enabled and sync.group.offsets.enabled are both false: the pair's checkpoints do nothing")
		<-ctx.Done()
		return nil
	}
	f.log.Info("emitting checkpoints only", "source", c.Source, "target", c.Target,
		"sync_group_offsets", c.SyncGroupOffsetsEnabled)
	if c.Workers != config.Group {
		cp, err := checkpoint.New(checkpoint.Config{Flow: c, Metrics: f.m, Log: f.log})
		if err != nil {
			return fmt.Errorf("flow %s: %w", c.Name(), err)
		}
		if err := cp.Run(ctx); err != nil {
			return fmt.Errorf("flow %s: checkpoints: %w", c.Name(), err)
		}
		return nil
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	leads, err := f.checkpointLeader(ctx, tgtAdm)
	if err != nil {
		return err
	}
	errs := make(chan error, 1)
	f.leadCheckpoints(ctx, leads, stop, errs)
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// checkpointLeader joins the flow's worker group on the target, subscribed
// to the checkpoints topic, which has one partition: the worker the group
// gives partition 0 leads. The coordinator gives it to one member at a
// time and moves it when that worker leaves or dies.
func (f *Flow) checkpointLeader(ctx context.Context, tgtAdm *kadm.Client) (func() bool, error) {
	c := f.cfg
	topic := c.Policy.CheckpointsTopic(c.Source)
	if _, err := internaltopic.Create(ctx, tgtAdm, internaltopic.Compacted(topic, c.CheckpointsTopicReplicationFactor, "checkpoints.topic.replication.factor")); err != nil {
		return nil, fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	var lead atomic.Bool
	set := func(v bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			for _, p := range m[topic] {
				if p == 0 {
					lead.Store(v)
				}
			}
		}
	}
	cl, _, err := f.client("checkpoints-leader", clients.Consumer, c.TargetConsumer,
		kgo.ConsumerGroup(c.WorkersGroupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.OnPartitionsAssigned(set(true)), kgo.OnPartitionsRevoked(set(false)), kgo.OnPartitionsLost(set(false)))
	if err != nil {
		return nil, err
	}
	go func() {
		// Polling keeps the member in the group; the records are not used.
		for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
		}
	}()
	return lead.Load, nil
}

package flow

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
)

// RunCheckpointsOnly emits the checkpoints of a pair, and syncs its group
// offsets when sync.group.offsets.enabled is set, without replicating
// records or emitting heartbeats: MirrorCheckpointConnector's work. It
// reads the offset syncs that the pair's replication writes, whether a
// MirrorSourceConnector, MM2 or kmirror run writes them.
func (f *Flow) RunCheckpointsOnly(ctx context.Context) error {
	defer f.close()
	c := f.cfg
	for _, side := range []struct {
		alias string
		props map[string]string
	}{{c.Source, c.SourceAdmin}, {c.Target, c.TargetAdmin}} {
		cl, _, err := f.client("checkpoints-"+side.alias+"-admin", clients.Admin, side.props)
		if err != nil {
			return err
		}
		if err := reachable(ctx, kadm.NewClient(cl), side.alias); err != nil {
			return err
		}
	}
	if !c.EmitCheckpointsEnabled && !c.SyncGroupOffsetsEnabled {
		f.log.Warn("emit.checkpoints.enabled and sync.group.offsets.enabled are both false: the pair's checkpoints do nothing")
		<-ctx.Done()
		return nil
	}
	cp, err := checkpoint.New(checkpoint.Config{Flow: c, Metrics: f.m, Log: f.log})
	if err != nil {
		return fmt.Errorf("flow %s: %w", c.Name(), err)
	}
	f.log.Info("emitting checkpoints only", "source", c.Source, "target", c.Target,
		"sync_group_offsets", c.SyncGroupOffsetsEnabled)
	if err := cp.Run(ctx); err != nil {
		return fmt.Errorf("flow %s: checkpoints: %w", c.Name(), err)
	}
	return nil
}

package flow

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/clients"
)

// RunHeartbeatsOnly emits the heartbeats of a pair that replicates nothing.
// MM2 runs such a herder for every ordered pair of clusters while heartbeats
// are enabled, so that a one-way A->B setup still gets A's heartbeats
// replicated to B (as A.heartbeats), which MirrorClient uses to discover
// upstream clusters.
func (f *Flow) RunHeartbeatsOnly(ctx context.Context) error {
	defer f.close()
	c := f.cfg
	admCl, _, err := f.client("heartbeats-target-admin", clients.Admin, c.TargetAdmin)
	if err != nil {
		return err
	}
	adm := kadm.NewClient(admCl)
	if err := reachable(ctx, adm, c.Target); err != nil {
		return err
	}
	hb, err := f.heartbeats(ctx, c.Policy, adm)
	if err != nil {
		return err
	}
	f.log.Info("emitting heartbeats only", "source", c.Source, "target", c.Target)
	if err := hb.Run(ctx); err != nil {
		return fmt.Errorf("flow %s: heartbeats: %w", c.Name(), err)
	}
	return nil
}

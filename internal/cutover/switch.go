package cutover

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kmirror/kmirror/internal/offsetplan"
)

// What Switch did with a group.
const (
	ActionCommitted   = "committed"
	ActionWouldCommit = "would-commit" // --dry-run
	ActionRefused     = "refused"      // active members
	ActionFailed      = "failed"       // no offsets, or the commit failed
	ActionSkipped     = "skipped"      // the group consumed no topic that moves
)

// GroupSwitch is what Switch did with one group.
type GroupSwitch struct {
	Group   string             `json:"group"`
	Action  string             `json:"action"`
	Reason  string             `json:"reason,omitempty"`
	Source  GroupState         `json:"source"`
	Target  GroupState         `json:"target"`
	Offsets *offsetplan.Report `json:"offsets,omitempty"`
}

// SwitchReport is what "kmirror cutover switch" did; it is kept as the
// record of the cutover.
type SwitchReport struct {
	Flow      string        `json:"flow"`
	Source    string        `json:"source"`
	Target    string        `json:"target"`
	Time      time.Time     `json:"time"`
	DryRun    bool          `json:"dry_run"`
	Groups    []GroupSwitch `json:"groups"`
	Committed []string      `json:"committed"`
	Refused   []string      `json:"refused"`
	Failed    []string      `json:"failed"`
	Skipped   []string      `json:"skipped"`
	Excluded  []Excluded    `json:"excluded_groups"`
}

// Switch commits, on the target, the translated offsets of every selected
// group that has no active member on either cluster, and refuses the
// others. The offsets come from a fresh translation when the source gives
// one, else from the checkpoints (or, for a failback, from the reverse
// flow's offset syncs; see offsetplan.Planner.Plan). With dryRun nothing
// is committed: the report says what would be.
func Switch(ctx context.Context, o *Options, dryRun bool) (*SwitchReport, error) {
	f := o.Flow
	c, sel, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.close()
	rep := &SwitchReport{Flow: f.Name(), Source: f.Source, Target: f.Target, Time: o.now().UTC(), DryRun: dryRun,
		Committed: []string{}, Refused: []string{}, Failed: []string{}, Skipped: []string{}, Excluded: sel.excludedGroups}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, g := range sel.groups {
		gs := GroupSwitch{Group: g, Source: sourceState(ctx, o, c, g), Target: groupState(ctx, c.tgt, g)}
		if nothing, _, err := movesNothing(ctx, o, c, sel, g, gs.Source.Active()); err != nil {
			gs.Action, gs.Reason = ActionFailed, err.Error()
		} else if nothing {
			gs.Action, gs.Reason = ActionSkipped, NothingToMove
		} else {
			gs.Action, gs.Reason = switchGroup(ctx, o, log, &gs, dryRun)
		}
		switch gs.Action {
		case ActionCommitted, ActionWouldCommit:
			rep.Committed = append(rep.Committed, g)
		case ActionRefused:
			rep.Refused = append(rep.Refused, g)
		case ActionSkipped:
			rep.Skipped = append(rep.Skipped, g)
		default:
			rep.Failed = append(rep.Failed, g)
		}
		rep.Groups = append(rep.Groups, gs)
	}
	return rep, nil
}

// NothingToMove is why a group is skipped.
const NothingToMove = "no committed offset on a topic that moves"

// refusal says why a group may not be switched, "" if it may.
func refusal(gs *GroupSwitch, source, target string) string {
	switch {
	case gs.Source.Error != "":
		return fmt.Sprintf("not described on %s: %s", source, gs.Source.Error)
	case gs.Target.Error != "":
		return fmt.Sprintf("not described on %s: %s", target, gs.Target.Error)
	case gs.Source.Active():
		return fmt.Sprintf("%d active member(s) on %s (%s): stop its consumers there first", len(gs.Source.Members), source, gs.Source.State)
	case gs.Target.Active():
		return fmt.Sprintf("%d active member(s) on %s (%s): stop its consumers there first", len(gs.Target.Members), target, gs.Target.State)
	}
	return ""
}

func switchGroup(ctx context.Context, o *Options, log *slog.Logger, gs *GroupSwitch, dryRun bool) (action, reason string) {
	f := o.Flow
	if r := refusal(gs, f.Source, f.Target); r != "" {
		return ActionRefused, r
	}
	use := offsetplan.UseTranslate
	if o.SourceDown {
		use = offsetplan.UseCheckpoints
	}
	pl := offsetplan.New(f, gs.Group, use, log, o.Timeout)
	rep, err := pl.Plan(ctx, o.Config)
	if err != nil && use == offsetplan.UseTranslate {
		pl = offsetplan.New(f, gs.Group, offsetplan.UseCheckpoints, log, o.Timeout)
		var cerr error
		if rep, cerr = pl.Plan(ctx, o.Config); cerr != nil {
			return ActionFailed, fmt.Sprintf("no offsets to commit: %v (fresh translation: %v)", cerr, err)
		}
	} else if err != nil {
		return ActionFailed, fmt.Sprintf("no offsets to commit: %v", err)
	}
	gs.Offsets = rep
	if dryRun {
		if err := pl.Check(ctx, rep, o.AllowRewind); err != nil {
			return ActionRefused, err.Error()
		}
		return ActionWouldCommit, ""
	}
	if err := pl.Apply(ctx, rep, o.AllowRewind); err != nil {
		return ActionFailed, err.Error()
	}
	return ActionCommitted, ""
}

// Package offsetplan works out where a consumer group resumes on the other
// cluster after a failover or failback (from checkpoints, a fresh
// translation or offset syncs read in reverse) and commits those offsets.
package offsetplan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/wire"
	"github.com/kmirror/kmirror/mirrorclient"
)

// New returns a Planner for group on f's target. use is UseCheckpoints or
// UseTranslate; timeout bounds the whole run and the probes of the source.
func New(f *config.Flow, group, use string, log *slog.Logger, timeout time.Duration) *Planner {
	return &Planner{f: f, group: group, use: use, log: log, timeout: timeout}
}

// Where the offsets of a report come from.
const (
	UseCheckpoints = "checkpoints" // the checkpoints topic on the target
	UseTranslate   = "translate"   // a fresh translation from the source
)

// probeTimeout bounds the check that the source cluster answers before a
// fresh translation is tried.
const probeTimeout = 5 * time.Second

// Row is one partition of the report.
type Row struct {
	Topic string `json:"topic"` // name on the target
	// FromTopic is the name on the source when the row is a reverse
	// translation (failback.go): the remote topic the group read.
	FromTopic  string `json:"from_topic,omitempty"`
	Partition  int32  `json:"partition"`
	Upstream   int64  `json:"upstream_offset"`
	Downstream int64  `json:"downstream_offset"`
	// The other source, when read: a fresh translation next to a
	// checkpoint, or the reverse.
	CheckpointUpstream   *int64 `json:"checkpoint_upstream_offset,omitempty"`
	CheckpointDownstream *int64 `json:"checkpoint_downstream_offset,omitempty"`
	FreshUpstream        *int64 `json:"translated_upstream_offset,omitempty"`
	FreshDownstream      *int64 `json:"translated_downstream_offset,omitempty"`
	// Current is the group's committed offset on the target (nil: none).
	Current *int64 `json:"current_offset,omitempty"`
	// Action is set with --apply: commit, unchanged or kept.
	Action string `json:"action,omitempty"`
}

// Report is what "kmirror offsets" prints.
type Report struct {
	Group            string   `json:"group"`
	From             string   `json:"from"`
	To               string   `json:"to"`
	Source           string   `json:"source"` // UseCheckpoints or UseTranslate
	CheckpointsTopic string   `json:"checkpoints_topic"`
	Mode             string   `json:"translation_mode"`
	ReverseFlow      string   `json:"reverse_flow,omitempty"` // flow whose syncs were read in reverse
	Notes            []string `json:"notes,omitempty"`
	Partitions       []Row    `json:"partitions"`
	Applied          bool     `json:"applied"`
}

// Planner works out one group's offsets for one flow's target.
type Planner struct {
	f       *config.Flow
	group   string
	use     string
	log     *slog.Logger
	timeout time.Duration
}

// targetClient returns a mirrorclient for the flow's target with the
// flow's replication policy.
func targetClient(f *config.Flow, log *slog.Logger) (*mirrorclient.Client, error) {
	props := make(map[string]string)
	for k, v := range f.TargetAdmin {
		props[k] = v
	}
	for k, v := range f.TargetConsumer {
		props["consumer."+k] = v
	}
	props[mirrorclient.PolicyClassKey] = f.PolicyClass
	if f.SeparatorSet || f.Separator != "" {
		props[mirrorclient.SeparatorKey] = f.Separator
	}
	props[mirrorclient.InternalSeparatorKey] = strconv.FormatBool(f.InternalSeparatorEnabled)
	props[mirrorclient.SourceAliasKey] = f.Source
	return mirrorclient.New(mirrorclient.WithProperties(props), mirrorclient.WithLogger(log))
}

// admin returns a kadm client from Java client properties.
func admin(props map[string]string, name string) (*kadm.Client, func(), error) {
	cl, _, err := clients.New("kmirror-cli|"+name, clients.Admin, props)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// report reads the checkpoints on the target and, when the flow has offset
// syncs and the source answers, translates the group's source offsets
// afresh; the --use source decides which offsets the report carries.
func (o *Planner) report(ctx context.Context) (*Report, error) {
	f := o.f
	mc, err := targetClient(f, o.log)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", f.Target, err)
	}
	defer mc.Close()
	set := checkpoint.FlowSettings(f)
	rep := &Report{Group: o.group, From: f.Source, To: f.Target, Source: o.use,
		CheckpointsTopic: mc.CheckpointsTopic(f.Source), Mode: set.Mode.String()}

	cps, cpErr := mc.RemoteCheckpoints(ctx, o.group, f.Source, 0)
	if cpErr != nil {
		cps = nil
		rep.Notes = append(rep.Notes, fmt.Sprintf("checkpoints not read: %v", cpErr))
	}

	// The source is asked only if it answers quickly: during a failover
	// it is often down, and the checkpoints are all there is.
	var fresh []wire.Checkpoint
	srcKnown, srcHasGroup := false, false
	if srcAdm, closeSrc, err := admin(f.SourceAdmin, "offsets-source"); err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("cluster %s: %v", f.Source, err))
	} else {
		defer closeSrc()
		pctx, cancel := context.WithTimeout(ctx, min(probeTimeout, o.timeout))
		listed, lerr := srcAdm.ListGroups(pctx)
		cancel()
		switch {
		case lerr != nil && len(listed) == 0:
			rep.Notes = append(rep.Notes, fmt.Sprintf("cluster %s did not answer (%v): no fresh translation", f.Source, lerr))
		default:
			srcKnown = true
			_, srcHasGroup = listed[o.group]
		}
	}
	switch {
	case !srcKnown:
	case !f.EmitOffsetSyncsEnabled:
		rep.Notes = append(rep.Notes, "the flow emits no offset syncs (emit.offset-syncs.enabled = false): no fresh translation")
	case srcHasGroup:
		fresh, err = checkpoint.Translate(ctx, f, o.group, o.log)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("fresh translation failed: %v", err))
			fresh = nil
		}
	}

	rows := mergeRows(cps, fresh, o.use)
	if len(rows) == 0 {
		return nil, o.nothing(rep, cpErr, srcKnown, srcHasGroup)
	}
	rep.Partitions = rows
	rep.Notes = append(rep.Notes, compareNotes(rows, o.use, f)...)
	return rep, nil
}

// nothing explains why there are no offsets to report.
func (o *Planner) nothing(rep *Report, cpErr error, srcKnown, srcHasGroup bool) error {
	f := o.f
	if o.use == UseTranslate {
		switch {
		case !srcKnown:
			return fmt.Errorf("--use translate needs cluster %s, which did not answer", f.Source)
		case !srcHasGroup:
			return fmt.Errorf("unknown group %q: it does not exist on %s", o.group, f.Source)
		}
		return fmt.Errorf("group %q: no partition of it could be translated from %s to %s (no offset syncs yet, or its offsets are older than the syncs kept)", o.group, f.Source, f.Target)
	}
	if errors.Is(cpErr, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("no checkpoints: topic %s does not exist on %s; is kmirror or MM2 running %s->%s with emit.checkpoints.enabled = true?",
			rep.CheckpointsTopic, f.Target, f.Source, f.Target)
	}
	if cpErr != nil {
		return fmt.Errorf("reading checkpoints from %s on %s: %w", rep.CheckpointsTopic, f.Target, cpErr)
	}
	if srcKnown && !srcHasGroup {
		return fmt.Errorf("unknown group %q: it does not exist on %s and has no checkpoints in %s on %s", o.group, f.Source, rep.CheckpointsTopic, f.Target)
	}
	msg := fmt.Sprintf("no checkpoints for group %q in %s on %s", o.group, rep.CheckpointsTopic, f.Target)
	if !srcKnown {
		return errors.New(msg + " (unknown group, or not checkpointed yet; the groups and topics filters of the flow decide which are)")
	}
	return fmt.Errorf("%s yet: checkpoints are written every %s for groups matching the flow's groups filter; try again, or use --use translate",
		msg, f.EmitCheckpointsInterval)
}

// mergeRows joins checkpoints and fresh translations by target partition;
// the offsets of the used source fill Upstream/Downstream, and partitions
// the used source lacks are left out.
func mergeRows(cps map[mirrorclient.TopicPartition]mirrorclient.Checkpoint, fresh []wire.Checkpoint, use string) []Row {
	byTP := make(map[mirrorclient.TopicPartition]*Row)
	row := func(topic string, p int32) *Row {
		tp := mirrorclient.TopicPartition{Topic: topic, Partition: p}
		if byTP[tp] == nil {
			byTP[tp] = &Row{Topic: topic, Partition: p, Upstream: -1, Downstream: -1}
		}
		return byTP[tp]
	}
	for tp, c := range cps {
		r := row(tp.Topic, tp.Partition)
		r.CheckpointUpstream, r.CheckpointDownstream = ptr(c.UpstreamOffset), ptr(c.DownstreamOffset)
	}
	for _, c := range fresh {
		r := row(c.Topic, c.Partition)
		r.FreshUpstream, r.FreshDownstream = ptr(c.UpstreamOffset), ptr(c.DownstreamOffset)
	}
	var out []Row
	for _, r := range byTP {
		up, down := r.CheckpointUpstream, r.CheckpointDownstream
		if use == UseTranslate {
			up, down = r.FreshUpstream, r.FreshDownstream
		}
		if down == nil {
			continue
		}
		r.Upstream, r.Downstream = *up, *down
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

// compareNotes says where the checkpoints and a fresh translation differ.
func compareNotes(rows []Row, use string, f *config.Flow) []string {
	var notes []string
	for _, r := range rows {
		if r.CheckpointDownstream == nil || r.FreshDownstream == nil {
			continue
		}
		cu, cd, fu, fd := *r.CheckpointUpstream, *r.CheckpointDownstream, *r.FreshUpstream, *r.FreshDownstream
		switch {
		case cd == fd:
		case fd > cd && fu >= cu && use == UseCheckpoints:
			notes = append(notes, fmt.Sprintf("%s-%d: the group committed %d on %s after the last checkpoint (%d); a fresh translation gives %d (checkpoints follow within %s, or use --use translate)",
				r.Topic, r.Partition, fu, f.Source, cu, fd, f.EmitCheckpointsInterval))
		default:
			notes = append(notes, fmt.Sprintf("%s-%d: checkpoint %d->%d, fresh translation %d->%d", r.Topic, r.Partition, cu, cd, fu, fd))
		}
	}
	return notes
}

func ptr(v int64) *int64 { return &v }

// groupMembers describes group on the target: whether it exists, its
// state, and its members ("member-id (client-id@host)"), for classic and
// KIP-848 consumer groups.
func groupMembers(ctx context.Context, adm *kadm.Client, group string) (exists bool, state string, members []string, err error) {
	listed, err := adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return false, "", nil, fmt.Errorf("listing groups: %w", err)
	}
	l, ok := listed[group]
	if !ok || l.State == "Dead" {
		return false, "", nil, nil
	}
	var derr error // the describe call's error, or its group's
	switch l.GroupType {
	case "consumer":
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		d := ds[group]
		derr = describeErr(err, len(ds), d.Err)
		state = d.State
		for _, m := range d.Members {
			members = append(members, fmt.Sprintf("%s (%s@%s)", m.MemberID, m.ClientID, m.ClientHost))
		}
	case "", "classic":
		ds, err := adm.DescribeGroups(ctx, group)
		d := ds[group]
		derr = describeErr(err, len(ds), d.Err)
		state = d.State
		for _, m := range d.Members {
			members = append(members, fmt.Sprintf("%s (%s@%s)", m.MemberID, m.ClientID, m.ClientHost))
		}
	default:
		return true, l.State, nil, fmt.Errorf("group %q on the target is a %s group, not a consumer group", group, l.GroupType)
	}
	if derr != nil {
		return true, l.State, nil, fmt.Errorf("describing group: %w", derr)
	}
	return state != "Dead", state, members, nil
}

// describeErr is the error of a describe call that returned n groups, or
// else the error of the group asked for.
func describeErr(err error, n int, groupErr error) error {
	if err != nil && n == 0 {
		return err
	}
	return groupErr
}

// planApply decides, per row, what --apply does given the group's
// committed offsets on the target: commit, unchanged (already there) or
// kept (ahead, and rewinds are not allowed). It returns the offsets to
// commit and the rows it kept.
func planApply(rows []Row, current map[mirrorclient.TopicPartition]int64, allowRewind bool) (commit []Row, kept []Row) {
	for i := range rows {
		r := &rows[i]
		cur, ok := current[mirrorclient.TopicPartition{Topic: r.Topic, Partition: r.Partition}]
		if ok {
			r.Current = ptr(cur)
		}
		switch {
		case ok && cur == r.Downstream:
			r.Action = "unchanged"
		case ok && cur > r.Downstream && !allowRewind:
			r.Action = "kept"
			kept = append(kept, *r)
		default:
			r.Action = "commit"
			commit = append(commit, *r)
		}
	}
	return commit, kept
}

// Apply commits the report's offsets to the group on the target after
// checking that the group has no active members there.
func (o *Planner) Apply(ctx context.Context, rep *Report, allowRewind bool) error {
	return o.apply(ctx, rep, allowRewind, true)
}

// Check is Apply without the commit: the same checks, and each row's
// Action says what Apply would do; rep.Applied stays false.
func (o *Planner) Check(ctx context.Context, rep *Report, allowRewind bool) error {
	return o.apply(ctx, rep, allowRewind, false)
}

// Members describes group on the cluster of adm: whether it exists, its
// state and its members ("member-id (client-id@host)"), for classic and
// KIP-848 consumer groups.
func Members(ctx context.Context, adm *kadm.Client, group string) (exists bool, state string, members []string, err error) {
	return groupMembers(ctx, adm, group)
}

func (o *Planner) apply(ctx context.Context, rep *Report, allowRewind, doCommit bool) error {
	f := o.f
	adm, closeAdm, err := admin(f.TargetAdmin, "offsets-target")
	if err != nil {
		return fmt.Errorf("cluster %s: %w", f.Target, err)
	}
	defer closeAdm()
	exists, state, members, err := groupMembers(ctx, adm, o.group)
	if err != nil {
		return fmt.Errorf("group %q on %s: %w; nothing committed", o.group, f.Target, err)
	}
	if len(members) > 0 || (exists && state != "Empty") {
		return fmt.Errorf("refusing to commit: group %q on %s is %s with %d active member(s): %s; stop its consumers on %s and run again",
			o.group, f.Target, state, len(members), strings.Join(members, ", "), f.Target)
	}
	current := make(map[mirrorclient.TopicPartition]int64)
	if exists {
		offs, err := adm.FetchOffsets(ctx, o.group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return fmt.Errorf("fetching offsets of group %q on %s: %w; nothing committed", o.group, f.Target, err)
		}
		offs.Each(func(r kadm.OffsetResponse) {
			if r.At >= 0 {
				current[mirrorclient.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.At
			}
		})
	}
	commit, kept := planApply(rep.Partitions, current, allowRewind)
	for _, r := range kept {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s-%d: not moved backwards from %d to %d (its consumers on %s got further; --allow-rewind moves it)",
			r.Topic, r.Partition, *r.Current, r.Downstream, f.Target))
	}
	if !doCommit {
		return nil
	}
	if len(commit) > 0 {
		offs := make(kadm.Offsets)
		for _, r := range commit {
			offs.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.Downstream, LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, o.group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			// A member that joined since the check makes the broker refuse.
			return fmt.Errorf("committing offsets of group %q on %s: %w", o.group, f.Target, err)
		}
	}
	rep.Applied = true
	return nil
}

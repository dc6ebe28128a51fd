// Package cutover works out a migration or failover of one flow in three
// steps, from the clusters and the MM2 configuration: Plan (what moves and
// what does not), Status (is it safe to switch: lag, checkpoints, offset
// translation, a record-by-record check of the copy, producers still
// writing to the source) and Switch (commit the translated offsets of the
// idle groups on the target, refusing active ones). Decide is the rule
// that says whether one group can move; Status and the dashboard's cutover
// panel both use it. It returns plain structs; cmd/kmirror prints them
// and writes the report files.
package cutover

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/offsetplan"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// Options selects what a cutover covers.
type Options struct {
	Config *config.Config
	Flow   *config.Flow // the direction: A->B for a migration, B->A for failback
	// Groups and Topics narrow the flow's groups and topics filters
	// (nil: no narrowing). Topics match source topic names.
	Groups, Topics *regexp.Regexp
	// Window is how long Status watches the source's log-end offsets for
	// producers still writing (0: not watched).
	Window time.Duration
	// VerifyTail is how many of the last copied offsets of each partition
	// Status compares record by record (verify.Flow): 0 all, < 0 none.
	VerifyTail int64
	// SourceDown is an unplanned failover: the source is not asked. The
	// groups are those with checkpoints on the target, their offsets come
	// from the checkpoints, and no topic is checked.
	SourceDown bool
	// AllowRewind lets Switch move a group's offset on the target
	// backwards (see offsetplan.Planner.Apply).
	AllowRewind bool
	Timeout     time.Duration
	Log         *slog.Logger
	Now         func() time.Time // time.Now when nil
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Cluster clients of one run.
type conns struct {
	src, tgt *kadm.Client
	close    func()
}

func connect(f *config.Flow) (*conns, error) {
	s, _, err := clients.New(clients.ID(f.Name(), "cutover-source-admin"), clients.Admin, f.SourceAdmin)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", f.Source, err)
	}
	t, _, err := clients.New(clients.ID(f.Name(), "cutover-target-admin"), clients.Admin, f.TargetAdmin)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cluster %s: %w", f.Target, err)
	}
	return &conns{src: kadm.NewClient(s), tgt: kadm.NewClient(t), close: func() { s.Close(); t.Close() }}, nil
}

// open connects to both clusters and selects the topics and groups.
func open(ctx context.Context, o *Options) (*conns, *selection, error) {
	c, err := connect(o.Flow)
	if err != nil {
		return nil, nil, err
	}
	sel, err := selectAll(ctx, o, c)
	if err != nil {
		c.close()
		return nil, nil, err
	}
	return c, sel, nil
}

// syncer is the flow's topic selection, as kmirror run applies it.
func syncer(f *config.Flow, c *conns) *topicsync.Syncer {
	return &topicsync.Syncer{Source: c.src, Target: c.tgt, SourceAlias: f.Source, TargetAlias: f.Target,
		Policy: f.Policy, Topics: f.TopicFilter, HeartbeatsReplication: f.HeartbeatsReplicationEnabled,
		ConfigExclude: f.ConfigExclude}
}

// Reasons a source topic does not move.
const (
	ReasonInternal = "internal topic"
	ReasonCycle    = "came from the target (copying it back would loop)"
	ReasonBeats    = "heartbeats topic (heartbeats.replication.enabled = false)"
	ReasonFilter   = "not selected by the flow's topics / topics.exclude"
	ReasonTopics   = "not matched by --topics"
	ReasonGroups   = "not selected by the flow's groups / groups.exclude"
	ReasonGroupsRE = "not matched by --groups"
)

// excludeReason says why source topic t does not move, "" if it does.
func excludeReason(s *topicsync.Syncer, only *regexp.Regexp, t string) string {
	if s.ShouldReplicate(t) {
		if only != nil && !only.MatchString(t) {
			return ReasonTopics
		}
		return ""
	}
	switch {
	case s.Policy.IsInternalTopic(t):
		return ReasonInternal
	case policy.IsCycle(s.Policy, t, s.TargetAlias):
		return ReasonCycle
	case s.Policy.IsHeartbeatsTopic(t) && !s.HeartbeatsReplication:
		return ReasonBeats
	}
	return ReasonFilter
}

// groupReason says why group g does not move, "" if it does.
func groupReason(f *config.Flow, only *regexp.Regexp, g string) string {
	switch {
	case !f.GroupFilter.Match(g):
		return ReasonGroups
	case only != nil && !only.MatchString(g):
		return ReasonGroupsRE
	}
	return ""
}

// Excluded is a topic or group that does not move, and why.
type Excluded struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// selection is the flow's topics and groups on the source.
type selection struct {
	topics         []string // selected source topics, sorted
	partitions     map[string]int32
	moving         map[string]bool // the selected topics
	excluded       []Excluded
	groups         []string // selected groups, sorted
	excludedGroups []Excluded
}

// selectAll lists the source's topics and consumer groups and applies the
// flow's filters and the options.
func selectAll(ctx context.Context, o *Options, c *conns) (*selection, error) {
	f := o.Flow
	if o.SourceDown {
		return checkpointedGroups(ctx, o)
	}
	td, err := c.src.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics of %s: %w (if %s is down, --source-down switches the groups from their checkpoints)", f.Source, err, f.Source)
	}
	sy := syncer(f, c)
	sel := &selection{partitions: make(map[string]int32), moving: make(map[string]bool)}
	for _, t := range td.Sorted() {
		if t.Err != nil {
			continue
		}
		if r := excludeReason(sy, o.Topics, t.Topic); r != "" {
			sel.excluded = append(sel.excluded, Excluded{t.Topic, r})
			continue
		}
		sel.topics = append(sel.topics, t.Topic)
		sel.partitions[t.Topic] = int32(len(t.Partitions))
		sel.moving[t.Topic] = true
	}
	// Groups are the source's: where the consumers ran until now (for a
	// failback B->A, the groups that ran on B).
	listed, err := c.src.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, fmt.Errorf("listing groups of %s: %w", f.Source, err)
	}
	names := make(map[string]bool)
	for g, l := range listed {
		if l.ProtocolType == "consumer" || l.ProtocolType == "" || l.GroupType == "consumer" {
			names[g] = true
		}
	}
	return filterGroups(o, sel, names), nil
}

// checkpointedGroups selects, with the source down, the groups that have
// checkpoints on the target.
func checkpointedGroups(ctx context.Context, o *Options) (*selection, error) {
	f := o.Flow
	opts, err := clients.Build(clients.ID(f.Name(), "cutover-target-consumer"), clients.Consumer, f.TargetConsumer)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", f.Target, err)
	}
	ages, err := checkpointAges(ctx, opts, f.Policy.CheckpointsTopic(f.Source), o.now())
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", f.Target, err)
	}
	names := make(map[string]bool, len(ages))
	for g := range ages {
		names[g] = true
	}
	return filterGroups(o, &selection{partitions: map[string]int32{}, moving: map[string]bool{}}, names), nil
}

// filterGroups adds the groups of names that the flow and options select
// to sel, and the others as excluded.
func filterGroups(o *Options, sel *selection, names map[string]bool) *selection {
	f := o.Flow
	for g := range names {
		if r := groupReason(f, o.Groups, g); r != "" {
			sel.excludedGroups = append(sel.excludedGroups, Excluded{g, r})
			continue
		}
		sel.groups = append(sel.groups, g)
	}
	sort.Strings(sel.groups)
	sort.Slice(sel.excludedGroups, func(i, j int) bool { return sel.excludedGroups[i].Name < sel.excludedGroups[j].Name })
	return sel
}

// GroupState is a group's state on one cluster.
type GroupState struct {
	Exists  bool     `json:"exists"`
	State   string   `json:"state,omitempty"`
	Members []string `json:"members,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Active reports whether the group has members (or is not Empty/Dead).
func (g GroupState) Active() bool {
	return len(g.Members) > 0 || g.Exists && g.State != "Empty" && g.State != "Dead" && g.State != ""
}

// movesNothing reports whether group, on the source, has committed offsets
// on no topic that moves: neither a selected topic nor, for a failback, a
// remote topic of the target's (which offsetplan translates back). Such a
// group consumes something else; a cutover of the flow leaves it alone.
// An active group without any commit is not known to move nothing (it may
// have just started on a topic that moves). moving is the group's
// committed partitions (source names) on topics that move, nil with the
// source down (not known).
func movesNothing(ctx context.Context, o *Options, c *conns, sel *selection, group string, active bool) (nothing bool, moving []progress.TP, err error) {
	if o.SourceDown {
		return false, nil, nil // the groups come from the checkpoints
	}
	offs, err := c.src.FetchOffsets(ctx, group)
	if err != nil {
		return false, nil, fmt.Errorf("fetching offsets of group %q on %s: %w", group, o.Flow.Source, err)
	}
	committed := false
	moving = []progress.TP{}
	offs.Each(func(r kadm.OffsetResponse) {
		if r.Err != nil || r.At < 0 {
			return
		}
		committed = true
		src, remote := o.Flow.Policy.TopicSource(r.Topic)
		if sel.moving[r.Topic] || remote && src == o.Flow.Target {
			moving = append(moving, progress.TP{Topic: r.Topic, Partition: r.Partition})
		}
	})
	return len(moving) == 0 && (committed || !active), moving, nil
}

// StateSourceDown is the state of a group on a source that is not asked.
const StateSourceDown = "unknown (source down)"

// sourceState describes group on the source, unless it is down.
func sourceState(ctx context.Context, o *Options, c *conns, group string) GroupState {
	if o.SourceDown {
		return GroupState{State: StateSourceDown}
	}
	return groupState(ctx, c.src, group)
}

func groupState(ctx context.Context, adm *kadm.Client, group string) GroupState {
	exists, state, members, err := offsetplan.Members(ctx, adm, group)
	gs := GroupState{Exists: exists, State: state, Members: members}
	if err != nil {
		gs.Error = err.Error()
	}
	return gs
}

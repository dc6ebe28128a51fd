package dashboard

import (
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/cutover"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/runner"
)

// staleAfter is how long past its emit interval (three of them, at least
// minStale) a group's offsets may go unchecked before the cutover panel
// calls its checkpoints stale.
const (
	staleIntervals = 3
	minStale       = 30 * time.Second
)

// groupView is a consumer group of a flow as the cutover panel shows it:
// is it ready to move to the target, and if not, why not.
type groupView struct {
	Flow       string   `json:"flow"`
	Group      string   `json:"group"`
	Topics     []string `json:"topics"` // its target topics, the first maxGroupTopics
	TopicCount int      `json:"topic_count"`
	Partitions int      `json:"partitions"` // with a checkpoint
	// Committed and Untranslated are the checkpoint task's last count
	// (nil before its first check): partitions with a committed offset
	// in replicated topics, and those of them with no translation.
	Committed       *int       `json:"committed"`
	Untranslated    *int       `json:"untranslated"`
	LastCheckpoint  *time.Time `json:"last_checkpoint"` // the newest of its partitions
	CheckedAt       *time.Time `json:"checked_at"`
	CheckAgeSeconds *float64   `json:"check_age_seconds"`
	IntervalSeconds float64    `json:"interval_seconds"`
	LatencyMs       *float64   `json:"checkpoint_latency_ms"` // the highest of its partitions
	// ReplicationLag is the records of its checkpointed partitions not on
	// the target yet, over LaggingPartitions of them; Unlisted counts
	// those this kmirror does not copy (another worker's: lag unknown).
	ReplicationLag    int64 `json:"replication_lag"`
	LaggingPartitions int   `json:"lagging_partitions"`
	Unlisted          int   `json:"unlisted"`
	// Sync is sync.group.offsets.enabled; the rest as metrics.GroupStatus.
	Sync        bool       `json:"sync"`
	SyncedAt    *time.Time `json:"synced_at"`
	TargetState string     `json:"target_state"`
	SourceState string     `json:"source_state"` // at the last group listing`
	SyncBehind  int        `json:"sync_behind"`
	Ready       bool       `json:"ready"`
	Blockers    []string   `json:"blockers"` // why it is not ready
	Notes       []string   `json:"notes"`
}

type groupKey struct{ flow, group string }

// groups returns the readiness of every checkpointed group of flows.
func (d *Dashboard) groups(flows []runner.FlowStatus, now time.Time) []groupView {
	out := []groupView{}
	m := d.cfg.Metrics
	if m == nil {
		return out
	}
	gs := groupSet{}
	for _, s := range m.LastCheckpoints.Groups() {
		g := gs.view(s.Source+"->"+s.Target, s.Group)
		applyStatus(g, s, now)
	}
	gs.addCheckpoints(m.LastCheckpoints.All(), flows)
	m.CheckpointLatencyMs.EachLast(func(l []string, last float64) {
		if g := gs[groupKey{l[0] + "->" + l[1], l[2]}]; g != nil {
			g.LatencyMs = maxOf(g.LatencyMs, last)
		}
	})
	for _, g := range gs {
		if g.CheckedAt == nil && g.Partitions == 0 {
			continue // synced once, no offset in a replicated topic now
		}
		readiness(g)
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Ready != b.Ready {
			return !a.Ready // not ready first
		}
		if a.Flow != b.Flow {
			return a.Flow < b.Flow
		}
		return a.Group < b.Group
	})
	return out
}

// groupSet is the views of groups by flow and group.
type groupSet map[groupKey]*groupView

// view returns the view of group in flow, made empty on first use.
func (gs groupSet) view(flow, group string) *groupView {
	k := groupKey{flow, group}
	g := gs[k]
	if g == nil {
		g = &groupView{Flow: flow, Group: group, Topics: []string{}, Blockers: []string{}, Notes: []string{}}
		gs[k] = g
	}
	return g
}

// addCheckpoints adds each checkpoint of cps to its group's view, with
// the lag of its partition in flows.
func (gs groupSet) addCheckpoints(cps []metrics.Checkpoint, flows []runner.FlowStatus) {
	// The partitions of the flows that have checkpoints, by remote topic.
	parts := map[partKey]*datapath.PartitionStatus{}
	indexed := map[string]bool{}
	topics := map[groupKey]map[string]bool{}
	for _, c := range cps {
		flow := c.Source + "->" + c.Target
		if !indexed[flow] {
			indexed[flow] = true
			indexPartitions(parts, flows, flow)
		}
		g := gs.view(flow, c.Group)
		k := groupKey{flow, c.Group}
		if topics[k] == nil {
			topics[k] = map[string]bool{}
		}
		g.addCheckpoint(c, topics[k], parts[partKey{flow, c.Topic, c.Partition}])
	}
}

// indexPartitions adds the partitions of flow to parts, by remote topic.
func indexPartitions(parts map[partKey]*datapath.PartitionStatus, flows []runner.FlowStatus, flow string) {
	for fi := range flows {
		if flows[fi].Name == flow {
			for i := range flows[fi].Partitions {
				p := &flows[fi].Partitions[i]
				parts[partKey{flow, p.Remote, p.Partition}] = p
			}
		}
	}
}

// addCheckpoint counts checkpoint c of the group, whose topics so far are
// in topics, and the lag of its partition p (nil: not copied here).
func (g *groupView) addCheckpoint(c metrics.Checkpoint, topics map[string]bool, p *datapath.PartitionStatus) {
	g.Partitions++
	if g.LastCheckpoint == nil || c.At.After(*g.LastCheckpoint) {
		at := c.At
		g.LastCheckpoint = &at
	}
	if !topics[c.Topic] {
		topics[c.Topic] = true
		g.TopicCount++
		if len(g.Topics) < maxGroupTopics {
			g.Topics = append(g.Topics, c.Topic)
		}
	}
	switch {
	case p == nil:
		g.Unlisted++
	case p.Lag > 0:
		g.ReplicationLag += p.Lag
		g.LaggingPartitions++
	}
}

// applyStatus sets what the checkpoint task found of the group.
func applyStatus(g *groupView, s metrics.GroupStatus, now time.Time) {
	g.IntervalSeconds = s.Interval.Seconds()
	if !s.CheckedAt.IsZero() {
		at, age := s.CheckedAt, now.Sub(s.CheckedAt).Seconds()
		g.CheckedAt, g.CheckAgeSeconds = &at, &age
		committed, untranslated := s.Committed, s.Untranslated
		g.Committed, g.Untranslated = &committed, &untranslated
	}
	g.Sync, g.TargetState, g.SyncBehind, g.SourceState = s.Sync, s.TargetState, s.SyncBehind, s.SourceState
	if !s.SyncedAt.IsZero() {
		at := s.SyncedAt
		g.SyncedAt = &at
	}
}

// readiness decides whether a group can move to the target now, by the
// rule of "kmirror cutover status" (cutover.Decide) applied to what the
// checkpoint task last found of it.
func readiness(g *groupView) {
	v := cutover.Decide(groupFacts(g))
	g.Ready = v.Ready
	g.Blockers = append(g.Blockers, v.Reasons...)
	g.Notes = append(g.Notes, v.Notes...)
}

// groupFacts is what the dashboard knows of g for cutover.Decide.
func groupFacts(g *groupView) cutover.GroupFacts {
	src, tgt, _ := strings.Cut(g.Flow, "->")
	f := cutover.GroupFacts{SourceCluster: src, TargetCluster: tgt,
		Committed: g.Committed, Untranslated: g.Untranslated,
		Lag: g.ReplicationLag, LaggingPartitions: g.LaggingPartitions, LagUnknown: g.Unlisted,
		Sync: g.Sync && g.SyncedAt != nil, SyncOff: !g.Sync && g.CheckedAt != nil, SyncBehind: g.SyncBehind}
	if g.Partitions == 0 { // no checkpoint: status finds no offsets either
		f.Translation = cutover.TranslationNone
	}
	if g.SourceState != "" {
		f.Source = &cutover.GroupState{Exists: true, State: g.SourceState}
	}
	if f.Sync {
		f.Target = &cutover.GroupState{Exists: g.TargetState != "", State: g.TargetState}
	}
	if g.CheckAgeSeconds != nil {
		age := time.Duration(*g.CheckAgeSeconds * float64(time.Second))
		f.CheckAge = &age
		f.StaleAfter = max(staleIntervals*time.Duration(g.IntervalSeconds*float64(time.Second)), minStale)
	}
	return f
}

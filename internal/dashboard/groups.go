package dashboard

import (
	"fmt"
	"sort"
	"time"

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
	byKey := map[groupKey]*groupView{}
	view := func(flow, group string) *groupView {
		k := groupKey{flow, group}
		g := byKey[k]
		if g == nil {
			g = &groupView{Flow: flow, Group: group, Topics: []string{}, Blockers: []string{}, Notes: []string{}}
			byKey[k] = g
		}
		return g
	}
	for _, s := range m.LastCheckpoints.Groups() {
		g := view(s.Source+"->"+s.Target, s.Group)
		applyStatus(g, s, now)
	}
	cps := m.LastCheckpoints.All()
	// The partitions of the flows that have checkpoints, by remote topic.
	parts := map[partKey]*datapath.PartitionStatus{}
	indexed := map[string]bool{}
	topics := map[groupKey]map[string]bool{}
	for _, c := range cps {
		flow := c.Source + "->" + c.Target
		if !indexed[flow] {
			indexed[flow] = true
			for fi := range flows {
				if flows[fi].Name == flow {
					for i := range flows[fi].Partitions {
						p := &flows[fi].Partitions[i]
						parts[partKey{flow, p.Remote, p.Partition}] = p
					}
				}
			}
		}
		g := view(flow, c.Group)
		g.Partitions++
		if g.LastCheckpoint == nil || c.At.After(*g.LastCheckpoint) {
			at := c.At
			g.LastCheckpoint = &at
		}
		k := groupKey{flow, c.Group}
		if topics[k] == nil {
			topics[k] = map[string]bool{}
		}
		if !topics[k][c.Topic] {
			topics[k][c.Topic] = true
			g.TopicCount++
			if len(g.Topics) < maxGroupTopics {
				g.Topics = append(g.Topics, c.Topic)
			}
		}
		switch p := parts[partKey{flow, c.Topic, c.Partition}]; {
		case p == nil:
			g.Unlisted++
		case p.Lag > 0:
			g.ReplicationLag += p.Lag
			g.LaggingPartitions++
		}
	}
	m.CheckpointLatencyMs.EachLast(func(l []string, last float64) {
		if g := byKey[groupKey{l[0] + "->" + l[1], l[2]}]; g != nil {
			g.LatencyMs = maxOf(g.LatencyMs, last)
		}
	})
	for _, g := range byKey {
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

// applyStatus sets what the checkpoint task found of the group.
func applyStatus(g *groupView, s metrics.GroupStatus, now time.Time) {
	g.IntervalSeconds = s.Interval.Seconds()
	if !s.CheckedAt.IsZero() {
		at, age := s.CheckedAt, now.Sub(s.CheckedAt).Seconds()
		g.CheckedAt, g.CheckAgeSeconds = &at, &age
		committed, untranslated := s.Committed, s.Untranslated
		g.Committed, g.Untranslated = &committed, &untranslated
	}
	g.Sync, g.TargetState, g.SyncBehind = s.Sync, s.TargetState, s.SyncBehind
	if !s.SyncedAt.IsZero() {
		at := s.SyncedAt
		g.SyncedAt = &at
	}
}

// readiness decides whether a group can move to the target now: every
// committed offset translated, checked recently, its partitions copied up
// to the source's end and, with group offset sync, its translated offsets
// in the target group.
func readiness(g *groupView) {
	switch {
	case g.Partitions == 0 && (g.Committed == nil || *g.Committed == 0):
		g.Blockers = append(g.Blockers, "no checkpoint yet")
	case g.Untranslated != nil && *g.Untranslated > 0:
		g.Blockers = append(g.Blockers, fmt.Sprintf("%d of %d partitions not translated yet (no offset sync at or below the committed offset)", *g.Untranslated, *g.Committed))
	}
	if g.CheckAgeSeconds != nil {
		limit := max(staleIntervals*g.IntervalSeconds, minStale.Seconds())
		if *g.CheckAgeSeconds > limit {
			g.Blockers = append(g.Blockers, fmt.Sprintf("offsets last checked %s ago", time.Duration(*g.CheckAgeSeconds*float64(time.Second)).Round(time.Second)))
		}
	}
	if g.LaggingPartitions > 0 {
		g.Blockers = append(g.Blockers, fmt.Sprintf("replication %d records behind on %d partitions", g.ReplicationLag, g.LaggingPartitions))
	}
	if g.Sync && g.SyncBehind > 0 {
		g.Blockers = append(g.Blockers, fmt.Sprintf("%d partitions of the target group behind their checkpoint", g.SyncBehind))
	}
	if g.Sync && g.SyncBehind < 0 {
		g.Notes = append(g.Notes, "active on the target ("+g.TargetState+"): offsets not synced into it")
	}
	if g.Unlisted > 0 {
		g.Notes = append(g.Notes, fmt.Sprintf("lag of %d partitions unknown here (copied by another worker)", g.Unlisted))
	}
	if !g.Sync && g.CheckedAt != nil {
		g.Notes = append(g.Notes, "sync.group.offsets.enabled is off: consumers on the target start from the checkpoints")
	}
	g.Ready = len(g.Blockers) == 0
}

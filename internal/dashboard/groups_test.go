package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/metrics"
)

// TestGroupsGolden pins every field of what groups returns, in order, in
// testdata/groups-NAME.golden.
func TestGroupsGolden(t *testing.T) {
	now := time.Unix(9000, 0).UTC()
	fs := pagedFlows() // A.t/1 lags 50, A.t/3 7, A.u/0 100; B.t/1 3
	cp := func(m *metrics.Metrics, src, tgt, group, topic string, p int32, ago time.Duration) {
		m.LastCheckpoints.Set(metrics.Checkpoint{Source: src, Target: tgt, Group: group, Topic: topic, Partition: p,
			Upstream: 10, Downstream: 8, At: now.Add(-ago)})
	}
	status := func(m *metrics.Metrics, src, tgt, group string, s metrics.GroupStatus) {
		m.LastCheckpoints.UpdateGroup(src, tgt, group, func(g *metrics.GroupStatus) {
			s.Source, s.Target, s.Group = src, tgt, group
			*g = s
		})
	}
	tests := []struct {
		name  string
		setup func(m *metrics.Metrics)
	}{
		{"no checkpoints", func(*metrics.Metrics) {}},
		{"mixed", func(m *metrics.Metrics) {
			// ready: checked, synced, caught up.
			status(m, "A", "B", "ready", metrics.GroupStatus{CheckedAt: now.Add(-2 * time.Second), Interval: 5 * time.Second,
				Committed: 1, Sync: true, SyncedAt: now.Add(-time.Second), TargetState: "Empty", SourceState: "Empty"})
			cp(m, "A", "B", "ready", "A.t", 0, 3*time.Second)
			// behind: lagging partitions over two topics, the newest
			// checkpoint and the highest latency win.
			status(m, "A", "B", "behind", metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 3, Untranslated: 1})
			cp(m, "A", "B", "behind", "A.t", 1, 9*time.Second)
			cp(m, "A", "B", "behind", "A.t", 3, time.Second)
			cp(m, "A", "B", "behind", "A.u", 0, 5*time.Second)
			m.CheckpointLatencyMs.WithLabelValues("A", "B", "behind", "A.t", "1").Set(7)
			m.CheckpointLatencyMs.WithLabelValues("A", "B", "behind", "A.u", "0").Set(40)
			m.CheckpointLatencyMs.WithLabelValues("A", "B", "ready", "A.t", "0").Set(2)
			m.CheckpointLatencyMs.WithLabelValues("A", "B", "gone", "A.t", "0").Set(99) // no such group
			// many: more topics than it lists, none copied here.
			for i := range maxGroupTopics + 2 {
				cp(m, "A", "B", "many", fmt.Sprintf("A.x%d", i), 0, time.Minute)
				cp(m, "A", "B", "many", fmt.Sprintf("A.x%d", i), 1, time.Minute)
			}
			// checkpoints, no status yet, on the other flow.
			cp(m, "B", "A", "other", "B.t", 1, 2*time.Second)
			cp(m, "B", "A", "other", "B.t", 0, 2*time.Second)
			// checked, but no offsets in a replicated topic: listed.
			status(m, "B", "A", "empty", metrics.GroupStatus{CheckedAt: now.Add(-time.Hour), Interval: time.Minute, SourceState: "Stable"})
			// synced once and never checked, no checkpoint: not listed.
			status(m, "A", "B", "synced-once", metrics.GroupStatus{Sync: true, SyncedAt: now, TargetState: "Empty", SyncBehind: 2})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New()
			tt.setup(m)
			got := New(Config{Source: fs, Metrics: m}).groups(fs, now)
			checkGolden(t, "groups-"+tt.name, got)
		})
	}
	t.Run("no metrics", func(t *testing.T) {
		got := New(Config{Source: fs}).groups(fs, now)
		if got == nil || len(got) != 0 {
			t.Fatalf("groups without metrics = %#v, want an empty slice", got)
		}
	})
}

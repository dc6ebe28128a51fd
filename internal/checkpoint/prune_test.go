package checkpoint

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestPruneCheckpoints: the last checkpoints of partitions a group has no
// committed offset for any more (topic deleted) go with their series; so do
// all of a group that is no longer listed.
func TestPruneCheckpoints(t *testing.T) {
	pol, err := policy.New(policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	tk := &Task{cfg: &config.Flow{Source: "A", Target: "B"}, m: m, pol: pol, last: map[string]map[cpKey]wire.Checkpoint{}}
	for _, g := range []string{"g1", "g2"} {
		tk.last[g] = map[cpKey]wire.Checkpoint{}
		for _, topic := range []string{"A.kept", "A.deleted"} {
			for p := range int32(2) {
				tk.last[g][cpKey{topic, p}] = wire.Checkpoint{Group: g, Topic: topic, Partition: p}
				m.CheckpointLatencyMs.WithLabelValues("A", "B", g, topic, string(rune('0'+p))).Set(1)
				m.LastCheckpoints.Set(metrics.Checkpoint{Source: "A", Target: "B", Group: g, Topic: topic, Partition: p})
			}
		}
	}
	offs := kadm.OffsetResponses{}
	offs.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "kept", Partition: 0, At: 5}})
	offs.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: "kept", Partition: 1, At: 5}})
	tk.pruneLocked("g1", offs)
	if n := len(tk.last["g1"]); n != 2 {
		t.Fatalf("g1 keeps %d partitions, want the 2 of kept: %v", n, tk.last["g1"])
	}
	if n, all := m.CheckpointLatencyMs.Len(), len(m.LastCheckpoints.All()); n != 6 || all != 6 {
		t.Fatalf("%d latency windows, %d last checkpoints; want 6 and 6", n, all)
	}
	tk.dropUnlistedLocked([]string{"g1"})
	if _, ok := tk.last["g2"]; ok || len(tk.last["g1"]) != 2 {
		t.Fatalf("groups left: %v", tk.last)
	}
	if n, all := m.CheckpointLatencyMs.Len(), len(m.LastCheckpoints.All()); n != 2 || all != 2 {
		t.Fatalf("%d latency windows, %d last checkpoints; want 2 and 2", n, all)
	}
}

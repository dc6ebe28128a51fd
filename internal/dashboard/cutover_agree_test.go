package dashboard

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/cutover"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetplan"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestReadinessAgreesWithCutoverStatus: for the same group, the same
// verdict and the same reasons in the dashboard's JSON (built from what
// the checkpoint task records) and in "kmirror cutover status" (built
// from what it reads off the clusters).
func TestReadinessAgreesWithCutoverStatus(t *testing.T) {
	cfg, err := config.Parse("mm2.properties", []byte("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\nA->B.enabled = true\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cfg.Pair("A", "B")
	if err != nil {
		t.Fatal(err)
	}
	// A group with committed offsets on partitions 0..3 of topic t.
	type scenario struct {
		name       string
		src, tgt   string          // group state on A and B ("": not on B)
		translated []int32         // partitions with a checkpoint
		lag        map[int32]int64 // records of t not copied yet
		ready      bool
	}
	all := []int32{0, 1, 2, 3}
	for _, sc := range []scenario{
		{"ready", "Empty", "", all, nil, true},
		{"ready, idle on the target", "Empty", "Empty", all, nil, true},
		{"active on the source", "Stable", "", all, nil, false},
		{"active on the target", "Empty", "Stable", all, nil, false},
		{"no checkpoint", "Empty", "", nil, nil, false},
		{"a partition not translated", "Empty", "", []int32{0, 1, 2}, nil, false},
		{"lag not zero", "Empty", "", all, map[int32]int64{1: 50, 2: 5}, false},
		{"lag only where the group has no checkpoint", "Empty", "", []int32{0, 1}, map[int32]int64{3: 7}, false},
		{"everything at once", "Stable", "Stable", []int32{1}, map[int32]int64{1: 9}, false},
	} {
		t.Run(sc.name, func(t *testing.T) {
			now := time.Now()
			members := func(state string) []string {
				if state == "Stable" {
					return []string{"m-1 (c@h)"}
				}
				return nil
			}
			// The dashboard: the checkpoint task's status and last
			// checkpoints, the runner's partitions.
			m := metrics.New()
			behind := 0
			if sc.tgt == "Stable" {
				behind = -1 // the sync leaves an active group alone
			}
			m.LastCheckpoints.UpdateGroup("A", "B", "g", func(g *metrics.GroupStatus) {
				g.Interval, g.CheckedAt, g.Committed, g.Untranslated = 5*time.Second, now, len(all), len(all)-len(sc.translated)
				g.SourceState, g.Sync, g.SyncedAt, g.TargetState, g.SyncBehind = sc.src, true, now, sc.tgt, behind
			})
			for _, p := range sc.translated {
				m.LastCheckpoints.Set(metrics.Checkpoint{Source: "A", Target: "B", Group: "g", Topic: "A.t", Partition: p, Upstream: 10, Downstream: 10, At: now})
			}
			fl := flows{{Name: "A->B", Kind: "replication", State: "running"}}
			for _, p := range all {
				fl[0].Partitions = append(fl[0].Partitions, datapath.PartitionStatus{Topic: "t", Partition: p, Remote: "A.t", State: "running", Lag: sc.lag[p]})
			}
			_, srv := served(t, fl, m, nil)
			resp, body := get(t, srv.URL+"/ui/api/overview", token)
			if resp.StatusCode != 200 {
				t.Fatalf("overview: %d %s", resp.StatusCode, body)
			}
			var ov struct {
				Groups []struct {
					Group    string   `json:"group"`
					Ready    bool     `json:"ready"`
					Blockers []string `json:"blockers"`
				} `json:"groups"`
			}
			if err := json.Unmarshal([]byte(body), &ov); err != nil || len(ov.Groups) != 1 {
				t.Fatalf("overview groups %+v (%v): %s", ov.Groups, err, body)
			}
			dash := ov.Groups[0]

			// cutover status: the group's states, its offsets (one row
			// per checkpointed partition), its commits, the topics' lag.
			gs := cutover.GroupStatus{Group: "g", Translation: cutover.TranslationExact,
				Source: cutover.GroupState{Exists: true, State: sc.src, Members: members(sc.src)},
				Target: cutover.GroupState{Exists: sc.tgt != "", State: sc.tgt, Members: members(sc.tgt)}}
			for _, p := range sc.translated {
				gs.Offsets = append(gs.Offsets, offsetplan.Row{Topic: "A.t", Partition: p, Upstream: 10, Downstream: 10})
			}
			if len(gs.Offsets) == 0 {
				gs.Translation = cutover.TranslationNone
			}
			var moving []progress.TP
			ts := cutover.TopicStatus{Topic: "t", Remote: "A.t"}
			for _, p := range all {
				moving = append(moving, progress.TP{Topic: "t", Partition: p})
				ts.Partitions = append(ts.Partitions, cutover.PartitionStatus{Partition: p, LagRecords: sc.lag[p]})
				ts.LagRecords += sc.lag[p]
			}
			cli := cutover.Decide(cutover.StatusFacts(f, &gs, moving, []cutover.TopicStatus{ts}))

			if dash.Ready != sc.ready || cli.Ready != sc.ready {
				t.Errorf("ready: dashboard %v, cutover status %v; want %v", dash.Ready, cli.Ready, sc.ready)
			}
			want := cli.Reasons
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(dash.Blockers, want) {
				t.Errorf("reasons differ:\ndashboard      %q\ncutover status %q", dash.Blockers, want)
			}
		})
	}
}

package offsetplan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/wire"
	"github.com/kmirror/kmirror/mirrorclient"
)

// flowsConfig parses a two-cluster file with unreachable brokers and the
// given flows enabled.
func flowsConfig(t *testing.T, flows ...string) *config.Config {
	t.Helper()
	body := "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
	for _, f := range flows {
		body += f + ".enabled = true\n"
	}
	cfg, err := config.Parse("mm2.properties", []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testFlow is A->B of a file that enables only it.
func testFlow(t *testing.T) *config.Flow {
	t.Helper()
	f, err := flowsConfig(t, "A->B").Pair("A", "B")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMergeRows(t *testing.T) {
	tp := func(p int32) mirrorclient.TopicPartition {
		return mirrorclient.TopicPartition{Topic: "A.t", Partition: p}
	}
	cps := map[mirrorclient.TopicPartition]mirrorclient.Checkpoint{
		tp(0): {Topic: "A.t", Partition: 0, UpstreamOffset: 10, DownstreamOffset: 9},
		tp(1): {Topic: "A.t", Partition: 1, UpstreamOffset: 5, DownstreamOffset: 5},
	}
	fresh := []wire.Checkpoint{
		{Topic: "A.t", Partition: 1, UpstreamOffset: 7, DownstreamOffset: 7},
		{Topic: "A.t", Partition: 2, UpstreamOffset: 3, DownstreamOffset: 2},
	}
	type got struct {
		p        int32
		up, down int64
	}
	tests := []struct {
		name  string
		cps   map[mirrorclient.TopicPartition]mirrorclient.Checkpoint
		fresh []wire.Checkpoint
		use   string
		want  []got
	}{
		{"checkpoints", cps, fresh, UseCheckpoints, []got{{0, 10, 9}, {1, 5, 5}}},
		{"translate", cps, fresh, UseTranslate, []got{{1, 7, 7}, {2, 3, 2}}},
		{"checkpoints only", cps, nil, UseCheckpoints, []got{{0, 10, 9}, {1, 5, 5}}},
		{"no checkpoints", nil, fresh, UseCheckpoints, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := mergeRows(tt.cps, tt.fresh, tt.use)
			var g []got
			for _, r := range rows {
				g = append(g, got{r.Partition, r.Upstream, r.Downstream})
			}
			if !reflect.DeepEqual(g, tt.want) {
				t.Errorf("rows %v, want %v", g, tt.want)
			}
		})
	}
	// Both sources are kept side by side.
	rows := mergeRows(cps, fresh, UseCheckpoints)
	if r := rows[1]; r.FreshDownstream == nil || *r.FreshDownstream != 7 || *r.CheckpointDownstream != 5 {
		t.Errorf("partition 1 row %+v lacks the fresh translation next to the checkpoint", r)
	}
}

func TestCompareNotes(t *testing.T) {
	row := func(cu, cd, fu, fd int64) Row {
		return Row{Topic: "A.t", CheckpointUpstream: &cu, CheckpointDownstream: &cd, FreshUpstream: &fu, FreshDownstream: &fd}
	}
	f := testFlow(t)
	tests := []struct {
		name string
		row  Row
		use  string
		want string // "" means no note
	}{
		{"same", row(5, 5, 5, 5), UseCheckpoints, ""},
		{"same downstream, newer commit", row(5, 5, 6, 5), UseCheckpoints, ""},
		{"group moved on", row(5, 5, 9, 9), UseCheckpoints, "committed 9 on A after the last checkpoint (5)"},
		{"differs", row(5, 5, 3, 3), UseCheckpoints, "checkpoint 5->5, fresh translation 3->3"},
		{"translate used", row(5, 5, 9, 9), UseTranslate, "checkpoint 5->5, fresh translation 9->9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes := compareNotes([]Row{tt.row}, tt.use, f)
			switch {
			case tt.want == "" && len(notes) > 0:
				t.Errorf("notes %q, want none", notes)
			case tt.want != "" && (len(notes) != 1 || !strings.Contains(notes[0], tt.want)):
				t.Errorf("notes %q, want one containing %q", notes, tt.want)
			}
		})
	}
}

func TestPlanApply(t *testing.T) {
	rows := func() []Row {
		return []Row{
			{Topic: "A.t", Partition: 0, Downstream: 10},
			{Topic: "A.t", Partition: 1, Downstream: 20},
			{Topic: "A.t", Partition: 2, Downstream: 30},
			{Topic: "A.t", Partition: 3, Downstream: 40},
		}
	}
	tp := func(p int32) mirrorclient.TopicPartition {
		return mirrorclient.TopicPartition{Topic: "A.t", Partition: p}
	}
	// Partition 0 has no commit, 1 is behind, 2 is there, 3 is ahead.
	current := map[mirrorclient.TopicPartition]int64{tp(1): 15, tp(2): 30, tp(3): 45}
	tests := []struct {
		name        string
		allowRewind bool
		actions     []string
		commit      []int32
		kept        []int32
	}{
		{"no rewind", false, []string{"commit", "commit", "unchanged", "kept"}, []int32{0, 1}, []int32{3}},
		{"allow rewind", true, []string{"commit", "commit", "unchanged", "commit"}, []int32{0, 1, 3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := rows()
			commit, kept := planApply(rs, current, tt.allowRewind)
			var actions []string
			for _, r := range rs {
				actions = append(actions, r.Action)
			}
			parts := func(rs []Row) []int32 {
				var out []int32
				for _, r := range rs {
					out = append(out, r.Partition)
				}
				return out
			}
			if !reflect.DeepEqual(actions, tt.actions) {
				t.Errorf("actions %v, want %v", actions, tt.actions)
			}
			if !reflect.DeepEqual(parts(commit), tt.commit) || !reflect.DeepEqual(parts(kept), tt.kept) {
				t.Errorf("commit %v kept %v, want %v and %v", parts(commit), parts(kept), tt.commit, tt.kept)
			}
			if rs[3].Current == nil || *rs[3].Current != 45 || rs[0].Current != nil {
				t.Errorf("current offsets not recorded: %+v", rs)
			}
		})
	}
}

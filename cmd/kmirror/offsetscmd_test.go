package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/wire"
	"github.com/kmirror/kmirror/mirrorclient"
)

// testConfig writes a two-cluster MM2 file with unreachable brokers.
func testConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mm2.properties")
	body := "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\nA->B.enabled = true\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOffsetsArgs(t *testing.T) {
	cfg := testConfig(t)
	base := []string{"offsets", "--config", cfg, "--group", "g"}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing flags", []string{"offsets", "--config", cfg}, 2, "missing --group, --from, --to"},
		{"bad output", append(base, "--from", "A", "--to", "B", "--output", "yaml"), 2, `--output "yaml"`},
		{"bad use", append(base, "--from", "A", "--to", "B", "--use", "guess"), 2, `--use "guess"`},
		{"rewind without apply", append(base, "--from", "A", "--to", "B", "--allow-rewind"), 2, "--allow-rewind needs --apply"},
		{"extra argument", append(base, "--from", "A", "--to", "B", "extra"), 2, `unexpected argument "extra"`},
		{"unknown alias", append(base, "--from", "A", "--to", "C"), 1, `unknown cluster alias "C"`},
		{"same cluster", append(base, "--from", "A", "--to", "A"), 1, "same cluster"},
		{"missing file", []string{"offsets", "--config", "/nonexistent.properties", "--group", "g", "--from", "A", "--to", "B"}, 1, "nonexistent.properties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.want)
			}
		})
	}
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
		{"checkpoints", cps, fresh, useCheckpoints, []got{{0, 10, 9}, {1, 5, 5}}},
		{"translate", cps, fresh, useTranslate, []got{{1, 7, 7}, {2, 3, 2}}},
		{"checkpoints only", cps, nil, useCheckpoints, []got{{0, 10, 9}, {1, 5, 5}}},
		{"no checkpoints", nil, fresh, useCheckpoints, nil},
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
	rows := mergeRows(cps, fresh, useCheckpoints)
	if r := rows[1]; r.FreshDownstream == nil || *r.FreshDownstream != 7 || *r.CheckpointDownstream != 5 {
		t.Errorf("partition 1 row %+v lacks the fresh translation next to the checkpoint", r)
	}
}

func TestCompareNotes(t *testing.T) {
	row := func(cu, cd, fu, fd int64) offsetRow {
		return offsetRow{Topic: "A.t", CheckpointUpstream: &cu, CheckpointDownstream: &cd, FreshUpstream: &fu, FreshDownstream: &fd}
	}
	f := testFlow(t)
	tests := []struct {
		name string
		row  offsetRow
		use  string
		want string // "" means no note
	}{
		{"same", row(5, 5, 5, 5), useCheckpoints, ""},
		{"same downstream, newer commit", row(5, 5, 6, 5), useCheckpoints, ""},
		{"group moved on", row(5, 5, 9, 9), useCheckpoints, "committed 9 on A after the last checkpoint (5)"},
		{"differs", row(5, 5, 3, 3), useCheckpoints, "checkpoint 5->5, fresh translation 3->3"},
		{"translate used", row(5, 5, 9, 9), useTranslate, "checkpoint 5->5, fresh translation 9->9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes := compareNotes([]offsetRow{tt.row}, tt.use, f)
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
	rows := func() []offsetRow {
		return []offsetRow{
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
			parts := func(rs []offsetRow) []int32 {
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

func TestPrintOffsets(t *testing.T) {
	cu, cd := int64(10), int64(9)
	rep := &offsetsReport{Group: "g", From: "A", To: "B", Source: useCheckpoints, CheckpointsTopic: "A.checkpoints.internal", Mode: "exact",
		Partitions: []offsetRow{{Topic: "A.t", Partition: 0, Upstream: 10, Downstream: 9, CheckpointUpstream: &cu, CheckpointDownstream: &cd, Action: "commit"}},
		Notes:      []string{"hello"}, Applied: true}
	tests := []struct {
		output string
		want   []string
	}{
		{"text", []string{"source: checkpoints in A.checkpoints.internal on B", "A.t", "10->9", "commit", "note: hello", "applied: committed to group g on B"}},
		{"json", []string{`"downstream_offset": 9`, `"source": "checkpoints"`, `"applied": true`}},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printOffsets(&b, rep, tt.output); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s output lacks %q:\n%s", tt.output, w, b.String())
			}
		}
	}
}

func testFlow(t *testing.T) *config.Flow {
	t.Helper()
	cfg, err := config.Load(testConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cfg.Pair("A", "B")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/offsetplan"
)

// testConfig writes a two-cluster MM2 file with unreachable brokers and
// A->B enabled.
func testConfig(t *testing.T) string {
	return flowsConfig(t, "A->B")
}

// flowsConfig writes a two-cluster MM2 file with unreachable brokers and
// the given flows enabled.
func flowsConfig(t *testing.T, flows ...string) string {
	t.Helper()
	body := "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
	for _, f := range flows {
		body += f + ".enabled = true\n"
	}
	p := filepath.Join(t.TempDir(), "mm2.properties")
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

// TestOffsetsRouting checks which path "kmirror offsets" takes, with
// clusters that do not answer: --from B --to A tries the reverse
// translation only when the file enables A->B.
func TestOffsetsRouting(t *testing.T) {
	tests := []struct {
		name     string
		flows    []string
		from, to string
		reverse  bool
	}{
		{"failback with A->B only", []string{"A->B"}, "B", "A", true},
		{"failback with both flows", []string{"A->B", "B->A"}, "B", "A", true},
		{"failback without A->B", []string{"B->A"}, "B", "A", false},
		{"failover", []string{"A->B"}, "A", "B", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := flowsConfig(t, tt.flows...)
			var out, errb bytes.Buffer
			code := run([]string{"offsets", "--config", cfg, "--group", "g", "--from", tt.from, "--to", tt.to, "--timeout", "1s"}, &out, &errb)
			if code != 1 {
				t.Errorf("exit %d, want 1 (no cluster answers); stderr %q", code, errb.String())
			}
			rev := "no reverse translation through " + tt.to + "->" + tt.from + ": cluster " + tt.from + " did not answer"
			if got := strings.Contains(errb.String(), rev); got != tt.reverse {
				t.Errorf("stderr mentions the reverse translation: %v, want %v; stderr %q", got, tt.reverse, errb.String())
			}
		})
	}
}

func TestPrintOffsets(t *testing.T) {
	cu, cd := int64(10), int64(9)
	fwd := &offsetplan.Report{Group: "g", From: "A", To: "B", Source: offsetplan.UseCheckpoints, CheckpointsTopic: "A.checkpoints.internal", Mode: "exact",
		Partitions: []offsetplan.Row{{Topic: "A.t", Partition: 0, Upstream: 10, Downstream: 9, CheckpointUpstream: &cu, CheckpointDownstream: &cd, Action: "commit"}},
		Notes:      []string{"hello"}, Applied: true}
	u, d := int64(200), int64(220)
	rev := &offsetplan.Report{Group: "g", From: "B", To: "A", Source: offsetplan.UseReverse, ReverseFlow: "A->B", Mode: "exact",
		Partitions: []offsetplan.Row{{Topic: "orders", FromTopic: "A.orders", Upstream: u, Downstream: d, FreshUpstream: &u, FreshDownstream: &d}}}
	tests := []struct {
		rep    *offsetplan.Report
		output string
		want   []string
	}{
		{fwd, "text", []string{"source: checkpoints in A.checkpoints.internal on B", "A.t", "10->9", "commit", "note: hello", "applied: committed to group g on B"}},
		{fwd, "json", []string{`"downstream_offset": 9`, `"source": "checkpoints"`, `"applied": true`}},
		{rev, "text", []string{"offsets on A translated from B (source: the group's offsets on B translated back through the offset syncs of A->B; translation mode exact)", "200->220"}},
		{rev, "json", []string{`"source": "reverse"`, `"reverse_flow": "A->B"`, `"from_topic": "A.orders"`, `"downstream_offset": 220`}},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printOffsets(&b, tt.rep, tt.output); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s %s output lacks %q:\n%s", tt.rep.Source, tt.output, w, b.String())
			}
		}
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/config"
)

// flowsConfig loads a two-cluster file with unreachable brokers and the
// given flows enabled.
func flowsConfig(t *testing.T, flows ...string) (string, *config.Config) {
	t.Helper()
	body := "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
	for _, f := range flows {
		body += f + ".enabled = true\n"
	}
	p := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg
}

func TestEnabledFlow(t *testing.T) {
	_, cfg := flowsConfig(t, "A->B")
	if f := enabledFlow(cfg, "A", "B"); f == nil || f.Name() != "A->B" {
		t.Errorf("enabledFlow(A, B) = %v, want A->B", f)
	}
	if f := enabledFlow(cfg, "B", "A"); f != nil {
		t.Errorf("enabledFlow(B, A) = %v, want none (not enabled)", f)
	}
}

func TestSplitTopics(t *testing.T) {
	_, cfg := flowsConfig(t, "A->B")
	pol := enabledFlow(cfg, "A", "B").Policy
	offs := func(topics ...string) kadm.OffsetResponses {
		o := make(kadm.OffsetResponses)
		for _, tp := range topics {
			o.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: tp, Partition: 0, At: 5}})
		}
		return o
	}
	tests := []struct {
		name   string
		offs   kadm.OffsetResponses
		fromTo bool
		other  []string
	}{
		{"copies from A only", offs("A.orders", "A.payments"), true, nil},
		{"local topics only", offs("orders"), false, []string{"orders"}},
		{"both", offs("A.orders", "orders", "C.orders"), true, []string{"C.orders", "orders"}},
		{"internal topics are not copies", offs("A.checkpoints.internal"), false, []string{"A.checkpoints.internal"}},
		{"nothing committed", offs(), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fromTo, other := splitTopics(pol, tt.offs, "A")
			if fromTo != tt.fromTo || !reflect.DeepEqual(other, tt.other) {
				t.Errorf("splitTopics = %v, %q; want %v, %q", fromTo, other, tt.fromTo, tt.other)
			}
		})
	}
}

func TestReverseRows(t *testing.T) {
	_, cfg := flowsConfig(t, "A->B")
	rf := enabledFlow(cfg, "A", "B")
	backs := []checkpoint.Back{
		{Topic: "orders", RemoteTopic: "A.orders", Partition: 0, Upstream: 220, Downstream: 200},
		{Topic: "orders", RemoteTopic: "A.orders", Partition: 1, Upstream: -1, Downstream: 3, Reason: "offset 3 is before the oldest offset sync kept for orders-1"},
	}
	tests := []struct {
		mode  checkpoint.Mode
		notes []string
	}{
		{checkpoint.Exact, []string{"mode exact", "past the newest sync", "orders-1", "before the oldest offset sync", "auto.offset.reset", "read on B as A.orders"}},
		{checkpoint.MM2, []string{"mode mm2", "the record after the sync before it"}},
	}
	for _, tt := range tests {
		rows, notes := reverseRows(backs, rf, tt.mode)
		if len(rows) != 1 {
			t.Fatalf("%v: rows %+v, want one (partition 1 has no translation)", tt.mode, rows)
		}
		r := rows[0]
		// The command runs --from B --to A: upstream is B's offset.
		if r.Topic != "orders" || r.FromTopic != "A.orders" || r.Upstream != 200 || r.Downstream != 220 ||
			*r.FreshUpstream != 200 || *r.FreshDownstream != 220 || r.CheckpointDownstream != nil {
			t.Errorf("%v: row %+v", tt.mode, r)
		}
		all := strings.Join(notes, "\n")
		for _, w := range tt.notes {
			if !strings.Contains(all, w) {
				t.Errorf("%v: notes lack %q:\n%s", tt.mode, w, all)
			}
		}
	}
}

func TestMergeReverse(t *testing.T) {
	rev := []offsetRow{{Topic: "orders", Partition: 0, Downstream: 7, FromTopic: "A.orders"}}
	fwd := []offsetRow{
		{Topic: "B.orders", Partition: 0, Downstream: 3},
		{Topic: "orders", Partition: 0, Downstream: 9},
	}
	got := mergeReverse(rev, fwd)
	want := []offsetRow{fwd[0], rev[0]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mergeReverse = %+v, want %+v", got, want)
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
			cfg, _ := flowsConfig(t, tt.flows...)
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

func TestPrintReverse(t *testing.T) {
	u, d := int64(200), int64(220)
	rep := &offsetsReport{Group: "g", From: "B", To: "A", Source: useReverse, ReverseFlow: "A->B", Mode: "exact",
		Partitions: []offsetRow{{Topic: "orders", FromTopic: "A.orders", Upstream: u, Downstream: d, FreshUpstream: &u, FreshDownstream: &d}}}
	tests := []struct {
		output string
		want   []string
	}{
		{"text", []string{"offsets on A translated from B (source: the group's offsets on B translated back through the offset syncs of A->B; translation mode exact)", "200->220"}},
		{"json", []string{`"source": "reverse"`, `"reverse_flow": "A->B"`, `"from_topic": "A.orders"`, `"downstream_offset": 220`}},
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

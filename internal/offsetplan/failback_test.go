package offsetplan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/checkpoint"
)

func TestEnabledFlow(t *testing.T) {
	cfg := flowsConfig(t, "A->B")
	if f := enabledFlow(cfg, "A", "B"); f == nil || f.Name() != "A->B" {
		t.Errorf("enabledFlow(A, B) = %v, want A->B", f)
	}
	if f := enabledFlow(cfg, "B", "A"); f != nil {
		t.Errorf("enabledFlow(B, A) = %v, want none (not enabled)", f)
	}
}

func TestSplitTopics(t *testing.T) {
	cfg := flowsConfig(t, "A->B")
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
	cfg := flowsConfig(t, "A->B")
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
	rev := []Row{{Topic: "orders", Partition: 0, Downstream: 7, FromTopic: "A.orders"}}
	fwd := []Row{
		{Topic: "B.orders", Partition: 0, Downstream: 3},
		{Topic: "orders", Partition: 0, Downstream: 9},
	}
	got := mergeReverse(rev, fwd)
	want := []Row{fwd[0], rev[0]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mergeReverse = %+v, want %+v", got, want)
	}
}

package topology

import (
	"reflect"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/policy"
)

func TestChain(t *testing.T) {
	def, _ := policy.New(policy.Config{InternalSeparatorEnabled: true})
	dash, _ := policy.New(policy.Config{Separator: "-", SeparatorSet: true, InternalSeparatorEnabled: true})
	tests := []struct {
		pol   policy.Policy
		topic string
		want  []string
	}{
		{def, "heartbeats", nil},
		{def, "A.heartbeats", []string{"A"}},
		{def, "B.A.heartbeats", []string{"B", "A"}},
		{def, "A.B.A.heartbeats", []string{"A", "B"}}, // a loop stops at the repeat
		{dash, "C-B-heartbeats", []string{"C", "B"}},
	}
	for _, tt := range tests {
		if got := chain(tt.pol, tt.topic); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("chain(%q) = %q, want %q", tt.topic, got, tt.want)
		}
	}
}

func TestBuildTopology(t *testing.T) {
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	scans := []Cluster{
		{Alias: "A", Topics: []HeartbeatsTopic{{Topic: "heartbeats"}}},
		{Alias: "B", Topics: []HeartbeatsTopic{{Topic: "heartbeats"}, {Topic: "A.heartbeats", Chain: []string{"A"}, Last: at(2 * time.Second)}}},
		{Alias: "C", Topics: []HeartbeatsTopic{
			{Topic: "B.heartbeats", Chain: []string{"B"}, Last: at(3 * time.Second)},
			{Topic: "B.A.heartbeats", Chain: []string{"B", "A"}, Last: at(time.Second)},
			{Topic: "X.heartbeats", Chain: []string{"X"}},
		}},
		{Alias: "D", Error: "unreachable: dial tcp"},
	}
	tests := []struct {
		name                string
		flows               []string
		edges               []string
		notSeen, notConfigd []string
	}{
		{"chain configured", []string{"A->B", "B->C"}, []string{"A->B", "B->C", "X->C"}, []string{}, []string{"X->C"}},
		{"extra flow", []string{"A->B", "B->C", "C->A"}, []string{"A->B", "B->C", "X->C"}, []string{"C->A"}, []string{"X->C"}},
		{"nothing configured", nil, []string{"A->B", "B->C", "X->C"}, []string{}, []string{"A->B", "B->C", "X->C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := Build(scans, tt.flows, now)
			var edges []string
			for _, e := range topo.Edges {
				edges = append(edges, e.Source+"->"+e.Target)
			}
			if !reflect.DeepEqual(edges, tt.edges) {
				t.Errorf("edges %v, want %v", edges, tt.edges)
			}
			if !reflect.DeepEqual(topo.ConfiguredNotSeen, tt.notSeen) || !reflect.DeepEqual(topo.SeenNotConfigured, tt.notConfigd) {
				t.Errorf("configured not seen %v, seen not configured %v; want %v and %v", topo.ConfiguredNotSeen, topo.SeenNotConfigured, tt.notSeen, tt.notConfigd)
			}
			if !reflect.DeepEqual(topo.Paths, []string{"A->B->C"}) {
				t.Errorf("paths %v, want [A->B->C]", topo.Paths)
			}
		})
	}
	topo := Build(scans, []string{"A->B", "B->C"}, now)
	// B->C is dated by the newest heartbeat of any topic that came in over it.
	for _, e := range topo.Edges {
		if e.Source == "B" && e.Target == "C" && (e.AgeSeconds == nil || *e.AgeSeconds != 1) {
			t.Errorf("B->C age %v, want 1s", e.AgeSeconds)
		}
		if e.Source == "A" && e.Target == "B" && !reflect.DeepEqual(e.Evidence, []string{"A.heartbeats on B", "B.A.heartbeats on C"}) {
			t.Errorf("A->B evidence %q", e.Evidence)
		}
	}
}

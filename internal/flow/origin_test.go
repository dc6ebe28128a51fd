package flow

import (
	"testing"

	"github.com/kmirror/kmirror/internal/config"
)

func TestOriginHeaderFlows(t *testing.T) {
	const identity = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
	base := "clusters = A, B, C\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nC.bootstrap.servers = c:1\n"
	tests := []struct {
		name string
		body string
		want map[string]bool
	}{
		{"default policy both ways", base + "A->B.enabled = true\nB->A.enabled = true\n", map[string]bool{"A->B": false, "B->A": false}},
		{"identity one way", base + identity + "A->B.enabled = true\n", map[string]bool{"A->B": false}},
		{"identity both ways", base + identity + "A->B.enabled = true\nB->A.enabled = true\n", map[string]bool{"A->B": true, "B->A": true}},
		{"identity ring of three", base + identity + "A->B.enabled = true\nB->C.enabled = true\nC->A.enabled = true\n", map[string]bool{"A->B": true, "B->C": true, "C->A": true}},
		{"identity chain, no cycle", base + identity + "A->B.enabled = true\nB->C.enabled = true\n", map[string]bool{"A->B": false, "B->C": false}},
		{"forced off", base + identity + "A->B.enabled = true\nB->A.enabled = true\nA->B." + config.ProvenanceKey + " = false\n", map[string]bool{"A->B": false, "B->A": true}},
		{"forced on", base + "A->B.enabled = true\n" + config.ProvenanceKey + " = true\n", map[string]bool{"A->B": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.properties", []byte(tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := OriginHeaderFlows(cfg, cfg.Flows)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

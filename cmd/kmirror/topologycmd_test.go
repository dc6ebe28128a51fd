package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/topology"
)

func TestPrintTopology(t *testing.T) {
	topo := topology.Report{
		Clusters:          []topology.Cluster{{Alias: "C"}, {Alias: "D", Error: "unreachable: dial tcp"}},
		Edges:             []topology.Edge{{Source: "A", Target: "B", Configured: true, Evidence: []string{"A.heartbeats on B"}}},
		Paths:             []string{"A->B->C"},
		Flows:             []topology.Flow{{Name: "A->B", Seen: true}},
		SeenNotConfigured: []string{"X->C"},
	}
	var out bytes.Buffer
	if err := printTopology(&out, topo, "text"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"A->B->C", "Seen but not configured:\n  X->C", "A->B: seen", "Cluster D: unreachable"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("text output lacks %q:\n%s", w, out.String())
		}
	}
}

func TestTopologyArgs(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topology"}, 2, "missing --config"},
		{[]string{"topology", "--config", "x", "--output", "xml"}, 2, `--output "xml"`},
		{[]string{"topology", "--config", "/nonexistent.properties"}, 1, "nonexistent.properties"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}

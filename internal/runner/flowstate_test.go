package runner

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/internal/metrics"
)

// TestFlowStateMetric: kmirror_flow_state has a 1 for each flow's state as
// Status reports it, and 0 for the others.
func TestFlowStateMetric(t *testing.T) {
	m := metrics.New()
	r := New("x.properties", nil, nil, m, quiet)
	r.flows["A->B"] = &managed{name: "A->B", kind: Heartbeats, state: "failed"}
	r.flows["B->A"] = &managed{name: "B->A", kind: Heartbeats, state: "running"}
	want := `
# HELP kmirror_flow_state 1 for the flow's current state (starting, running, paused, stopping, stopped, failed), 0 for the others.
# TYPE kmirror_flow_state gauge
kmirror_flow_state{kind="heartbeats",source="A",state="failed",target="B"} 1
kmirror_flow_state{kind="heartbeats",source="A",state="paused",target="B"} 0
kmirror_flow_state{kind="heartbeats",source="A",state="running",target="B"} 0
kmirror_flow_state{kind="heartbeats",source="A",state="starting",target="B"} 0
kmirror_flow_state{kind="heartbeats",source="A",state="stopping",target="B"} 0
kmirror_flow_state{kind="heartbeats",source="A",state="stopped",target="B"} 0
kmirror_flow_state{kind="heartbeats",source="B",state="failed",target="A"} 0
kmirror_flow_state{kind="heartbeats",source="B",state="paused",target="A"} 0
kmirror_flow_state{kind="heartbeats",source="B",state="running",target="A"} 1
kmirror_flow_state{kind="heartbeats",source="B",state="starting",target="A"} 0
kmirror_flow_state{kind="heartbeats",source="B",state="stopping",target="A"} 0
kmirror_flow_state{kind="heartbeats",source="B",state="stopped",target="A"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "kmirror_flow_state"); err != nil {
		t.Error(err)
	}
}

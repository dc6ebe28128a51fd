package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// reporters is a fixed set of partitions' health.
type reporters []struct {
	s      *HealthSeries
	lag    int64
	secs   float64
	state  int
	report bool
}

func (rs reporters) ReportHealth(report func(*HealthSeries, int64, float64, int)) {
	for _, r := range rs {
		if r.report {
			report(r.s, r.lag, r.secs, r.state)
		}
	}
}

func TestPartitionHealthExport(t *testing.T) {
	m := New()
	states := []string{"running", "stalled"}
	ph := m.Partitions
	rs := reporters{
		{ph.Series("A", "B", "A.t", "0", states), 5, 1.5, 1, true},
		{ph.Series("A", "B", "A.t", "1", states), 0, 0, 0, false}, // not checked yet
	}
	ph.Add(&rs)
	want := `
# HELP kmirror_partition_lag_records Source records not yet copied: the source's last stable offset minus the next offset to copy, at the last health check.
# TYPE kmirror_partition_lag_records gauge
kmirror_partition_lag_records{partition="0",source="A",target="B",topic="A.t"} 5
# HELP kmirror_partition_lag_seconds At least how long the oldest source record not yet copied has been in the source (0 when nothing is behind).
# TYPE kmirror_partition_lag_seconds gauge
kmirror_partition_lag_seconds{partition="0",source="A",target="B",topic="A.t"} 1.5
# HELP kmirror_partition_state 1 for the partition's current state (running, lagging, stalled, paused, restarting, stopped, waiting, fencing), 0 for the others.
# TYPE kmirror_partition_state gauge
kmirror_partition_state{partition="0",source="A",state="running",target="B",topic="A.t"} 0
kmirror_partition_state{partition="0",source="A",state="stalled",target="B",topic="A.t"} 1
`
	names := []string{"kmirror_partition_lag_records", "kmirror_partition_lag_seconds", "kmirror_partition_state"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	ph.Remove(&rs)
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(""), names...); err != nil {
		t.Errorf("after Remove: %v", err)
	}
}

package replicate

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestDeletedPartitionsLeaveNoSeries: partitions the Replicator lets go
// take their metric series with them; the others keep theirs.
func TestDeletedPartitionsLeaveNoSeries(t *testing.T) {
	m := metrics.New()
	r := New(Config{SourceAlias: "A", TargetAlias: "B", Metrics: m})
	var tps []progress.TP
	for i := range 3 {
		tp := progress.TP{Topic: "t", Partition: int32(i)}
		tps = append(tps, tp)
		p := r.newPartition(datapath.Partition{TP: tp, Remote: "A.t"})
		p.recordCount.Inc()
		p.recordAge.Set(1)
		p.latency.Set(1)
		r.parts[tp] = p
	}
	m.PartitionErrors.WithLabelValues("A", "B", "t", "0", "false").Inc()
	m.RecordsLooped.WithLabelValues("A", "B", "t").Inc()
	revoker{r}.Delete(tps[:2])
	if n := testutil.CollectAndCount(m.RecordsLooped); n != 1 {
		t.Errorf("%d looped series while partition 2 of t stays, want 1", n)
	}
	if n := testutil.CollectAndCount(m.RecordCount); n != 1 {
		t.Errorf("%d record_count series, want 1", n)
	}
	if n := testutil.CollectAndCount(m.ByteCount); n != 1 {
		t.Errorf("%d byte_count series, want 1", n)
	}
	if a, l := m.RecordAgeMs.Len(), m.ReplicationLatencyMs.Len(); a != 1 || l != 1 {
		t.Errorf("%d record age and %d latency windows, want 1 and 1", a, l)
	}
	if n := testutil.CollectAndCount(m.PartitionErrors); n != 0 {
		t.Errorf("%d partition error series, want 0", n)
	}
	if len(r.parts) != 1 {
		t.Errorf("%d partitions kept, want 1", len(r.parts))
	}
	revoker{r}.Delete(tps[2:])
	if n, c := testutil.CollectAndCount(m.RecordsLooped), testutil.CollectAndCount(m.RecordCount); n != 0 || c != 0 {
		t.Errorf("%d looped and %d record_count series with no partition of t left, want 0", n, c)
	}
}

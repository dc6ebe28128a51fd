package passthrough

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestRevokedPartitionsLeaveNoSeries: a partition that leaves the
// Pipeline (revoked, or its topic gone) takes its metric series and its
// legacy-format note with it; one released to start again (Rewind) keeps
// them.
func TestRevokedPartitionsLeaveNoSeries(t *testing.T) {
	for _, gone := range []bool{true, false} {
		m := metrics.New()
		pl := New(Config{SourceAlias: "A", TargetAlias: "B", Metrics: m, Progress: &progress.Store{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var tps []progress.TP
		var ps []datapath.Partition
		for i := range 2 {
			tp := progress.TP{Topic: "t", Partition: int32(i)}
			tps = append(tps, tp)
			ps = append(ps, datapath.Partition{TP: tp, Remote: "A.t"})
		}
		pl.Assign(ps)
		pl.mu.Lock()
		for _, tp := range tps {
			p := pl.parts[tp]
			p.recordCount.Inc()
			p.recordAge.Set(5)
			pl.badBatchLocked(p, 3, errCorrupt)
			pl.noteLegacy(p, 0)
		}
		pl.mu.Unlock()
		m.PartitionErrors.WithLabelValues("A", "B", "t", "0", "false").Inc()
		m.RecordsLost.WithLabelValues("A", "B", "t", "1").Add(2)
		m.PartitionRestarts.WithLabelValues("A", "B", "A.t", "0", "stalled").Inc()
		m.RecordsLooped.WithLabelValues("A", "B", "t").Inc()
		m.TopicsRecreated.WithLabelValues("A", "B", "t").Inc()
		v := revoker{pl: pl, gone: gone}
		v.MarkRevoked(tps)
		v.Delete(tps)
		want := 0
		if !gone {
			want = 2
		}
		for name, n := range map[string]int{
			"record_count":   testutil.CollectAndCount(m.RecordCount),
			"byte_count":     testutil.CollectAndCount(m.ByteCount),
			"record_age_ms":  m.RecordAgeMs.Len(),
			"latency_ms":     m.ReplicationLatencyMs.Len(),
			"batch errors":   testutil.CollectAndCount(m.SourceBatchErrors),
			"partition errs": 2 * testutil.CollectAndCount(m.PartitionErrors),
			"records lost":   2 * testutil.CollectAndCount(m.RecordsLost),
			"restarts":       2 * testutil.CollectAndCount(m.PartitionRestarts),
			"looped":         2 * testutil.CollectAndCount(m.RecordsLooped),
			"recreated":      2 * testutil.CollectAndCount(m.TopicsRecreated),
		} {
			if n != want {
				t.Errorf("gone %v: %s has %d series, want %d", gone, name, n, want)
			}
		}
		seen := 0
		pl.legacySeen.Range(func(any, any) bool { seen++; return true })
		if seen != want {
			t.Errorf("gone %v: legacy-seen set holds %d, want %d", gone, seen, want)
		}
	}
}

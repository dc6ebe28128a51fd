package dashboard

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
)

// BenchmarkSample: one history sample of a flow with 5,000 partitions, each
// with the metrics of its data path (counts, latency, age), after a first
// sample: idle, every partition caught up and copying nothing; copying,
// every partition copying records between samples.
func BenchmarkSample(b *testing.B) {
	for _, bc := range []struct {
		name    string
		copying bool
	}{{"idle", false}, {"copying", true}} {
		b.Run(bc.name, func(b *testing.B) {
			m := metrics.New()
			var parts []datapath.PartitionStatus
			var counts []prometheus.Counter
			for i := range 5000 {
				topic, p := "t"+strconv.Itoa(i/5), strconv.Itoa(i%5)
				l := []string{"A", "B", "A." + topic, p}
				c := m.RecordCount.WithLabelValues(l...)
				c.Add(10)
				counts = append(counts, c)
				m.ByteCount.WithLabelValues(l...).Add(1000)
				m.ReplicationLatencyMs.WithLabelValues(l...).Set(5)
				m.RecordAgeMs.WithLabelValues(l...).Set(5)
				parts = append(parts, datapath.PartitionStatus{Topic: topic, Remote: "A." + topic, Partition: int32(i % 5), Done: 9, State: datapath.Running})
			}
			d := New(Config{Source: flows{{Name: "A->B", Kind: "replication", State: "running", Partitions: parts}}, Metrics: m})
			now := time.Unix(1000, 0)
			d.Sample(now)
			b.ReportAllocs()
			for b.Loop() {
				if bc.copying {
					for i := range parts {
						parts[i].Done += 10
						counts[i].Add(10)
					}
				}
				now = now.Add(5 * time.Second)
				d.Sample(now)
			}
		})
	}
}

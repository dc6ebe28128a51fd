package dashboard

import (
	"encoding/json"
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

// BenchmarkPoll: what one poll of the page costs the server over a flow
// of 5,000 partitions (a tenth of them lagging, with history): the whole
// snapshot the page polled before (/ui/api/snapshot), and the overview
// with one page of 50 partitions it polls now (/ui/api/overview). It
// reports the JSON bytes of one response.
func BenchmarkPoll(b *testing.B) {
	var parts []datapath.PartitionStatus
	for i := range 5000 {
		topic := "t" + strconv.Itoa(i/5)
		p := datapath.PartitionStatus{Topic: topic, Remote: "A." + topic, Partition: int32(i % 5), Done: 9, SourceEnd: 9, State: datapath.Running}
		if i%10 == 0 {
			p.State, p.Lag, p.SourceEnd = datapath.Lagging, int64(100+i), int64(109+i)
		}
		parts = append(parts, p)
	}
	m := metrics.New()
	d := New(Config{Source: flows{{Name: "A->B", Kind: "replication", State: "running", Partitions: parts}}, Metrics: m})
	now := time.Unix(1000, 0)
	for range 20 {
		now = now.Add(5 * time.Second)
		d.Sample(now)
	}
	q, _ := ParseQuery(nil)
	for _, bc := range []struct {
		name string
		poll func() any
	}{
		{"snapshot-all-partitions", func() any { return d.Snapshot(now) }},
		{"overview-page-of-50", func() any { return d.Overview(now, q) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int
			b.ReportAllocs()
			for b.Loop() {
				var w countWriter
				if err := json.NewEncoder(&w).Encode(bc.poll()); err != nil {
					b.Fatal(err)
				}
				n = int(w)
			}
			b.ReportMetric(float64(n), "json-bytes")
		})
	}
}

type countWriter int

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}

package metrics

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	w := &Window{now: func() time.Time { return now }, curStarted: now}
	for _, v := range []float64{5, 1, 9} {
		w.Set(v)
	}
	if last, lo, hi, avg, ok := w.stats(); !ok || last != 9 || lo != 1 || hi != 9 || avg != 5 {
		t.Errorf("stats = %v %v %v %v %v", last, lo, hi, avg, ok)
	}
	now = now.Add(20 * time.Second) // one roll: the old values stay in view
	w.Set(3)
	if _, lo, hi, avg, _ := w.stats(); lo != 1 || hi != 9 || avg != 4.5 {
		t.Errorf("after a half window: min %v max %v avg %v", lo, hi, avg)
	}
	now = now.Add(40 * time.Second) // nothing measured for a whole window
	if last, _, _, _, ok := w.stats(); ok || last != 3 {
		t.Errorf("after a quiet window: last %v ok %v; want 3 and no min/max/avg", last, ok)
	}
}

func TestWindowVecExport(t *testing.T) {
	v := NewWindowVec("kafka_connect_mirror_source_connector_replication_latency_ms", "help", []string{"topic"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(v)
	v.With(prometheus.Labels{"topic": "A.t"}).Set(7)
	want := `
# HELP kafka_connect_mirror_source_connector_replication_latency_ms_max help (max over the last 30 s)
# TYPE kafka_connect_mirror_source_connector_replication_latency_ms_max gauge
kafka_connect_mirror_source_connector_replication_latency_ms_max{topic="A.t"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafka_connect_mirror_source_connector_replication_latency_ms_max"); err != nil {
		t.Error(err)
	}
}

func TestRateVec(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c", Help: "h"}, []string{"topic"})
	r := NewRateVec("r", "h", c, []string{"topic"})
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(r)
	c.WithLabelValues("A.t").Add(100)
	steps := []struct {
		after time.Duration
		add   float64
		want  string // exported series; empty: none yet
	}{
		{0, 0, ""},                    // first sample: no base yet
		{10 * time.Second, 50, "5"},   // 50 in 10 s
		{10 * time.Second, 150, "10"}, // 200 in 20 s
		{20 * time.Second, 0, "5"},    // base: the newest sample 30 s or more old (150 at 10 s)
		{30 * time.Second, 300, "10"}, // base moves to the sample at 40 s: 300 in 30 s
	}
	for i, s := range steps {
		now = now.Add(s.after)
		c.WithLabelValues("A.t").Add(s.add)
		want := ""
		if s.want != "" {
			want = "# HELP r h\n# TYPE r gauge\nr{topic=\"A.t\"} " + s.want + "\n"
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "r"); err != nil {
			t.Errorf("step %d: %v", i, err)
		}
	}
}

// TestWindowVecDelete: a deleted Window is no longer collected; the
// others are.
func TestWindowVecDelete(t *testing.T) {
	v := NewWindowVec("x", "x", []string{"topic", "partition"})
	for _, p := range []string{"0", "1"} {
		v.WithLabelValues("t", p).Set(1)
	}
	if !v.Delete(prometheus.Labels{"topic": "t", "partition": "0"}) || v.Delete(prometheus.Labels{"topic": "t", "partition": "0"}) {
		t.Fatal("Delete reported the wrong presence")
	}
	if n := testutil.CollectAndCount(v); n != 4 || v.Len() != 1 { // one Window: last, min, max, avg
		t.Fatalf("%d series from %d Windows, want 4 from 1", n, v.Len())
	}
}

// TestForgetCheckpoint drops a group partition's latency series and last
// checkpoint, and nothing else.
func TestForgetCheckpoint(t *testing.T) {
	m := New()
	for _, p := range []int32{0, 1} {
		m.CheckpointLatencyMs.WithLabelValues("A", "B", "g", "A.t", strconv.Itoa(int(p))).Set(3)
		m.LastCheckpoints.Set(Checkpoint{Source: "A", Target: "B", Group: "g", Topic: "A.t", Partition: p})
	}
	m.ForgetCheckpoint("A", "B", "g", "A.t", 0)
	if n, all := m.CheckpointLatencyMs.Len(), m.LastCheckpoints.All(); n != 1 || len(all) != 1 || all[0].Partition != 1 {
		t.Fatalf("%d windows, checkpoints %+v; want partition 1 only", n, all)
	}
}

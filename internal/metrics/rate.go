package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RateVec exports the per-second rate of each series of a CounterVec over
// about the last windowSpan: MM2's record-rate and byte-rate next to
// record-count and byte-count. It samples the counters when it is
// collected, so it costs the data paths nothing; a series shows a rate
// from its second collection on.
type RateVec struct {
	desc   *prometheus.Desc
	src    *prometheus.CounterVec
	labels []string
	now    func() time.Time

	mu   sync.Mutex
	hist map[string][]sample
}

type sample struct {
	at time.Time
	v  float64
}

// NewRateVec describes the rate of src, whose labels are labels.
func NewRateVec(name, help string, src *prometheus.CounterVec, labels []string) *RateVec {
	return &RateVec{
		desc:   prometheus.NewDesc(name, help, labels, nil),
		src:    src,
		labels: labels,
		now:    time.Now,
		hist:   make(map[string][]sample),
	}
}

// Describe implements prometheus.Collector.
func (r *RateVec) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *RateVec) Collect(ch chan<- prometheus.Metric) {
	ms := make(chan prometheus.Metric, 64)
	go func() { r.src.Collect(ms); close(ms) }()
	now := r.now()
	seen := make(map[string]bool)
	r.mu.Lock()
	defer r.mu.Unlock()
	for m := range ms {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil {
			continue
		}
		values := make([]string, len(r.labels))
		for _, lp := range d.Label {
			for i, l := range r.labels {
				if lp.GetName() == l {
					values[i] = lp.GetValue()
				}
			}
		}
		key := strings.Join(values, "\xff")
		seen[key] = true
		h := append(r.hist[key], sample{now, d.Counter.GetValue()})
		// Keep the window and the newest sample before it, the base.
		cut := 0
		for cut+1 < len(h) && now.Sub(h[cut+1].at) >= windowSpan {
			cut++
		}
		h = append(h[:0:0], h[cut:]...)
		r.hist[key] = h
		if len(h) < 2 {
			continue
		}
		base, last := h[0], h[len(h)-1]
		secs := last.at.Sub(base.at).Seconds()
		if secs <= 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, (last.v-base.v)/secs, values...)
	}
	for k := range r.hist {
		if !seen[k] {
			delete(r.hist, k)
		}
	}
}

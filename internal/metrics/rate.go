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
	hist map[string]*Rate
}

type sample struct {
	at time.Time
	v  float64
}

// Rate is the per-second growth of a counter over about the last
// windowSpan, from the values it is given.
type Rate struct {
	h []sample // the window and the newest sample before it, the base
}

// Add records the counter's value v at now and returns its rate; ok is
// false until two samples some time apart were given.
func (r *Rate) Add(now time.Time, v float64) (rate float64, ok bool) {
	r.h = append(r.h, sample{now, v})
	cut := 0
	for cut+1 < len(r.h) && now.Sub(r.h[cut+1].at) >= windowSpan {
		cut++
	}
	if cut > 0 {
		r.h = r.h[:copy(r.h, r.h[cut:])]
	}
	if len(r.h) < 2 {
		return 0, false
	}
	base, last := r.h[0], r.h[len(r.h)-1]
	secs := last.at.Sub(base.at).Seconds()
	if secs <= 0 {
		return 0, false
	}
	return (last.v - base.v) / secs, true
}

// Idled forgets the samples of a counter that stood at v for a window or
// more before now: the next Add measures its growth over the window.
func (r *Rate) Idled(now time.Time, v float64) {
	r.h = append(r.h[:0], sample{now.Add(-windowSpan), v})
}

// NewRateVec describes the rate of src, whose labels are labels.
func NewRateVec(name, help string, src *prometheus.CounterVec, labels []string) *RateVec {
	return &RateVec{
		desc:   prometheus.NewDesc(name, help, labels, nil),
		src:    src,
		labels: labels,
		now:    time.Now,
		hist:   make(map[string]*Rate),
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
		rt := r.hist[key]
		if rt == nil {
			rt = &Rate{}
			r.hist[key] = rt
		}
		if rate, ok := rt.Add(now, d.Counter.GetValue()); ok {
			ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, rate, values...)
		}
	}
	for k := range r.hist {
		if !seen[k] {
			delete(r.hist, k)
		}
	}
}

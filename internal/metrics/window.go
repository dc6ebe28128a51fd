package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// windowSpan is how far back min, max and avg look, as MM2's metrics do
// with Kafka's default sample window (two samples of 30 s).
const windowSpan = 30 * time.Second

// Window keeps the last value of a measurement and its min, max and mean
// over about the last windowSpan: what MM2 reports as NAME, NAME-min,
// NAME-max and NAME-avg.
type Window struct {
	mu         sync.Mutex
	last       float64
	cur, prev  bucket
	curStarted time.Time
	now        func() time.Time
}

type bucket struct {
	n             int64
	sum, min, max float64
}

func (b *bucket) add(v float64) {
	if b.n == 0 || v < b.min {
		b.min = v
	}
	if b.n == 0 || v > b.max {
		b.max = v
	}
	b.n++
	b.sum += v
}

// Set records one measurement; on a nil Window it does nothing.
func (w *Window) Set(v float64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.roll()
	w.last = v
	w.cur.add(v)
	w.mu.Unlock()
}

// Last returns the last measurement (0 before any); on a nil Window, 0.
func (w *Window) Last() float64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// roll starts a new bucket every half window; w.mu is held.
func (w *Window) roll() {
	now := w.now()
	switch {
	case now.Sub(w.curStarted) >= windowSpan:
		w.prev, w.cur, w.curStarted = bucket{}, bucket{}, now
	case now.Sub(w.curStarted) >= windowSpan/2:
		w.prev, w.cur, w.curStarted = w.cur, bucket{}, now
	}
}

// stats returns last, min, max and mean over the window; ok is false when
// nothing was measured in it.
func (w *Window) stats() (last, lo, hi, avg float64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll()
	b := w.prev
	if w.cur.n > 0 {
		if b.n == 0 {
			b = w.cur
		} else {
			b.n, b.sum = b.n+w.cur.n, b.sum+w.cur.sum
			b.min, b.max = min(b.min, w.cur.min), max(b.max, w.cur.max)
		}
	}
	if b.n == 0 {
		return w.last, 0, 0, 0, false
	}
	return w.last, b.min, b.max, b.sum / float64(b.n), true
}

// WindowVec is a family of Windows by label values, exported as four
// gauges: NAME, NAME_min, NAME_max and NAME_avg.
type WindowVec struct {
	descs  [4]*prometheus.Desc
	labels []string

	mu sync.Mutex
	m  map[string]*windowEntry
}

type windowEntry struct {
	values []string
	w      *Window
}

// NewWindowVec describes a family; name has no suffix.
func NewWindowVec(name, help string, labels []string) *WindowVec {
	v := &WindowVec{labels: labels, m: make(map[string]*windowEntry)}
	for i, sfx := range []string{"", "_min", "_max", "_avg"} {
		h := help
		if sfx != "" {
			h += " (" + strings.TrimPrefix(sfx, "_") + " over the last 30 s)"
		}
		v.descs[i] = prometheus.NewDesc(name+sfx, h, labels, nil)
	}
	return v
}

// With returns the Window of the given labels, creating it.
func (v *WindowVec) With(l prometheus.Labels) *Window {
	values := make([]string, len(v.labels))
	for i, k := range v.labels {
		values[i] = l[k]
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[key]
	if !ok {
		e = &windowEntry{values: values, w: &Window{now: time.Now, curStarted: time.Now()}}
		v.m[key] = e
	}
	return e.w
}

// WithLabelValues returns the Window of the label values, in the order the
// family was described with, creating it.
func (v *WindowVec) WithLabelValues(values ...string) *Window {
	l := make(prometheus.Labels, len(v.labels))
	for i, k := range v.labels {
		if i < len(values) {
			l[k] = values[i]
		}
	}
	return v.With(l)
}

// EachLast calls f with the label values and last measurement of every
// Window of the family; f must not keep values or call into v.
func (v *WindowVec) EachLast(f func(values []string, last float64)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.m {
		f(e.values, e.w.Last())
	}
}

// Describe implements prometheus.Collector.
func (v *WindowVec) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range v.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (v *WindowVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	entries := make([]*windowEntry, 0, len(v.m))
	for _, e := range v.m {
		entries = append(entries, e)
	}
	v.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool {
		return strings.Join(entries[i].values, ",") < strings.Join(entries[j].values, ",")
	})
	for _, e := range entries {
		last, lo, hi, avg, ok := e.w.stats()
		ch <- prometheus.MustNewConstMetric(v.descs[0], prometheus.GaugeValue, last, e.values...)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(v.descs[1], prometheus.GaugeValue, lo, e.values...)
		ch <- prometheus.MustNewConstMetric(v.descs[2], prometheus.GaugeValue, hi, e.values...)
		ch <- prometheus.MustNewConstMetric(v.descs[3], prometheus.GaugeValue, avg, e.values...)
	}
}

// Delete removes the Window of the given labels; it reports whether there
// was one. A handle to it still works but is no longer exported.
func (v *WindowVec) Delete(l prometheus.Labels) bool {
	values := make([]string, len(v.labels))
	for i, k := range v.labels {
		values[i] = l[k]
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.m[key]
	delete(v.m, key)
	return ok
}

// Len returns how many Windows the family holds.
func (v *WindowVec) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.m)
}

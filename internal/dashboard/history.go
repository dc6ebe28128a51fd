package dashboard

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// History keeps the last Points samples of named series, all taken at the
// same times: a ring of times and, per series, a ring of values (NaN where
// a series had no value). At most MaxSeries series are kept; a series with
// no value left in the ring is dropped. Memory is bounded by
// Points × (8 + 4 × MaxSeries) bytes.
type History struct {
	mu        sync.Mutex
	points    int
	maxSeries int
	times     []int64 // unix milliseconds; ring of len points
	next, n   int     // next slot to write; samples held
	added     int     // samples ever added
	series    map[string]*ring
}

// ring is one series' values and the sample (History.added) that last
// gave it one.
type ring struct {
	vals []float32
	last int
}

// NewHistory keeps points samples of at most maxSeries series.
func NewHistory(points, maxSeries int) *History {
	return &History{points: points, maxSeries: maxSeries, times: make([]int64, points), series: make(map[string]*ring)}
}

// Add stores one sample taken at at: vals by series name.
func (h *History) Add(at time.Time, vals map[string]float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	slot := h.next
	h.times[slot] = at.UnixMilli()
	h.next = (h.next + 1) % h.points
	h.n = min(h.n+1, h.points)
	h.added++
	matched := 0
	for name, r := range h.series {
		v, ok := vals[name]
		if !ok {
			r.vals[slot] = float32(math.NaN())
			if h.added-r.last >= h.points { // no value left in the ring
				delete(h.series, name)
			}
			continue
		}
		r.vals[slot], r.last = float32(v), h.added
		matched++
	}
	if matched == len(vals) {
		return // every value has its series
	}
	for name, v := range vals {
		if _, ok := h.series[name]; ok || len(h.series) >= h.maxSeries {
			continue
		}
		r := &ring{vals: make([]float32, h.points), last: h.added}
		for i := range r.vals {
			r.vals[i] = float32(math.NaN())
		}
		r.vals[slot] = float32(v)
		h.series[name] = r
	}
}

// Drop forgets the named series.
func (h *History) Drop(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		delete(h.series, name)
	}
}

// Len returns the samples and series held.
func (h *History) Len() (samples, series int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, len(h.series)
}

// Span is a stretch of history, oldest first: times in unix
// milliseconds and the series whose names have the asked prefix.
type Span struct {
	Times  []int64           `json:"times"`
	Series map[string]Points `json:"series"`
}

// Points are a series' values; NaN (no value) is written as null.
type Points []float32

// MarshalJSON writes the values with null for NaN.
func (p Points) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		if math.IsNaN(float64(v)) {
			b.WriteString("null")
			continue
		}
		b.WriteString(strconv.FormatFloat(float64(v), 'g', 6, 32))
	}
	b.WriteByte(']')
	return []byte(b.String()), nil
}

// Last returns the last n samples (all when n <= 0) of the series whose
// names start with prefix.
func (h *History) Last(n int, prefix string) Span {
	h.mu.Lock()
	defer h.mu.Unlock()
	sp, first := h.span(n)
	for name, r := range h.series {
		if strings.HasPrefix(name, prefix) {
			sp.Series[name] = h.valuesOf(r, first, len(sp.Times))
		}
	}
	return sp
}

// Get returns the last n samples (all when n <= 0) of the named series
// that are held: its cost is that of the names, not of every series.
func (h *History) Get(n int, names []string) Span {
	h.mu.Lock()
	defer h.mu.Unlock()
	sp, first := h.span(n)
	for _, name := range names {
		if r, ok := h.series[name]; ok {
			sp.Series[name] = h.valuesOf(r, first, len(sp.Times))
		}
	}
	return sp
}

// span returns the times of the last n samples and the ring slot of the
// first; h.mu is held.
func (h *History) span(n int) (Span, int) {
	if n <= 0 || n > h.n {
		n = h.n
	}
	first := (h.next - n + h.points) % h.points
	sp := Span{Times: make([]int64, n), Series: make(map[string]Points)}
	for i := range n {
		sp.Times[i] = h.times[(first+i)%h.points]
	}
	return sp, first
}

// valuesOf returns n values of r from slot first on; h.mu is held.
func (h *History) valuesOf(r *ring, first, n int) Points {
	p := make(Points, n)
	for i := range n {
		p[i] = r.vals[(first+i)%h.points]
	}
	return p
}

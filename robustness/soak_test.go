package robustness

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSoakTrends: slopes are fitted per process over its life after the
// warm-up; a flat series has slope 0, a leak its rate; the plot is a PNG.
func TestSoakTrends(t *testing.T) {
	if s := slope([]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}); s != 2 {
		t.Errorf("slope %v, want 2", s)
	}
	var s soaker
	for i := range 60 { // 10 minutes
		at := time.Duration(i) * 10 * time.Second
		// worker 1 leaks 6 MiB of RSS and 3 of heap an hour; worker 2 is flat but restarted at 5 min.
		s.samples = append(s.samples, sample{at: at, worker: 1, pid: 100, rss: 50 + 6*at.Hours(), heap: 30 + 3*at.Hours(), gor: 40, fds: 20, series: 300})
		pid := 200
		if at >= 5*time.Minute {
			pid = 201
		}
		s.samples = append(s.samples, sample{at: at, worker: 2, pid: pid, rss: 60, gor: 40, fds: 20, series: 300})
	}
	trs := s.trends()
	if len(trs) != 2 {
		t.Fatalf("%d trends, want 2", len(trs))
	}
	if got := trs[0].perHour[0]; math.Abs(got-6) > 1e-6 {
		t.Errorf("worker 1 RSS slope %v/h, want 6", got)
	}
	if got := trs[0].perHour[1]; math.Abs(got-3) > 1e-6 {
		t.Errorf("worker 1 heap slope %v/h, want 3", got)
	}
	if trs[0].from != 2*time.Minute {
		t.Errorf("worker 1 fitted from %v, want 2m (warm-up left out)", trs[0].from)
	}
	if trs[1].pid != 200 && trs[1].pid != 201 || trs[1].perHour[0] != 0 {
		t.Errorf("worker 2: %+v", trs[1])
	}
	// Growth that stops when the partitions stop changing is left out
	// from settled on: worker 1's series step up at 4 minutes.
	for i := range s.samples {
		if s.samples[i].worker == 1 && s.samples[i].at >= 4*time.Minute {
			s.samples[i].series = 400
		}
	}
	if got := s.trends()[0].perHour[4]; got <= 0 {
		t.Errorf("series slope %v/h over the step, want it growing", got)
	}
	s.settled = 5 * time.Minute
	if tr := s.trends()[0]; tr.perHour[4] != 0 || tr.from != 5*time.Minute {
		t.Errorf("fitted from %v with series slope %v/h; want from settled (5m), flat", tr.from, tr.perHour[4])
	}
	s.settled = 0
	if r := s.report(); !strings.Contains(r, "worker 1") || !strings.Contains(r, "+6.00/h") {
		t.Errorf("report:\n%s", r)
	}
	p := filepath.Join(t.TempDir(), "soak.png")
	if err := s.plot(p, "TEST"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("plot is not a PNG: %v", err)
	}
}

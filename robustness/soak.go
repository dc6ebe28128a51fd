package robustness

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/bench/harness"
)

// sample is one reading of a worker's own metrics.
type sample struct {
	at     time.Duration // since the traffic started
	worker int
	pid    int
	rss    float64 // MiB
	gor    float64 // goroutines
	fds    float64 // open files
	series float64 // metric series served at /metrics
	heap   float64 // MiB of Go heap in use
}

// values are a sample's measures, in the order of measures.
func (sm sample) values() []float64 { return []float64{sm.rss, sm.heap, sm.gor, sm.fds, sm.series} }

// soaker samples the live workers every 10 s (Options.Sample).
type soaker struct {
	// settled is when the partitions stop changing (the run grows a
	// topic at half its duration): trends are fitted from then on, so
	// that memory and series that grow with the partitions added are not
	// read as a leak. Zero fits from each process's warm-up on.
	settled time.Duration

	mu      sync.Mutex
	samples []sample
}

func (s *soaker) sample(r *Run, el time.Duration) {
	for _, w := range r.workers {
		pid := w.pid()
		if pid == 0 {
			continue
		}
		body, err := httpGet("http://" + w.metrics + "/metrics")
		if err != nil {
			continue // stopped or restarting
		}
		one := func(name string) float64 { return metricSeries(body, name)[""] }
		n := 0
		for _, l := range strings.Split(body, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				n++
			}
		}
		s.mu.Lock()
		s.samples = append(s.samples, sample{at: el, worker: w.id, pid: pid,
			rss: one("process_resident_memory_bytes") / (1 << 20), gor: one("go_goroutines"), fds: one("process_open_fds"), series: float64(n),
			heap: one("go_memstats_heap_inuse_bytes") / (1 << 20)})
		s.mu.Unlock()
	}
}

// slope fits y = a + b·x by least squares and returns b.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 {
		return 0
	}
	var sx, sy float64
	for i := range x {
		sx, sy = sx+x[i], sy+y[i]
	}
	mx, my := sx/n, sy/n
	var cov, vx float64
	for i := range x {
		cov += (x[i] - mx) * (y[i] - my)
		vx += (x[i] - mx) * (x[i] - mx)
	}
	if vx == 0 {
		return 0
	}
	return cov / vx
}

// trend is the slope of one measure over one process's life.
type trend struct {
	worker, pid, samples int
	from, to             time.Duration
	perHour              [5]float64 // in the order of measures
	mean                 [5]float64
}

// trends fits each worker's longest-lived process, its first two minutes
// (warm-up: buffers, connections, series of new partitions) and anything
// before settled left out.
func (s *soaker) trends() []trend {
	s.mu.Lock()
	defer s.mu.Unlock()
	type key struct{ worker, pid int }
	lives := map[key][]sample{}
	for _, sm := range s.samples {
		k := key{sm.worker, sm.pid}
		lives[k] = append(lives[k], sm)
	}
	best := map[int][]sample{}
	for k, l := range lives {
		if len(l) > len(best[k.worker]) {
			best[k.worker] = l
		}
	}
	var out []trend
	for w, l := range best {
		start := max(l[0].at+2*time.Minute, s.settled)
		var x []float64
		var ys [5][]float64
		for _, sm := range l {
			if sm.at < start {
				continue
			}
			x = append(x, sm.at.Hours())
			for i, v := range sm.values() {
				ys[i] = append(ys[i], v)
			}
		}
		if len(x) < 6 {
			continue
		}
		tr := trend{worker: w, pid: l[0].pid, samples: len(x), from: start, to: l[len(l)-1].at}
		for i := range ys {
			tr.perHour[i] = slope(x, ys[i])
			for _, v := range ys[i] {
				tr.mean[i] += v / float64(len(ys[i]))
			}
		}
		out = append(out, tr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].worker < out[j].worker })
	return out
}

var measures = []string{"RSS MiB", "heap in use MiB", "goroutines", "open files", "metric series"}

// report describes the trends, one line per worker and measure: the
// slope per hour and the growth it makes over the fitted stretch
// relative to the mean.
func (s *soaker) report() string {
	var b strings.Builder
	for _, tr := range s.trends() {
		fmt.Fprintf(&b, "worker %d (pid %d, %d samples from %v to %v):", tr.worker, tr.pid, tr.samples, tr.from.Round(time.Second), tr.to.Round(time.Second))
		for i, m := range measures {
			growth := 0.0
			if tr.mean[i] > 0 {
				growth = tr.perHour[i] * (tr.to - tr.from).Hours() / tr.mean[i] * 100
			}
			fmt.Fprintf(&b, " %s mean %.1f slope %+.2f/h (%+.1f%% over the stretch);", m, tr.mean[i], tr.perHour[i], growth)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// plot draws every sample, a line per worker (a restart shows as a drop),
// into path as a PNG.
func (s *soaker) plot(path, title string) error {
	s.mu.Lock()
	byWorker := map[int][]sample{}
	for _, sm := range s.samples {
		byWorker[sm.worker] = append(byWorker[sm.worker], sm)
	}
	s.mu.Unlock()
	var workers []int
	for w := range byWorker {
		workers = append(workers, w)
	}
	sort.Ints(workers)
	panels := make([]harness.LinePanel, len(measures))
	for i, m := range measures {
		panels[i].Title = strings.ToUpper(m)
		for _, w := range workers {
			l := harness.Line{Name: fmt.Sprintf("worker %d", w)}
			for _, sm := range byWorker[w] {
				l.X = append(l.X, sm.at.Minutes())
				l.Y = append(l.Y, sm.values()[i])
			}
			panels[i].Lines = append(panels[i].Lines, l)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := harness.LineChart(f, title, "MINUTES", panels); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

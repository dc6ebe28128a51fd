// Package dashboard serves kmirror's live dashboard on the REST listener:
// an embedded page (HTML, CSS and JavaScript, no external resources) at
// /ui/ and the JSON it polls at /ui/api/overview: flows and their state,
// their lag, throughput and latency over time, one page of partitions
// (filtered, sorted, non-running first; /ui/api/partitions serves pages
// alone), the readiness of each consumer group for a cutover, the
// topology of clusters and flows from the heartbeats, upstream gaps and
// recent warnings and errors. /ui/api/snapshot has every partition at
// once. The page holds no data; the API is behind the REST token.
package dashboard

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/runner"
	"github.com/kmirror/kmirror/internal/topology"
)

//go:embed static
var static embed.FS

// Source is what the dashboard shows the flows of; *runner.Runner is one.
type Source interface {
	Status() []runner.FlowStatus
}

// Defaults of Config.
const (
	DefaultInterval  = 5 * time.Second
	DefaultPoints    = 720 // one hour at 5 s
	DefaultMaxSeries = 2048
	DefaultLogs      = 100
)

// Config configures a Dashboard; zero fields take the defaults.
type Config struct {
	Source  Source
	Metrics *metrics.Metrics
	Logs    *LogRing // recent warnings and errors; nil: none shown
	// Interval is how often history is sampled; Points how many samples
	// of the flows are kept (of partitions, those shown inline); MaxSeries
	// how many series of flows (four each) and of partitions (two each,
	// for those with lag or a rate in the last of those samples).
	Interval  time.Duration
	Points    int
	MaxSeries int
	// Topology, when set, scans the heartbeats of the clusters (as
	// topology.ScanAll and topology.Build do) for the topology view; Run
	// calls it every TopologyInterval. Without it the view shows the
	// flows of Source alone.
	Topology         func(context.Context) topology.Report
	TopologyInterval time.Duration
}

// Dashboard samples the flows and metrics and serves the page.
type Dashboard struct {
	cfg   Config
	hist  *History // of flows
	parts *History // of partitions with lag or a rate

	mu       sync.Mutex
	last     sampled // records lost at the last sample
	tracks   map[partKey]*track
	order    map[string][]*track // per flow, the tracks of the last sample in its status order
	cpMax    map[string]float64  // per flow, highest checkpoint latency
	n        int64               // samples taken
	flowVals map[string]float64  // of the sample being taken
	partVals map[string]float64
	buf      dto.Metric       // counters are read into
	topo     *topology.Report // the last heartbeat scan
	topoAt   time.Time
}

// New returns a Dashboard; Run samples its history.
func New(cfg Config) *Dashboard {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Points <= 0 {
		cfg.Points = DefaultPoints
	}
	if cfg.MaxSeries <= 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	if cfg.TopologyInterval <= 0 {
		cfg.TopologyInterval = DefaultTopologyInterval
	}
	return &Dashboard{cfg: cfg, hist: NewHistory(cfg.Points, cfg.MaxSeries), parts: NewHistory(min(cfg.Points, sparkPoints), cfg.MaxSeries),
		last: sampled{gaps: map[partKey]time.Time{}}, tracks: map[partKey]*track{}, order: map[string][]*track{}, cpMax: map[string]float64{},
		flowVals: map[string]float64{}, partVals: map[string]float64{}}
}

// Run samples every Interval, and scans the topology every
// TopologyInterval, until ctx ends.
func (d *Dashboard) Run(ctx context.Context) {
	if d.cfg.Topology != nil {
		go d.scanTopology(ctx)
	}
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	d.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.Sample(now)
		}
	}
}

// Sample reads the flows and the metrics once and adds them to history.
// Its cost grows with the partitions that copy or are behind; of an idle
// one it compares the progress.
func (d *Dashboard) Sample(now time.Time) {
	var mfs []*dto.MetricFamily
	if d.cfg.Metrics != nil {
		mfs, _ = d.cfg.Metrics.Sampled.Gather()
	}
	flows := d.cfg.Source.Status()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last = newSampled(mfs, d.last, now)
	d.sampleFlows(flows, now)
	d.hist.Add(now, d.flowVals)
	d.parts.Add(now, d.partVals)
}

// Mount is the dashboard on the REST listener (rest.Mount's Build): the
// page is open, its API behind guard.
func (d *Dashboard) Mount(guard func(http.Handler) http.Handler) http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	mux := http.NewServeMux()
	mux.Handle("GET /ui/", files)
	mux.Handle("GET /ui/api/snapshot", guard(http.HandlerFunc(d.snapshot)))
	mux.Handle("GET /ui/api/overview", guard(http.HandlerFunc(d.overview)))
	mux.Handle("GET /ui/api/partitions", guard(http.HandlerFunc(d.partitions)))
	return secure(mux)
}

// csp lets the page load its own files and nothing else: no inline script
// or style, no frames, no form posts elsewhere.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		if strings.HasPrefix(r.URL.Path, "/ui/api/") {
			hd.Set("Cache-Control", "no-store")
		}
		h.ServeHTTP(w, r)
	})
}

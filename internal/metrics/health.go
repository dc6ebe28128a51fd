package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Health holds the per-partition health metrics (internal/health.Watcher).
type Health struct {
	// Partitions exports each watched partition's lag and state.
	Partitions        *PartitionHealth
	PartitionRestarts *prometheus.CounterVec
	SourceBatchErrors *prometheus.CounterVec
}

func newHealth(reg *prometheus.Registry) Health {
	h := Health{
		Partitions: &PartitionHealth{
			lag: prometheus.NewDesc("kmirror_partition_lag_records",
				"Source records not yet copied: the source's last stable offset minus the next offset to copy, at the last health check.", partLabels, nil),
			lagSeconds: prometheus.NewDesc("kmirror_partition_lag_seconds",
				"At least how long the oldest source record not yet copied has been in the source (0 when nothing is behind).", partLabels, nil),
			state: prometheus.NewDesc("kmirror_partition_state",
				"1 for the partition's current state (running, lagging, stalled, paused, restarting, stopped, waiting, fencing), 0 for the others.",
				append(append([]string{}, partLabels...), "state"), nil),
			reporters: make(map[HealthReporter]bool),
		},
		PartitionRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_partition_watchdog_restarts_total",
			Help: "Partitions restarted from their progress by the watchdog (reason: stalled).",
		}, append(append([]string{}, partLabels...), "reason")),
		SourceBatchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_source_batch_errors_total",
			Help: "Source record batches that failed their CRC check or could not be parsed; the partition backs off and fetches them again.",
		}, partLabels),
	}
	reg.MustRegister(h.Partitions, h.PartitionRestarts, h.SourceBatchErrors)
	return h
}

// PartitionHealth exports kmirror_partition_lag_records,
// kmirror_partition_lag_seconds and kmirror_partition_state (one series
// per state) of the partitions its reporters watch, as they report them
// at each scrape. A partition keeps only its label pairs between scrapes
// (HealthSeries), not eight series of a GaugeVec.
type PartitionHealth struct {
	lag, lagSeconds, state *prometheus.Desc

	mu        sync.Mutex
	reporters map[HealthReporter]bool
	pairs     map[[2]string]*dto.LabelPair // shared by Series
}

// HealthReporter reports the health of its partitions at a scrape.
type HealthReporter interface {
	// ReportHealth calls report once per partition; state indexes the
	// states its series were made with.
	ReportHealth(report func(s *HealthSeries, lag int64, lagSeconds float64, state int))
}

// HealthSeries are the label pairs of one partition's health series.
type HealthSeries struct {
	part   []*dto.LabelPair   // partition, source, target, topic
	states [][]*dto.LabelPair // the same with each state
}

// Series makes the label pairs of a partition with the given states; all
// but the topic's are shared with other partitions.
func (ph *PartitionHealth) Series(source, target, topic, partition string, states []string) *HealthSeries {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	p, src, tgt := ph.pair("partition", partition), ph.pair("source", source), ph.pair("target", target)
	t := &dto.LabelPair{Name: &topicLabel, Value: new(topic)}
	s := &HealthSeries{part: []*dto.LabelPair{p, src, tgt, t}}
	all := make([]*dto.LabelPair, 0, 5*len(states))
	for _, st := range states { // sorted by name: partition, source, state, target, topic
		all = append(all, p, src, ph.pair("state", st), tgt, t)
		s.states = append(s.states, all[len(all)-5:len(all):len(all)])
	}
	return s
}

var topicLabel = "topic"

// pair returns the shared label pair name=value; ph.mu is held. Only
// labels with few values are shared: aliases, partitions and states.
func (ph *PartitionHealth) pair(name, value string) *dto.LabelPair {
	k := [2]string{name, value}
	lp := ph.pairs[k]
	if lp == nil {
		n, v := name, value
		lp = &dto.LabelPair{Name: &n, Value: &v}
		if ph.pairs == nil {
			ph.pairs = make(map[[2]string]*dto.LabelPair)
		}
		ph.pairs[k] = lp
	}
	return lp
}

// Add reports r's partitions from the next scrape on; Remove stops.
func (ph *PartitionHealth) Add(r HealthReporter) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	ph.reporters[r] = true
}

// Remove stops reporting r's partitions.
func (ph *PartitionHealth) Remove(r HealthReporter) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	delete(ph.reporters, r)
}

// Describe implements prometheus.Collector.
func (ph *PartitionHealth) Describe(ch chan<- *prometheus.Desc) {
	ch <- ph.lag
	ch <- ph.lagSeconds
	ch <- ph.state
}

// Collect implements prometheus.Collector.
func (ph *PartitionHealth) Collect(ch chan<- prometheus.Metric) {
	ph.mu.Lock()
	rs := make([]HealthReporter, 0, len(ph.reporters))
	for r := range ph.reporters {
		rs = append(rs, r)
	}
	ph.mu.Unlock()
	for _, r := range rs {
		r.ReportHealth(func(s *HealthSeries, lag int64, lagSeconds float64, state int) {
			ch <- gauge{ph.lag, s.part, float64(lag)}
			ch <- gauge{ph.lagSeconds, s.part, lagSeconds}
			for i, l := range s.states {
				v := 0.0
				if i == state {
					v = 1
				}
				ch <- gauge{ph.state, l, v}
			}
		})
	}
}

// gauge is one collected value with label pairs made beforehand.
type gauge struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	v      float64
}

func (g gauge) Desc() *prometheus.Desc { return g.desc }

func (g gauge) Write(m *dto.Metric) error {
	v := g.v
	m.Label, m.Gauge = g.labels, &dto.Gauge{Value: &v}
	return nil
}

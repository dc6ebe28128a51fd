package runner

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// flowStates lists every state a flow can be in, for kmirror_flow_state.
var flowStates = []string{"starting", "running", "paused", "stopping", "stopped", "failed"}

var flowStateDesc = prometheus.NewDesc("kmirror_flow_state",
	"1 for the flow's current state (starting, running, paused, stopping, stopped, failed), 0 for the others.",
	[]string{"source", "target", "kind", "state"}, nil)

// stateCollector reports the flows' states as they are when scraped.
type stateCollector struct{ r *Runner }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- flowStateDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.r.Status() {
		pair := f.Name
		if f.Pair != "" {
			pair = f.Pair
		}
		src, dst, _ := strings.Cut(pair, "->")
		for _, s := range flowStates {
			v := 0.0
			if s == f.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(flowStateDesc, prometheus.GaugeValue, v, src, dst, string(f.Kind), s)
		}
	}
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Health holds the per-partition health metrics (internal/datapath.Health).
type Health struct {
	PartitionLag        *prometheus.GaugeVec
	PartitionLagSeconds *prometheus.GaugeVec
	PartitionState      *prometheus.GaugeVec
	PartitionRestarts   *prometheus.CounterVec
	SourceBatchErrors   *prometheus.CounterVec
}

func newHealth(reg *prometheus.Registry) Health {
	h := Health{
		PartitionLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_partition_lag_records",
			Help: "Source records not yet copied: the source's last stable offset minus the next offset to copy, at the last health check.",
		}, partLabels),
		PartitionLagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_partition_lag_seconds",
			Help: "At least how long the oldest source record not yet copied has been in the source (0 when nothing is behind).",
		}, partLabels),
		PartitionState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_partition_state",
			Help: "1 for the partition's current state (running, lagging, stalled, paused, restarting, stopped), 0 for the others.",
		}, append(append([]string{}, partLabels...), "state")),
		PartitionRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_partition_watchdog_restarts_total",
			Help: "Partitions restarted from their progress by the watchdog (reason: stalled).",
		}, append(append([]string{}, partLabels...), "reason")),
		SourceBatchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_source_batch_errors_total",
			Help: "Source record batches that failed their CRC check or could not be parsed; the partition backs off and fetches them again.",
		}, partLabels),
	}
	reg.MustRegister(h.PartitionLag, h.PartitionLagSeconds, h.PartitionState, h.PartitionRestarts, h.SourceBatchErrors)
	return h
}

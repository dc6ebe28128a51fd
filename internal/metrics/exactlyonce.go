package metrics

import "github.com/prometheus/client_golang/prometheus"

// ExactlyOnce holds the metrics of exactly-once flows' transactional
// producers.
type ExactlyOnce struct {
	// Fenced counts the times another producer with the same
	// transactional ID fenced one of this worker's.
	Fenced *prometheus.CounterVec
	// FenceFailures counts failed attempts to take an exactly-once slot
	// (its producer's InitProducerID), and Unfenced the partitions
	// assigned to this worker that wait for such an attempt to succeed.
	FenceFailures *prometheus.CounterVec
	Unfenced      *prometheus.GaugeVec
}

func newExactlyOnce(reg *prometheus.Registry) ExactlyOnce {
	flow := []string{"source", "target"}
	e := ExactlyOnce{
		Fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_exactly_once_fenced_total",
			Help: "Times a transactional producer of this worker was fenced: another kmirror took its transactional ID, and this one writes nothing more with it.",
		}, flow),
		FenceFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_exactly_once_slot_init_failures_total",
			Help: "Failed attempts to initialise the transactional producer of an exactly-once slot given to this worker (InitProducerID); its partitions are not copied until one succeeds.",
		}, flow),
		Unfenced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_exactly_once_partitions_waiting",
			Help: "Partitions assigned to this worker that are not copied because their slot's transactional producer could not be initialised yet (retried with backoff).",
		}, flow),
	}
	reg.MustRegister(e.Fenced, e.FenceFailures, e.Unfenced)
	return e
}

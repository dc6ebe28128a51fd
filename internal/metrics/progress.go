package metrics

import "github.com/prometheus/client_golang/prometheus"

// Progress holds the metrics of the flows' progress topics (the Connect
// offsets topic on the target) and of positions recovered without it.
type Progress struct {
	// TopicMissing is 1 while a flow's progress topic is missing on the
	// target (deleted) and not made again yet.
	TopicMissing *prometheus.GaugeVec
	// TopicRecreated counts the times a flow made its deleted progress
	// topic again and wrote the progress it held in memory.
	TopicRecreated *prometheus.CounterVec
	// Recovered counts partitions that started without saved progress
	// while their remote topic already held records, by where their
	// position came from: "offset-syncs" or "log-start" (none could be
	// trusted: copied again from the start).
	Recovered *prometheus.CounterVec
}

func newProgress(reg *prometheus.Registry) Progress {
	flow := []string{"source", "target"}
	p := Progress{
		TopicMissing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_progress_topic_missing",
			Help: "1 while the flow's progress topic (the Connect offsets topic on the target) is missing and not made again yet.",
		}, flow),
		TopicRecreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_progress_topic_recreated_total",
			Help: "Times the flow found its progress topic deleted on the target, made it again and wrote the progress it held in memory.",
		}, flow),
		Recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_progress_recovered_partitions_total",
			Help: "Partitions started without saved progress while their remote topic already held records, by where their position came from (offset-syncs, or log-start when nothing could be trusted).",
		}, []string{"source", "target", "from"}),
	}
	reg.MustRegister(p.TopicMissing, p.TopicRecreated, p.Recovered)
	return p
}

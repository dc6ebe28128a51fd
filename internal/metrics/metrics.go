// Package metrics defines kmirror's Prometheus metrics. Replication metrics
// carry the names MM2's metrics get under the usual JMX-exporter mapping
// (kafka.connect.mirror:type=MirrorSourceConnector,... becomes
// kafka_connect_mirror_source_connector_...), so existing dashboards work.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every metric of one kmirror process.
type Metrics struct {
	Registry *prometheus.Registry
	// Sampled gathers only the records lost, whose series exist only for
	// partitions that met a gap; the dashboard reads the other series
	// it samples through their handles.
	Sampled prometheus.Gatherer

	RecordCount          *prometheus.CounterVec
	ByteCount            *prometheus.CounterVec
	RecordRate           *RateVec
	ByteRate             *RateVec
	RecordAgeMs          *WindowVec
	ReplicationLatencyMs *WindowVec

	RecordsLost        *prometheus.CounterVec
	RecordsLooped      *prometheus.CounterVec
	TopicsRecreated    *prometheus.CounterVec
	PartitionErrors    *prometheus.CounterVec
	OffsetSyncFailures *prometheus.CounterVec
	CorruptRecords     *prometheus.CounterVec

	CheckpointLatencyMs *WindowVec
	GroupOffsetsSynced  *prometheus.CounterVec
	// LastCheckpoints is what the dashboard shows of consumer groups.
	LastCheckpoints *Checkpoints

	Health
	ExactlyOnce
	Progress
}

var partLabels = []string{"source", "target", "topic", "partition"}

// New registers every metric in a new registry, with the Go runtime's and
// the process's collectors.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), LastCheckpoints: &Checkpoints{}}
	m.RecordCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_connect_mirror_source_connector_record_count",
		Help: "Records replicated and acknowledged by the target, per remote topic partition.",
	}, partLabels)
	m.ByteCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_connect_mirror_source_connector_byte_count",
		Help: "Value bytes replicated, per remote topic partition.",
	}, partLabels)
	m.RecordRate = NewRateVec("kafka_connect_mirror_source_connector_record_rate",
		"Records acknowledged by the target per second, over the last 30 s.", m.RecordCount, partLabels)
	m.ByteRate = NewRateVec("kafka_connect_mirror_source_connector_byte_rate",
		"Value bytes replicated per second, over the last 30 s.", m.ByteCount, partLabels)
	m.RecordAgeMs = NewWindowVec("kafka_connect_mirror_source_connector_record_age_ms", "Age of the last record read from the source, in milliseconds.", partLabels)
	m.ReplicationLatencyMs = NewWindowVec("kafka_connect_mirror_source_connector_replication_latency_ms", "Time from the last record's timestamp to its acknowledgement by the target, in milliseconds.", partLabels)
	m.RecordsLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_source_records_lost_total",
		Help: "Source records removed upstream (retention, DeleteRecords, topic re-creation) before kmirror copied them.",
	}, []string{"source", "target", "topic", "partition"})
	m.RecordsLooped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_records_loop_skipped_total",
		Help: "Records not copied because their provenance header shows they came from the target cluster.",
	}, []string{"source", "target", "topic"})
	m.TopicsRecreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_source_topics_recreated_total",
		Help: "Source topics found deleted and re-created; their uncopied records are lost.",
	}, []string{"source", "target", "topic"})
	m.PartitionErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_partition_errors_total",
		Help: "Errors that stopped or restarted a partition pipeline.",
	}, []string{"source", "target", "topic", "partition", "fatal"})
	m.OffsetSyncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_offset_sync_failures_total",
		Help: "Offset syncs that could not be written.",
	}, []string{"source", "target"})
	m.CorruptRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_internal_records_skipped_total",
		Help: "Records of internal topics skipped because they could not be decoded.",
	}, []string{"cluster", "topic"})
	m.CheckpointLatencyMs = NewWindowVec("kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms",
		"Time from computing a checkpoint to its acknowledgement by the target, in milliseconds.",
		[]string{"source", "target", "group", "topic", "partition"})
	m.GroupOffsetsSynced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_group_offsets_synced_total",
		Help: "Partition offsets committed into consumer groups of the target (sync.group.offsets.enabled).",
	}, []string{"source", "target", "group"})
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(m.RecordCount, m.ByteCount, m.RecordRate, m.ByteRate, m.RecordAgeMs, m.ReplicationLatencyMs,
		m.RecordsLost, m.RecordsLooped, m.TopicsRecreated, m.PartitionErrors, m.OffsetSyncFailures, m.CorruptRecords,
		m.CheckpointLatencyMs, m.GroupOffsetsSynced)
	m.Health = newHealth(m.Registry)
	m.ExactlyOnce = newExactlyOnce(m.Registry)
	m.Progress = newProgress(m.Registry)
	sampled := prometheus.NewRegistry()
	sampled.MustRegister(m.RecordsLost)
	m.Sampled = sampled
	return m
}

// ForgetPartition removes every series of one replicated partition, for a
// partition revoked or whose topic is gone: l holds its source, target,
// (remote) topic and partition labels, as its record_count series has them,
// and topic is its source topic, which the loss and error counters carry.
// Handles to the removed series still work but are no longer exported.
func (m *Metrics) ForgetPartition(l prometheus.Labels, topic string) {
	if m == nil {
		return
	}
	m.RecordCount.Delete(l)
	m.ByteCount.Delete(l)
	m.RecordAgeMs.Delete(l)
	m.ReplicationLatencyMs.Delete(l)
	m.SourceBatchErrors.Delete(l)
	m.PartitionRestarts.DeletePartialMatch(l)
	src := prometheus.Labels{"source": l["source"], "target": l["target"], "topic": topic, "partition": l["partition"]}
	m.RecordsLost.Delete(src)
	m.PartitionErrors.DeletePartialMatch(src)
}

// ForgetCheckpoint removes the series and the last checkpoint of one
// group partition (remote topic) no longer checkpointed.
func (m *Metrics) ForgetCheckpoint(source, target, group, topic string, partition int32) {
	if m == nil {
		return
	}
	m.CheckpointLatencyMs.Delete(prometheus.Labels{"source": source, "target": target, "group": group, "topic": topic, "partition": strconv.Itoa(int(partition))})
	m.LastCheckpoints.Delete(source, target, group, topic, partition)
}

// ForgetTopic removes the per-topic series of a source topic none of whose
// partitions is replicated here any more.
func (m *Metrics) ForgetTopic(source, target, topic string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"source": source, "target": target, "topic": topic}
	m.RecordsLooped.Delete(l)
	m.TopicsRecreated.Delete(l)
}

package dashboard

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/runner"
)

// Metric families the dashboard reads; internal/metrics computes them.
const (
	recordRate   = "kafka_connect_mirror_source_connector_record_rate"
	byteRate     = "kafka_connect_mirror_source_connector_byte_rate"
	replLatency  = "kafka_connect_mirror_source_connector_replication_latency_ms"
	cpLatency    = "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms"
	recordsLost  = "kmirror_source_records_lost_total"
	sparkPoints  = 60 // partition history shown inline
	flowPrefix   = "flow|"
	partPrefix   = "part|"
	seriesLag    = "lag"
	seriesRecs   = "records_per_second"
	seriesRepl   = "replication_latency_ms"
	seriesCheckp = "checkpoint_latency_ms"
)

// partKey names a partition of a flow; topic is the remote topic for
// rates and latency, the source topic for lost records.
type partKey struct {
	flow, topic string
	partition   int32
}

// cpKeyOf names a checkpointed group partition of a flow.
type cpKeyOf struct {
	flow, group, topic string
	partition          int32
}

// sampled is what one sample read from the metrics.
type sampled struct {
	at                   time.Time
	rate, bytes, latency map[partKey]float64
	lost                 map[partKey]float64
	gaps                 map[partKey]time.Time // when lost records were last seen growing
	checkpoint           map[cpKeyOf]float64
}

func newSampled(mfs []*dto.MetricFamily, prev sampled, now time.Time) sampled {
	s := sampled{at: now, rate: map[partKey]float64{}, bytes: map[partKey]float64{}, latency: map[partKey]float64{},
		lost: map[partKey]float64{}, gaps: make(map[partKey]time.Time, len(prev.gaps)), checkpoint: map[cpKeyOf]float64{}}
	for k, at := range prev.gaps { // a copy: snapshots read the last one unlocked
		s.gaps[k] = at
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := labels(m)
			flow := l["source"] + "->" + l["target"]
			p, _ := strconv.ParseInt(l["partition"], 10, 32)
			k := partKey{flow, l["topic"], int32(p)}
			switch mf.GetName() {
			case recordRate:
				s.rate[k] = m.GetGauge().GetValue()
			case byteRate:
				s.bytes[k] = m.GetGauge().GetValue()
			case replLatency:
				s.latency[k] = m.GetGauge().GetValue()
			case cpLatency:
				s.checkpoint[cpKeyOf{flow, l["group"], l["topic"], int32(p)}] = m.GetGauge().GetValue()
			case recordsLost:
				// A series exists only once a gap was met, so a new
				// one is a gap too (a truncated log adds 0 records).
				v := m.GetCounter().GetValue()
				if was, ok := prev.lost[k]; !ok || v > was {
					s.gaps[k] = now
				}
				s.lost[k] = v
			}
		}
	}
	return s
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// seriesOf is one history sample: per flow its lag, records per second,
// the highest replication and checkpoint latency of its partitions; per
// partition its lag and records per second.
func seriesOf(flows []runner.FlowStatus, s sampled) map[string]float64 {
	out := make(map[string]float64)
	for _, f := range flows {
		if f.Kind != "replication" || f.Partitions == nil {
			continue
		}
		fv := viewOf(f, s)
		fk := flowPrefix + f.Name + "|"
		out[fk+seriesLag] = float64(fv.Lag)
		out[fk+seriesRecs] = fv.RecordsPerSecond
		if fv.ReplicationLatencyMs != nil {
			out[fk+seriesRepl] = *fv.ReplicationLatencyMs
		}
		if fv.CheckpointLatencyMs != nil {
			out[fk+seriesCheckp] = *fv.CheckpointLatencyMs
		}
		for _, p := range fv.Partitions {
			pk := partSeries(f.Name, p.Remote, p.Partition)
			out[pk+seriesLag] = float64(max(p.Lag, 0))
			out[pk+seriesRecs] = p.RecordsPerSecond
		}
	}
	return out
}

func partSeries(flow, remote string, p int32) string {
	return partPrefix + flow + "|" + remote + "|" + strconv.Itoa(int(p)) + "|"
}

// flowView is a flow as the page shows it.
type flowView struct {
	runner.FlowStatus
	Lag                  int64      `json:"lag"`
	RecordsPerSecond     float64    `json:"records_per_second"`
	BytesPerSecond       float64    `json:"bytes_per_second"`
	ReplicationLatencyMs *float64   `json:"replication_latency_ms"`
	CheckpointLatencyMs  *float64   `json:"checkpoint_latency_ms"`
	Partitions           []partView `json:"partitions"`
}

// partView is a partition as the page shows it.
type partView struct {
	datapath.PartitionStatus
	RecordsPerSecond     float64    `json:"records_per_second"`
	BytesPerSecond       float64    `json:"bytes_per_second"`
	ReplicationLatencyMs *float64   `json:"replication_latency_ms"`
	RecordsLost          *float64   `json:"records_lost"`
	LastGap              *time.Time `json:"last_gap"`
	LagHistory           Points     `json:"lag_history,omitempty"`
	RateHistory          Points     `json:"rate_history,omitempty"`
}

func viewOf(f runner.FlowStatus, s sampled) flowView {
	fv := flowView{FlowStatus: f, Partitions: []partView{}}
	fv.FlowStatus.Partitions = nil
	for _, p := range f.Partitions {
		k := partKey{f.Name, p.Remote, p.Partition}
		pv := partView{PartitionStatus: p, RecordsPerSecond: s.rate[k], BytesPerSecond: s.bytes[k]}
		if v, ok := s.latency[k]; ok {
			pv.ReplicationLatencyMs = &v
			fv.ReplicationLatencyMs = maxOf(fv.ReplicationLatencyMs, v)
		}
		src := partKey{f.Name, p.Topic, p.Partition}
		if v, ok := s.lost[src]; ok {
			pv.RecordsLost = &v
			if at, ok := s.gaps[src]; ok {
				pv.LastGap = &at
			}
		}
		fv.Lag += max(p.Lag, 0)
		fv.RecordsPerSecond += pv.RecordsPerSecond
		fv.BytesPerSecond += pv.BytesPerSecond
		fv.Partitions = append(fv.Partitions, pv)
	}
	for k, v := range s.checkpoint {
		if k.flow == f.Name {
			fv.CheckpointLatencyMs = maxOf(fv.CheckpointLatencyMs, v)
		}
	}
	return fv
}

func maxOf(p *float64, v float64) *float64 {
	if p == nil || v > *p {
		return &v
	}
	return p
}

// Snapshot is what /ui/api/snapshot returns.
type Snapshot struct {
	Now             time.Time        `json:"now"`
	IntervalSeconds float64          `json:"interval_seconds"`
	Flows           []flowView       `json:"flows"`
	History         Span             `json:"history"` // flow series, "flow|NAME|SERIES"
	Checkpoints     []checkpointView `json:"checkpoints"`
	Gaps            []gapView        `json:"gaps"`
	Errors          []LogRecord      `json:"errors"`
}

type checkpointView struct {
	Flow       string    `json:"flow"`
	Group      string    `json:"group"`
	Topic      string    `json:"topic"`
	Partition  int32     `json:"partition"`
	Upstream   int64     `json:"upstream_offset"`
	Downstream int64     `json:"downstream_offset"`
	At         time.Time `json:"at"`
	LatencyMs  *float64  `json:"latency_ms"`
}

type gapView struct {
	Flow        string    `json:"flow"`
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	RecordsLost float64   `json:"records_lost"`
	LastSeen    time.Time `json:"last_seen"`
}

// Snapshot returns the flows as they are now, with the rates, latencies
// and history of the last sample.
func (d *Dashboard) Snapshot(now time.Time) Snapshot {
	flows := d.cfg.Source.Status()
	d.mu.Lock()
	s := d.last
	d.mu.Unlock()
	parts := d.hist.Last(sparkPoints, partPrefix)
	out := Snapshot{Now: now, IntervalSeconds: d.cfg.Interval.Seconds(), Flows: []flowView{},
		History: d.hist.Last(0, flowPrefix), Checkpoints: []checkpointView{}, Gaps: []gapView{}, Errors: []LogRecord{}}
	for _, f := range flows {
		fv := viewOf(f, s)
		for i, p := range fv.Partitions {
			pk := partSeries(f.Name, p.Remote, p.Partition)
			fv.Partitions[i].LagHistory = parts.Series[pk+seriesLag]
			fv.Partitions[i].RateHistory = parts.Series[pk+seriesRecs]
			if p.RecordsLost != nil {
				out.Gaps = append(out.Gaps, gapView{Flow: f.Name, Topic: p.Topic, Partition: p.Partition, RecordsLost: *p.RecordsLost, LastSeen: *p.LastGap})
			}
		}
		out.Flows = append(out.Flows, fv)
	}
	if d.cfg.Metrics != nil {
		for _, c := range d.cfg.Metrics.LastCheckpoints.All() {
			flow := c.Source + "->" + c.Target
			cv := checkpointView{Flow: flow, Group: c.Group, Topic: c.Topic, Partition: c.Partition, Upstream: c.Upstream, Downstream: c.Downstream, At: c.At}
			if v, ok := s.checkpoint[cpKeyOf{flow, c.Group, c.Topic, c.Partition}]; ok {
				cv.LatencyMs = &v
			}
			out.Checkpoints = append(out.Checkpoints, cv)
		}
	}
	sort.Slice(out.Gaps, func(i, j int) bool { return out.Gaps[i].LastSeen.After(out.Gaps[j].LastSeen) })
	if d.cfg.Logs != nil {
		out.Errors = d.cfg.Logs.Recent()
	}
	return out
}

func (d *Dashboard) snapshot(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(d.Snapshot(time.Now()))
}

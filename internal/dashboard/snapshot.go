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

// The metric family the dashboard gathers (metrics.Sampled), and names
// of its history.
const (
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

// sampled is what one sample read of the records lost.
type sampled struct {
	at   time.Time
	lost map[partKey]float64
	gaps map[partKey]time.Time // when lost records were last seen growing
}

func newSampled(mfs []*dto.MetricFamily, prev sampled, now time.Time) sampled {
	s := sampled{at: now, lost: map[partKey]float64{}, gaps: prev.gaps}
	for _, mf := range mfs {
		if mf.GetName() != recordsLost {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := labels(m)
			p, _ := strconv.ParseInt(l["partition"], 10, 32)
			k := partKey{l["source"] + "->" + l["target"], l["topic"], int32(p)}
			// A series exists only once a gap was met, so a new one is
			// a gap too (a truncated log adds 0 records).
			v := m.GetCounter().GetValue()
			if was, ok := prev.lost[k]; !ok || v > was {
				s.gaps[k] = now
			}
			s.lost[k] = v
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

func partSeries(flow, remote string, p int32) string {
	return partPrefix + flow + "|" + remote + "|" + strconv.Itoa(int(p)) + "|"
}

// flowTotals are the sums and maxima of a flow's partitions.
type flowTotals struct {
	Lag                  int64    `json:"lag"`
	RecordsPerSecond     float64  `json:"records_per_second"`
	BytesPerSecond       float64  `json:"bytes_per_second"`
	ReplicationLatencyMs *float64 `json:"replication_latency_ms"`
	CheckpointLatencyMs  *float64 `json:"checkpoint_latency_ms"`
}

// flowView is a flow with every partition, as /ui/api/snapshot has it.
type flowView struct {
	runner.FlowStatus
	flowTotals
	Partitions []partView `json:"partitions"`
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

// partViewOf is partition p of flow with what the last sample read;
// d.mu is held.
func (d *Dashboard) partViewOf(flow string, p datapath.PartitionStatus) partView {
	pv := partView{PartitionStatus: p}
	if t := d.tracks[partKey{flow, p.Remote, p.Partition}]; t != nil {
		pv.RecordsPerSecond, pv.BytesPerSecond = t.rps, t.bps
		if t.latency != nil {
			v := t.lat
			pv.ReplicationLatencyMs = &v
		}
	}
	src := partKey{flow, p.Topic, p.Partition}
	if v, ok := d.last.lost[src]; ok {
		pv.RecordsLost = &v
		if at, ok := d.last.gaps[src]; ok {
			pv.LastGap = &at
		}
	}
	return pv
}

// trackAt returns the track of p, the i-th partition of flow, found by
// position in order (the flow's tracks at the last sample) when it is
// there; nil when it has none. d.mu is held.
func (d *Dashboard) trackAt(flow string, order []*track, i int, p *datapath.PartitionStatus) *track {
	if i < len(order) && order[i].partition == p.Partition && order[i].remote == p.Remote {
		return order[i]
	}
	return d.tracks[partKey{flow, p.Remote, p.Partition}]
}

// totalsOf sums f's partitions as the last sample read them, counting
// them by state into states (when not nil); d.mu is held.
func (d *Dashboard) totalsOf(f runner.FlowStatus, states map[string]int) flowTotals {
	var ft flowTotals
	repl, hasRepl := 0.0, false
	order := d.order[f.Name]
	for i := range f.Partitions {
		p := &f.Partitions[i]
		ft.Lag += max(p.Lag, 0)
		if states != nil {
			states[p.State]++
		}
		t := d.trackAt(f.Name, order, i, p)
		if t == nil {
			continue
		}
		ft.RecordsPerSecond += t.rps
		ft.BytesPerSecond += t.bps
		if t.latency != nil && (!hasRepl || t.lat > repl) {
			repl, hasRepl = t.lat, true
		}
	}
	if hasRepl {
		ft.ReplicationLatencyMs = &repl
	}
	if v, ok := d.cpMax[f.Name]; ok {
		ft.CheckpointLatencyMs = &v
	}
	return ft
}

// viewOf is f with what the last sample read; d.mu is held.
func (d *Dashboard) viewOf(f runner.FlowStatus) flowView {
	fv := flowView{FlowStatus: f, Partitions: make([]partView, 0, len(f.Partitions)), flowTotals: d.totalsOf(f, nil)}
	fv.FlowStatus.Partitions = nil
	for _, p := range f.Partitions {
		fv.Partitions = append(fv.Partitions, d.partViewOf(f.Name, p))
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
	parts := d.parts.Last(sparkPoints, partPrefix)
	out := Snapshot{Now: now, IntervalSeconds: d.cfg.Interval.Seconds(), Flows: []flowView{},
		History: d.hist.Last(0, flowPrefix), Checkpoints: []checkpointView{}, Gaps: []gapView{}, Errors: []LogRecord{}}
	d.mu.Lock()
	for _, f := range flows {
		fv := d.viewOf(f)
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
	d.mu.Unlock()
	if m := d.cfg.Metrics; m != nil {
		latency := map[cpKeyOf]float64{}
		m.CheckpointLatencyMs.EachLast(func(l []string, last float64) {
			p, _ := strconv.ParseInt(l[4], 10, 32)
			latency[cpKeyOf{l[0] + "->" + l[1], l[2], l[3], int32(p)}] = last
		})
		for _, c := range m.LastCheckpoints.All() {
			flow := c.Source + "->" + c.Target
			cv := checkpointView{Flow: flow, Group: c.Group, Topic: c.Topic, Partition: c.Partition, Upstream: c.Upstream, Downstream: c.Downstream, At: c.At}
			if v, ok := latency[cpKeyOf{flow, c.Group, c.Topic, c.Partition}]; ok {
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

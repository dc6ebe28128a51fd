package dashboard

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/runner"
)

// track is what the dashboard keeps of one partition between samples:
// the handles of its series and what they last read. Its counters are
// read only in the samples that see its progress (Done) move and the one
// after; an idle partition costs a comparison per sample.
type track struct {
	records, bytes prometheus.Counter // nil without metrics
	latency        *metrics.Window
	lagName        string // its history series
	rateName       string
	remote         string // and partition: which it is of its flow
	partition      int32

	done     int64 // progress at the last sample
	moved    int64 // the sample (Dashboard.n) in which done last changed
	active   int64 // the last sample with lag or a rate above 0
	seen     int64 // the last sample that listed it
	quiet    bool  // rates 0 and nothing moved: the rates stay 0
	recs     float64
	byteSum  float64
	recRate  metrics.Rate
	byteRate metrics.Rate
	rps, bps float64 // records and bytes per second over the rate window
	lat      float64 // replication latency, last measured
}

// newTrack starts tracking p of flow; d.mu is held.
func (d *Dashboard) newTrack(flow string, p datapath.PartitionStatus) *track {
	name := partSeries(flow, p.Remote, p.Partition)
	// Its counters are read now (moved); it has no history until it has
	// lag or a rate (active long ago).
	t := &track{lagName: name + seriesLag, rateName: name + seriesRecs, remote: p.Remote, partition: p.Partition,
		done: p.Done, moved: d.n, active: d.n - sparkPoints - 1}
	if m := d.cfg.Metrics; m != nil {
		src, tgt, _ := strings.Cut(flow, "->")
		part := strconv.Itoa(int(p.Partition))
		t.records = m.RecordCount.WithLabelValues(src, tgt, p.Remote, part)
		t.bytes = m.ByteCount.WithLabelValues(src, tgt, p.Remote, part)
		t.latency = m.ReplicationLatencyMs.WithLabelValues(src, tgt, p.Remote, part)
	}
	return t
}

// update takes one sample of t, whose status is p; d.mu is held.
func (d *Dashboard) update(t *track, p datapath.PartitionStatus, now time.Time) {
	t.seen = d.n
	if p.Done != t.done {
		t.done, t.moved = p.Done, d.n
	}
	// Acknowledged records move Done; the counters are read as it moves
	// and once more, for counts added just after the sample saw Done.
	if d.n-t.moved <= 1 && t.records != nil {
		recs, bytes := counterValue(t.records, &d.buf), counterValue(t.bytes, &d.buf)
		if t.quiet { // the rates stood at 0 since well before the window
			t.recRate.Idled(now, t.recs)
			t.byteRate.Idled(now, t.byteSum)
			t.quiet = false
		}
		t.recs, t.byteSum = recs, bytes
		t.lat = t.latency.Last()
	}
	if !t.quiet {
		t.rps, _ = t.recRate.Add(now, t.recs)
		t.bps, _ = t.byteRate.Add(now, t.byteSum)
		t.quiet = t.rps == 0 && t.bps == 0 && d.n-t.moved > 1
	}
	if p.Lag > 0 || t.rps > 0 || t.bps > 0 {
		t.active = d.n
	}
}

func counterValue(c prometheus.Counter, buf *dto.Metric) float64 {
	if c.Write(buf) != nil {
		return 0
	}
	return buf.GetCounter().GetValue()
}

// sampleFlows takes one sample of the partitions of flows and fills the
// history values: per flow its lag, records per second and the highest
// replication and checkpoint latency of its partitions; per partition
// that had lag or copied records within the last sparkPoints samples, its
// lag and records per second. d.mu is held.
func (d *Dashboard) sampleFlows(flows []runner.FlowStatus, now time.Time) {
	d.n++
	clear(d.flowVals)
	clear(d.partVals)
	d.sampleCheckpoints(flows)
	listed := 0
	sampled := make(map[string]bool, len(flows))
	for _, f := range flows {
		if f.Kind != "replication" || f.Partitions == nil {
			continue
		}
		var lag int64
		var rps float64
		repl, hasRepl := 0.0, false
		// A flow's partitions come in the same order as at the last
		// sample, normally: found by position, without hashing.
		old := d.order[f.Name]
		order := old[:0]
		sampled[f.Name] = true
		for i, p := range f.Partitions {
			var t *track
			if i < len(old) && old[i].partition == p.Partition && old[i].remote == p.Remote {
				t = old[i]
			} else {
				k := partKey{f.Name, p.Remote, p.Partition}
				if t = d.tracks[k]; t == nil {
					t = d.newTrack(f.Name, p)
					d.tracks[k] = t
				}
			}
			order = append(order, t)
			d.update(t, p, now)
			listed++
			lag += max(p.Lag, 0)
			rps += t.rps
			if t.latency != nil && (!hasRepl || t.lat > repl) {
				repl, hasRepl = t.lat, true
			}
			switch idle := d.n - t.active; {
			case idle < sparkPoints:
				d.partVals[t.lagName] = float64(max(p.Lag, 0))
				d.partVals[t.rateName] = t.rps
			case idle == sparkPoints: // idle for a whole spark: no line
				d.parts.Drop(t.lagName, t.rateName)
			}
		}
		clear(order[len(order):cap(order)])
		d.order[f.Name] = order
		fk := flowPrefix + f.Name + "|"
		d.flowVals[fk+seriesLag] = float64(lag)
		d.flowVals[fk+seriesRecs] = rps
		if hasRepl {
			d.flowVals[fk+seriesRepl] = repl
		}
		if v, ok := d.cpMax[f.Name]; ok {
			d.flowVals[fk+seriesCheckp] = v
		}
	}
	for name := range d.order {
		if !sampled[name] {
			delete(d.order, name)
		}
	}
	if listed != len(d.tracks) {
		for k, t := range d.tracks {
			if t.seen != d.n {
				delete(d.tracks, k)
				d.parts.Drop(t.lagName, t.rateName)
			}
		}
	}
}

// sampleCheckpoints sets d.cpMax: per replication flow the highest
// checkpoint latency of its group partitions. d.mu is held.
func (d *Dashboard) sampleCheckpoints(flows []runner.FlowStatus) {
	clear(d.cpMax)
	if d.cfg.Metrics == nil {
		return
	}
	d.cfg.Metrics.CheckpointLatencyMs.EachLast(func(values []string, last float64) {
		for _, f := range flows {
			src, tgt, _ := strings.Cut(f.Name, "->")
			if f.Kind == "replication" && values[0] == src && values[1] == tgt {
				if v, ok := d.cpMax[f.Name]; !ok || last > v {
					d.cpMax[f.Name] = last
				}
			}
		}
	})
}

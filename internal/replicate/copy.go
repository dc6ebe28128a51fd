package replicate

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
)

// copyPartition sends the records of one fetched partition.
func (r *Replicator) copyPartition(ctx context.Context, fp kgo.FetchTopicPartition) {
	p := r.lookup(progress.TP{Topic: fp.Topic, Partition: fp.Partition})
	if p == nil || len(fp.Records) == 0 {
		return
	}
	now := time.Now()
	for _, rec := range fp.Records {
		p.mu.Lock()
		if p.stopped || p.revoked || p.failed != nil || rec.Offset < p.next {
			// Stale data from before a restart, or a stopped partition.
			p.mu.Unlock()
			continue
		}
		p.next = rec.Offset + 1
		if p.base < 0 {
			p.base = rec.Offset
		}
		gen := p.gen
		if rec.Attrs.IsControl() {
			p.skipLocked(rec.Offset)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()

		origin, has := datapath.Origin(rec.Headers)
		if has && origin == r.cfg.TargetAlias {
			r.cfg.Metrics.RecordsLooped.WithLabelValues(r.cfg.SourceAlias, r.cfg.TargetAlias, p.tp.Topic).Inc()
			p.mu.Lock()
			p.skipLocked(rec.Offset)
			p.mu.Unlock()
			continue
		}
		out := &kgo.Record{
			Topic:     p.remote,
			Partition: rec.Partition,
			Key:       rec.Key,
			Value:     rec.Value,
			Headers:   rec.Headers,
			Timestamp: rec.Timestamp,
		}
		if out.Timestamp.IsZero() {
			// A message format v0 record has no timestamp; the target
			// gets -1 (none), as passthrough writes, not the time of copying.
			out.Timestamp = time.UnixMilli(-1)
		}
		if r.cfg.AddOrigin && !has {
			out.Headers = append(append(make([]kgo.RecordHeader, 0, len(rec.Headers)+1), rec.Headers...),
				kgo.RecordHeader{Key: datapath.OriginHeader, Value: []byte(r.cfg.SourceAlias)})
		}
		if r.cfg.Throttle.Wait(ctx, len(rec.Key)+len(rec.Value)) != nil {
			return // stopping: the record was not sent and is fetched again
		}
		if r.cfg.Transactional && !r.beginFor(p) {
			continue // fenced: the partition is dropped
		}
		prod := r.producerFor(p, rec)
		if prod != p.prod {
			// Another codec: the records in flight go first, so that the
			// partition stays in order across producers.
			if p.drain(ctx) != nil {
				return
			}
			p.prod = prod
		}
		pd := &pending{p: p, gen: gen, src: rec.Offset, advanceTo: -1, ts: rec.Timestamp}
		p.mu.Lock()
		if p.gen != gen || p.failed != nil {
			p.mu.Unlock()
			continue
		}
		p.inflight++
		p.last = pd
		pd.careful = rec.Offset <= p.carefulUntil
		p.mu.Unlock()
		p.byteCount.Add(float64(len(rec.Value)))
		if !pd.careful {
			prod.Produce(ctx, out, func(out *kgo.Record, err error) { r.acked(pd, out, err) })
			continue
		}
		sent := make(chan struct{})
		prod.Produce(ctx, out, func(out *kgo.Record, err error) { r.acked(pd, out, err); close(sent) })
		<-sent
	}
	// Ages are sampled once per fetched batch of records: cheap, and what
	// min, max and avg over 30 s need.
	p.recordAge.Set(float64(now.Sub(fp.Records[len(fp.Records)-1].Timestamp).Milliseconds()))
}

// producerFor returns the producer of a record: the one of its source
// codec when ByCodec is set.
func (r *Replicator) producerFor(p *partition, rec *kgo.Record) *kgo.Client {
	if r.cfg.Transactional {
		return p.txn.cl
	}
	if r.cfg.ByCodec == nil {
		return r.cfg.Target
	}
	if cl, ok := r.cfg.ByCodec[rec.Attrs.CompressionType()]; ok {
		return cl
	}
	return r.cfg.Target
}

// producers returns every producer records may go through.
func (r *Replicator) producers() []*kgo.Client {
	out := []*kgo.Client{r.cfg.Target}
	for _, cl := range r.cfg.ByCodec {
		if cl != r.cfg.Target {
			out = append(out, cl)
		}
	}
	r.mu.Lock()
	for _, t := range r.txns {
		if t.own {
			out = append(out, t.cl)
		}
	}
	r.mu.Unlock()
	return out
}

func (r *Replicator) flushAll(ctx context.Context) error {
	for _, cl := range r.producers() {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// skipLocked marks offset off as handled without a record on the target.
func (p *partition) skipLocked(off int64) {
	if p.last != nil {
		p.last.advanceTo = off
		return
	}
	p.Skip(off)
}

// acked runs in the producer's callback, in offset order per partition.
func (r *Replicator) acked(pd *pending, out *kgo.Record, err error) {
	p := pd.p
	p.mu.Lock()
	p.inflight--
	if pd.gen != p.gen {
		p.mu.Unlock()
		return
	}
	if p.last == pd {
		p.last = nil
	}
	if err != nil {
		first := p.failed == nil
		if first {
			p.failedCareful = pd.careful
			p.failed = fmt.Errorf("producing source offset %d of %s to %s partition %d: %w", pd.src, p.tp, p.remote, out.Partition, err)
		}
		p.mu.Unlock()
		if r.cfg.TopicGone != nil && datapath.TopicGone(err) {
			r.cfg.TopicGone(p.remote)
		}
		if first {
			r.mu.Lock()
			r.restarts = append(r.restarts, p)
			wake := r.wake
			r.mu.Unlock()
			if wake != nil {
				wake()
			}
		}
		return
	}
	if p.failed != nil {
		// A record after a failed one: its position is not safe.
		p.mu.Unlock()
		return
	}
	p.Done = max(p.Done, pd.src, pd.advanceTo)
	p.mu.Unlock()
	r.Acked(1)
	p.recordCount.Inc()
	if r.acks.Add(1)%latencySample == 1 {
		p.latency.Set(float64(time.Since(pd.ts).Milliseconds()))
	}
	if r.cfg.Syncs != nil {
		r.cfg.Syncs.Acked(p.tp.Topic, p.tp.Partition, pd.src, out.Offset)
	}
}

// latencySample: one acknowledgement in this many updates the replication
// latency metric, so the hot path does not read the clock per record.
const latencySample = 64

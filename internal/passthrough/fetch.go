package passthrough

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
)

// lane is one fetch stream to a source broker: the client whose
// connection carries it, and so the partitions whose datapath.Lane it is.
type lane struct {
	broker int32
	client int
}

// fetchAsk is what one fetch asked of a partition.
type fetchAsk struct {
	p        *partition
	offset   int64
	gen      int
	maxBytes int
}

// startFetches sends one fetch on every lane that has a partition with
// room in its buffer and no fetch in flight.
func (pl *Pipeline) startFetches(ctx context.Context) {
	if pl.Paused() {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := time.Now()
	led := map[lane]int{} // partitions fetched on each lane
	for _, p := range pl.parts {
		if !p.stopped && !p.revoked && p.srcLeader >= 0 {
			led[lane{p.srcLeader, p.lane}]++
		}
	}
	byLane := map[lane][]*partition{}
	for _, p := range pl.parts {
		if p.stopped || p.stopAfter != nil || p.revoked || p.fetching || p.outOfRange || p.next < 0 || p.srcLeader < 0 || now.Before(p.retryAt) {
			continue
		}
		l := lane{p.srcLeader, p.lane}
		if pl.fetching[l] || p.queued >= 4*int64(pl.partitionBytes(led[l])) {
			continue
		}
		byLane[l] = append(byLane[l], p)
	}
	for l, ps := range byLane {
		if pl.buffered > 0 && pl.buffered+int64(pl.fetchesIn+1)*int64(pl.cfg.FetchMaxBytes) > pl.cfg.BufferBytes {
			return
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = int32(pl.cfg.FetchMaxWait.Milliseconds())
		req.MinBytes = 1
		req.MaxBytes = pl.cfg.FetchMaxBytes
		req.IsolationLevel = 1 // read_committed
		partBytes := pl.partitionBytes(led[l])
		asks := map[progress.TP]fetchAsk{}
		byTopic := map[string]int{}
		for _, p := range ps {
			i, ok := byTopic[p.tp.Topic]
			if !ok {
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = p.tp.Topic, p.srcID
				req.Topics = append(req.Topics, t)
				i = len(req.Topics) - 1
				byTopic[p.tp.Topic] = i
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p.tp.Partition
			rp.CurrentLeaderEpoch = p.srcEpoch
			rp.FetchOffset = p.next
			rp.PartitionMaxBytes = partBytes
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
			asks[p.tp] = fetchAsk{p: p, offset: p.next, gen: p.gen, maxBytes: p.maxBytes}
			p.fetching = true
		}
		pl.fetching[l] = true
		pl.fetchesIn++
		pl.wg.Add(1)
		go pl.fetch(ctx, l, req, asks)
	}
}

// partitionBytes is the most one partition may fill of a fetch on a lane
// that carries n of the assigned partitions: the configured value, or
// an equal share of the fetch, at least DefaultPartitionMaxBytes and at
// most MaxAutoPartitionBytes. The buffer bound (BufferBytes) still holds.
func (pl *Pipeline) partitionBytes(n int) int32 {
	if !pl.autoPart {
		return pl.cfg.PartitionMaxBytes
	}
	share := pl.cfg.FetchMaxBytes / int32(max(n, 1))
	return min(max(share, DefaultPartitionMaxBytes), MaxAutoPartitionBytes, max(pl.cfg.FetchMaxBytes, DefaultPartitionMaxBytes))
}

// fetch runs one fetch request and hands each partition's data on.
func (pl *Pipeline) fetch(ctx context.Context, l lane, req *kmsg.FetchRequest, asks map[progress.TP]fetchAsk) {
	defer pl.wg.Done()
	defer func() {
		pl.mu.Lock()
		delete(pl.fetching, l)
		pl.fetchesIn--
		for _, a := range asks {
			a.p.fetching = false
		}
		pl.mu.Unlock()
		pl.wake()
	}()
	byID := map[[16]byte]string{}
	for _, t := range req.Topics {
		byID[t.TopicID] = t.Topic
	}
	resp, err := pl.sources[l.client].Broker(int(l.broker)).Request(ctx, req)
	if err == nil {
		if fr := resp.(*kmsg.FetchResponse); fr.ErrorCode != 0 {
			err = kerr.ErrorForCode(fr.ErrorCode)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			pl.cfg.Log.Warn("passthrough: fetch failed; refreshing metadata", "broker", l.broker, "err", err)
			pl.mu.Lock()
			pl.needMeta = true
			for _, a := range asks {
				a.p.retryAt = time.Now().Add(200 * time.Millisecond)
			}
			pl.mu.Unlock()
		}
		return
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		topic := t.Topic
		if topic == "" {
			topic = byID[t.TopicID]
		}
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if a, ok := asks[progress.TP{Topic: topic, Partition: rp.Partition}]; ok {
				pl.fetched(a, rp)
			}
		}
	}
}

// item is one step of a fetched partition: a batch to send, or source
// offsets up to skip handled without sending anything; stop ends the
// partition with a fatal error.
type item struct {
	batch *outBatch
	skip  int64
	stop  error
}

// fetched turns one partition of a fetch response into batches to send.
func (pl *Pipeline) fetched(a fetchAsk, rp *kmsg.FetchResponseTopicPartition) {
	p := a.p
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange):
			if p.gen == a.gen {
				p.outOfRange = true
			}
		case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch),
			errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.UnknownTopicOrPartition),
			errors.Is(err, kerr.LeaderNotAvailable), errors.Is(err, kerr.ReplicaNotAvailable),
			errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.OffsetNotAvailable),
			errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.InconsistentTopicID):
			pl.needMeta = true
			p.retryAt = time.Now().Add(100 * time.Millisecond)
		default:
			pl.cfg.Log.Warn("fetch error", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
			p.retryAt = time.Now().Add(time.Second)
		}
		return
	}
	if len(rp.RecordBatches) == 0 {
		return
	}
	if pl.Paused() {
		return // fetched again from the same offset after Resume
	}
	items, next, bad := pl.split(p, a, rp)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p.gen != a.gen || p.next != a.offset || p.stopped || p.revoked {
		return // the position moved while this fetch was out
	}
	p.next = next
	if bad != nil {
		pl.badBatchLocked(p, next, bad)
	} else {
		p.badBatches = 0
	}
	for _, it := range items {
		switch {
		case it.batch != nil:
			it.batch.advanceTo = -1
			p.queue = append(p.queue, it.batch)
			p.queued += int64(len(it.batch.raw))
			pl.buffered += int64(len(it.batch.raw))
		case it.stop != nil:
			// What came before the cause still goes out.
			p.stopAfter = it.stop
			return
		default:
			pl.skipLocked(p, it.skip)
		}
	}
}

// split parses the batches of one fetched partition: read_committed
// filtering, batches to forward as they are, batches to re-encode. It
// returns the items, the next offset to fetch and, if a batch could not be
// read (a CRC mismatch), why: what came before it still goes out.
func (pl *Pipeline) split(p *partition, a fetchAsk, rp *kmsg.FetchResponseTopicPartition) (items []item, next int64, bad error) {
	filter := newAbortFilter(rp.AbortedTransactions)
	next = a.offset
	for in := rp.RecordBatches; ; {
		raw, rest, ok := nextBatch(in)
		if !ok {
			break
		}
		in = rest
		if magic(raw) < 2 {
			// Message format v0/v1: the entry's offset is that of its
			// last record.
			last := int64(beUint64(raw))
			pl.noteLegacy(p, magic(raw))
			if last < next {
				continue
			}
			items = append(items, pl.reencode(p, raw, next, last, kgo.CompressionCodecType(raw[17]&attrCodec), a.maxBytes)...)
			next = last + 1
			if items[len(items)-1].stop != nil {
				break
			}
			continue
		}
		b, err := parseHeader(raw)
		if err != nil {
			bad = err
			break
		}
		last := lastOffset(&b)
		skip := filter.skip(&b) // sees every batch, in order
		if last < next {
			continue
		}
		if !skip && b.NumRecords > 0 { // MM2's record age: at read time
			p.recordAge.Set(float64(time.Now().UnixMilli() - b.MaxTimestamp))
		}
		switch {
		case skip || b.NumRecords == 0:
			items = append(items, item{skip: last})
		case b.FirstOffset >= next && forwardable(&b) && !pl.cfg.AddOrigin && len(raw) <= a.maxBytes:
			// The batch stays in the fetch response's buffer (franz-go
			// allocates one per response and never reuses it): no copy.
			items = append(items, item{batch: &outBatch{
				raw:   raw[:len(raw):len(raw)],
				first: b.FirstOffset, last: last, count: b.NumRecords, maxTS: b.MaxTimestamp,
			}})
		default:
			items = append(items, pl.reencode(p, raw, next, last, kgo.CompressionCodecType(b.Attributes&attrCodec), a.maxBytes)...)
		}
		next = last + 1
		if items[len(items)-1].stop != nil {
			break
		}
	}
	return items, next, bad
}

func beUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// reencode decodes one source batch (records from offset from on) and
// encodes it again with codec, applying the provenance rules, in batches
// the target accepts. The source offsets up to last are complete after it.
func (pl *Pipeline) reencode(p *partition, raw []byte, from, last int64, codec kgo.CompressionCodecType, maxBytes int) []item {
	recs, err := decode(raw, from, p.tp.Topic, p.tp.Partition, pl.dec)
	if err != nil {
		return []item{{stop: fmt.Errorf("decoding source batch at offset %d: %w", from, err)}}
	}
	kept := recs[:0]
	for _, r := range recs {
		origin, has := datapath.Origin(r.Headers)
		if has && origin == pl.cfg.TargetAlias {
			pl.cfg.Metrics.RecordsLooped.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, p.tp.Topic).Inc()
			continue
		}
		if pl.cfg.AddOrigin && !has {
			r.Headers = append(r.Headers[:len(r.Headers):len(r.Headers)], kgo.RecordHeader{Key: datapath.OriginHeader, Value: []byte(pl.cfg.SourceAlias)})
		}
		kept = append(kept, r)
	}
	encs, err := pl.enc.encode(kept, codec, maxBytes)
	var items []item
	for _, e := range encs {
		items = append(items, item{batch: &outBatch{
			raw: e.raw, first: e.offsets[0], last: e.offsets[len(e.offsets)-1],
			count: int32(len(e.offsets)), offsets: e.offsets, maxTS: maxTimestamp(e.raw),
		}})
	}
	if err != nil {
		return append(items, item{stop: err})
	}
	return append(items, item{skip: last})
}

func maxTimestamp(raw []byte) int64 {
	var b kmsg.RecordBatch
	if b.ReadFrom(raw) != nil {
		return 0
	}
	return b.MaxTimestamp
}

// badBatchLocked backs p off after a source batch at offset failed its
// check: fetched again after 100 ms, doubling up to 30 s, counted and shown
// in status, logged at the first failures and then at every power of two.
func (pl *Pipeline) badBatchLocked(p *partition, offset int64, err error) {
	p.badBatches++
	n := p.badBatches
	p.retryAt = time.Now().Add(min(100*time.Millisecond<<min(n-1, 9), 30*time.Second))
	p.lastErr = fmt.Errorf("source batch at offset %d: %w", offset, err)
	pl.cfg.Metrics.SourceBatchErrors.With(p.labels).Inc()
	if n&(n-1) == 0 {
		pl.cfg.Log.Error("passthrough: unreadable source batch; fetching it again after a pause",
			"topic", p.tp.Topic, "partition", p.tp.Partition, "offset", offset, "failures", n, "retry_in", time.Until(p.retryAt).Round(time.Millisecond).String(), "err", err)
	}
}

package passthrough

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/kafkaerr"
	"github.com/kmirror/kmirror/internal/progress"
)

// sending is one partition's batch in a produce request.
type sending struct {
	p     *partition
	b     *outBatch
	pid   int64
	epoch int16
	seq   int32
	tgtID [16]byte // p.tgtID when built: metadata refreshes change p's
}

// startProduces sends the batches of every partition that are not yet in
// flight, up to partInflight per partition, in produce requests of at most
// one batch per partition each (Kafka's rule), up to brokerInflight
// requests per target broker. A partition's batches go in successive
// requests, which reach the broker in the order they are built. In
// exactly-once mode a request holds the batches of one transaction.
func (pl *Pipeline) startProduces(ctx context.Context) {
	pl.mu.Lock()
	if !pl.eos() && (pl.pid < 0 || pl.needPID) {
		pl.mu.Unlock()
		return
	}
	now := time.Now()
	byKey := map[lineKey][]*building{}
	for p := range pl.sendable {
		if pl.parts[p.tp] != p || (len(p.queue) == 0 && (p.stopAfter == nil || p.stopped)) {
			delete(pl.sendable, p)
			continue
		}
		if p.stopAfter != nil && len(p.queue) == 0 && p.inflight == 0 && !p.stopped {
			pl.stopLocked(p, p.stopAfter)
		}
		if p.stopped || p.revoked || p.blocked || p.inflight >= partInflight || len(p.queue) == 0 || p.tgtLeader < 0 || now.Before(p.retryAt) {
			continue
		}
		pl.fillLocked(p, now, byKey)
	}
	pr := &pl.producer
	pr.mu.Lock()
	for k, reqs := range byKey {
		for _, r := range reqs {
			prev := pr.issued[k.broker]
			next := make(chan struct{})
			pr.issued[k.broker] = next
			pr.producing[k]++
			pr.produceIn++
			pl.wg.Add(1)
			go pl.produce(ctx, k.broker, k.txn, r.ss, prev, next)
		}
	}
	pr.mu.Unlock()
	pl.mu.Unlock()
}

// building is one produce request as startProduces builds it.
type building struct {
	ss   []*sending
	size int
}

// fillLocked gives p's unsent batches, in queue order, each a sequence
// (once) and a place in the requests being built to its target broker
// (byKey), as far as p's and the broker's in-flight limits allow.
func (pl *Pipeline) fillLocked(p *partition, now time.Time, byKey map[lineKey][]*building) {
	pid, epoch, retriesOnly := pl.pid, pl.epoch, false
	if t := p.txn; t != nil {
		if t.pid < 0 || t.failed != nil || !t.live() || !t.added[progress.TP{Topic: p.remote, Partition: p.tp.Partition}] {
			return
		}
		// While a commit waits for the transaction's batches,
		// only those already sent once go again.
		pid, epoch, retriesOnly = t.pid, t.epoch, t.committing
	}
	k := lineKey{p.tgtLeader, p.txn}
	reqs := byKey[k]
	at := 0 // the request this partition's next batch may join
	// One batch at a time while the target may hold no state of
	// this producer for the partition, and after an error until
	// every batch that failed is acknowledged: a re-created or
	// moved partition takes any first sequence, so a later batch
	// sent beside the oldest could land before it.
	limit := partInflight
	if p.ackPID != pid || now.Sub(p.ackAt) > producerStateTTL || p.aloneUntil >= 0 {
		limit = 1
	}
	for _, b := range p.queue {
		if p.inflight >= limit {
			break
		}
		if b.state != stUnsent {
			continue
		}
		if retriesOnly && !b.tried {
			break
		}
		for at < len(reqs) && reqs[at].size > 0 && reqs[at].size+len(b.raw) > produceMaxBytes {
			at++
		}
		if at == len(reqs) {
			if pl.producer.inFlightTo(k)+len(reqs) >= brokerInflight {
				break
			}
			reqs = append(reqs, &building{})
		}
		if !b.seqSet {
			b.seq, b.seqSet = p.seq, true
			p.seq = addSeq(p.seq, b.count)
		}
		b.state, b.tried = stSending, true
		p.inflight++
		if p.txn != nil {
			p.txn.inflight++
		}
		pl.stats.maxInflight = max(pl.stats.maxInflight, p.inflight)
		reqs[at].size += len(b.raw)
		reqs[at].ss = append(reqs[at].ss, &sending{p: p, b: b, pid: pid, epoch: epoch, seq: b.seq, tgtID: p.tgtID})
		at++
	}
	byKey[k] = reqs
}

// lineKey names the produce requests to one target broker in one
// transaction (nil: none): up to brokerInflight of them are in flight. A
// request carries the batches of one transaction, so with slots a
// broker's share of a round trip is spread over as many requests.
type lineKey struct {
	broker int32
	txn    *txnState
}

// addSeq advances a sequence number by n; sequences wrap to 0 after the
// largest int32, as Kafka's do.
func addSeq(seq, n int32) int32 {
	s := int64(seq) + int64(n)
	if s > 1<<31-1 {
		s -= 1 << 31
	}
	return int32(s)
}

// produceRequest is a produce request whose serialization grows the
// destination once to the request's size, instead of letting each
// appended batch grow it by doubling and copying. It also reports when
// franz-go serializes it: then it is next on the broker's connection.
// Only the type differs for franz-go, which then leaves acks as set here
// (always all: the producer is idempotent).
type produceRequest struct {
	*kmsg.ProduceRequest
	size   int
	queued func()
	max    int16 // the highest version to send
}

func (r *produceRequest) MaxVersion() int16 { return min(r.max, r.ProduceRequest.MaxVersion()) }

func (r *produceRequest) AppendTo(dst []byte) []byte {
	r.queued()
	if cap(dst)-len(dst) < r.size {
		dst = slices.Grow(dst, r.size)
	}
	return r.ProduceRequest.AppendTo(dst)
}

// produce sends one request of batches to a target broker, in transaction
// t (nil: none), and handles the answer of each partition. It issues the
// request once the one issued before it to the broker is queued (prev is
// closed), and closes next once its own is.
func (pl *Pipeline) produce(ctx context.Context, broker int32, t *txnState, ss []*sending, prev <-chan struct{}, next chan struct{}) {
	defer pl.wg.Done()
	var once sync.Once
	queued := func() { once.Do(func() { close(next) }) }
	defer queued()
	n := 0
	for _, sd := range ss {
		n += len(sd.b.raw)
	}
	req := buildProduce(t, ss)
	if prev != nil {
		<-prev // closed at the latest when that request returns
	}
	_ = pl.cfg.Throttle.Wait(ctx, n) // on ctx's end the request fails and is retried
	req.queued = queued
	resp, err := pl.cfg.Target.Broker(int(broker)).Request(ctx, req)
	queued()
	var results map[progress.TP]*kmsg.ProduceResponseTopicPartition
	if err == nil {
		results = produceResults(req.ProduceRequest, resp.(*kmsg.ProduceResponse))
	}
	for _, s := range ss {
		rerr := err
		var rp *kmsg.ProduceResponseTopicPartition
		if rerr == nil {
			rp = results[progress.TP{Topic: s.p.remote, Partition: s.p.tp.Partition}]
			if rp == nil {
				rerr = errors.New("partition missing from the produce response")
			} else {
				rerr = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
		pl.produced(s, rp, rerr)
	}
	pr := &pl.producer
	pr.mu.Lock()
	pr.producing[lineKey{broker, t}]--
	pr.produceIn--
	pr.mu.Unlock()
	pl.wake()
}

// buildProduce stamps each batch of ss with its producer fields and
// returns the request that carries them, in transaction t (nil: none).
// Only this request touches the batches while it is in flight.
func buildProduce(t *txnState, ss []*sending) *produceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	maxV := req.MaxVersion()
	if t != nil {
		req.TransactionID = &t.id
		maxV = maxProduceTV1
	}
	size := 64
	byTopic := map[string]int{}
	for _, s := range ss {
		if err := stamp(s.b.raw, s.pid, s.epoch, s.seq, t != nil); err != nil {
			panic(err) // the batch was parsed before it was queued
		}
		i, ok := byTopic[s.p.remote]
		if !ok {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = s.p.remote, s.tgtID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[s.p.remote] = i
			size += 32 + len(t.Topic)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = s.p.tp.Partition
		rp.Records = s.b.raw
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		size += 16 + len(s.b.raw)
	}
	return &produceRequest{ProduceRequest: req, size: size, max: maxV}
}

// produceResults maps each partition of pr, the answer to req, by name
// (a topic answered by ID only gets its name from req).
func produceResults(req *kmsg.ProduceRequest, pr *kmsg.ProduceResponse) map[progress.TP]*kmsg.ProduceResponseTopicPartition {
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	results := make(map[progress.TP]*kmsg.ProduceResponseTopicPartition, n)
	for i := range pr.Topics {
		t := &pr.Topics[i]
		name := t.Topic
		if name == "" {
			for _, rt := range req.Topics {
				if rt.TopicID == t.TopicID {
					name = rt.Topic
				}
			}
		}
		for j := range t.Partitions {
			results[progress.TP{Topic: name, Partition: t.Partitions[j].Partition}] = &t.Partitions[j]
		}
	}
	return results
}

// pidErrs mean the target lost or refused this producer's state: a new
// producer ID starts every partition's sequence at 0 again. The first two
// mean that only on the oldest unacknowledged batch of a partition: on a
// later one they mean an earlier batch did not arrive (yet).
var pidErrs = []error{kerr.OutOfOrderSequenceNumber, kerr.UnknownProducerID, kerr.InvalidProducerEpoch, kerr.InvalidProducerIDMapping, kerr.ProducerFenced}

// headOnlyPIDErrs are the pidErrs that count only on the oldest batch.
var headOnlyPIDErrs = pidErrs[:2]

// metaErrs mean the partition's leader moved.
var metaErrs = []error{kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.UnknownTopicOrPartition, kerr.FencedLeaderEpoch, kerr.KafkaStorageError, kerr.UnknownTopicID, kerr.InconsistentTopicID}

// produced handles the target's answer for one partition's batch.
// Acknowledgements may arrive out of order; progress, metrics and offset
// syncs follow the queue's order. An error on a batch that is not the
// oldest unacknowledged one only blocks the partition: once all its
// batches in flight have answered, the unacknowledged ones are sent again
// with the same sequences, and the target answers those it already has as
// duplicates.
//
// Locks: pl.mu for the answer, released; then p.syncMu and inside it
// pl.mu briefly (handSyncs); then pl.mu again (answeredLocked).
func (pl *Pipeline) produced(s *sending, rp *kmsg.ProduceResponseTopicPartition, err error) {
	p, b := s.p, s.b
	var done []*outBatch
	var gone string // the remote topic the target does not know
	pl.mu.Lock()
	idx := slices.Index(p.queue, b)
	switch {
	case idx < 0 || b.state != stSending:
		// The partition was stopped meanwhile.
	case err == nil || errors.Is(err, kerr.DuplicateSequenceNumber):
		done = pl.ackedLocked(s, rp, err)
	case p.txn != nil && kafkaerr.IsAny(err, pidErrs) && (idx == 0 || !kafkaerr.IsAny(err, headOnlyPIDErrs)):
		// The target lost or refused this producer's state: the
		// transaction is aborted and its partitions go back to their
		// committed progress.
		b.state = stUnsent
		p.blocked = true
		p.lastErr = err
		failTxnLocked(p.txn, fmt.Errorf("partition %s: %w", p.tp, err))
	case idx == 0 && kafkaerr.Classify(err) == kafkaerr.TooLarge:
		pl.tooLargeLocked(p, b, err)
	case idx == 0 && kafkaerr.Classify(err) == kafkaerr.Fatal:
		b.state = stUnsent
		pl.stopLocked(p, err)
	default:
		gone = pl.retryLocked(p, b, idx, rp, err)
	}
	syncs := len(p.syncq) > 0
	pl.mu.Unlock()
	if gone != "" && pl.cfg.TopicGone != nil {
		pl.cfg.TopicGone(gone)
	}
	if len(done) > 0 {
		pl.countAcked(p, done)
	}
	if syncs {
		pl.handSyncs(p)
	}
	pl.mu.Lock()
	pl.answeredLocked(p)
	pl.mu.Unlock()
}

// ackedLocked marks s's batch acknowledged (err is nil or a duplicate)
// and pops the acknowledged batches at the head of the queue: each moves
// Done and queues its offset syncs. It returns the popped batches.
func (pl *Pipeline) ackedLocked(s *sending, rp *kmsg.ProduceResponseTopicPartition, err error) []*outBatch {
	p, b := s.p, s.b
	b.state, b.dstBase = stAcked, -1
	if (s.pid == pl.pid || (p.txn != nil && s.pid == p.txn.pid)) && s.tgtID == p.tgtID {
		p.ackPID, p.ackAt = s.pid, time.Now()
	}
	if err == nil && rp.BaseOffset >= 0 {
		b.dstBase = rp.BaseOffset
	}
	var done []*outBatch
	for len(p.queue) > 0 && p.queue[0].state == stAcked {
		h := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.queued -= int64(len(h.raw))
		pl.buffered -= int64(len(h.raw))
		pl.touchLocked(p)
		p.Done = max(p.Done, h.last, h.advanceTo)
		pl.moved[p] = struct{}{}
		p.retries, p.lastErr = 0, nil
		if h.last >= p.aloneUntil {
			p.aloneUntil = -1
		}
		done = append(done, h)
		if pl.cfg.Syncs != nil && h.dstBase >= 0 {
			p.syncq = append(p.syncq, syncAck{b: h, base: h.dstBase})
		}
	}
	return done
}

// tooLargeLocked handles the target refusing b, the oldest batch, as too
// large: a single record stops the partition; otherwise b's records go
// one per batch, to copy those before a large one and stop at it.
func (pl *Pipeline) tooLargeLocked(p *partition, b *outBatch, err error) {
	b.state = stUnsent
	if b.count == 1 {
		pl.stopLocked(p, fmt.Errorf("record at source offset %d: %w", b.first, err))
		return
	}
	singles, derr := pl.singles(p, b)
	if derr != nil {
		pl.stopLocked(p, derr)
		return
	}
	// Nothing after b was accepted: the sequences go again from b's.
	p.blocked, p.renumber, p.seqFrom = true, true, b.seq
	p.queue = append(singles, p.queue[1:]...)
	for _, n := range singles {
		p.queued += int64(len(n.raw))
		pl.buffered += int64(len(n.raw))
	}
	p.queued -= int64(len(b.raw))
	pl.buffered -= int64(len(b.raw))
	pl.touchLocked(p)
	pl.cfg.Log.Warn("target refused a batch as too large; sending its records one at a time", "topic", p.tp.Topic, "partition", p.tp.Partition, "from", b.first, "err", err)
}

// retryLocked handles a retriable error on b, at index idx of the queue,
// or one that counts only on the oldest batch: the partition is blocked
// until its batches in flight have answered, then sends again, one batch
// at a time up to b (aloneUntil). It returns the remote topic if the
// target does not know it.
func (pl *Pipeline) retryLocked(p *partition, b *outBatch, idx int, rp *kmsg.ProduceResponseTopicPartition, err error) (gone string) {
	b.state = stUnsent
	p.blocked = true
	p.aloneUntil = max(p.aloneUntil, b.last)
	if idx > 0 {
		pl.stats.laterErrs++
	}
	if kafkaerr.IsAny(err, pidErrs) && (idx == 0 || !kafkaerr.IsAny(err, headOnlyPIDErrs)) {
		pl.needPID = true
	}
	if kafkaerr.IsAny(err, metaErrs) || rp == nil {
		pl.needMeta.Store(true)
	}
	if kafkaerr.TopicGone(err) {
		gone = p.remote
	}
	p.lastErr = err
	if idx == 0 || !kafkaerr.IsAny(err, headOnlyPIDErrs) {
		p.retries++
		p.retryAt = time.Now().Add(produceRetry.Delay(p.retries))
		pl.touchLocked(p)
		if p.retries == 1 || p.retries%20 == 0 {
			fatal := false
			pl.cfg.Metrics.PartitionErrors.WithLabelValues(pl.cfg.SourceAlias, pl.cfg.TargetAlias, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)), strconv.FormatBool(fatal)).Inc()
			pl.Logs.Warn(pl.cfg.Log, "produce failed|"+err.Error(), "passthrough: produce failed; retrying from the oldest unacknowledged batch", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", b.first, "retries", p.retries, "err", err)
		}
	}
	return gone
}

// produceRetry is the wait before a partition's failed batches are sent
// again, after its n-th failure in a row.
var produceRetry = backoff.Policy{First: 100 * time.Millisecond, Max: time.Second}

// countAcked counts the records, value bytes and latency of batches
// popped acknowledged, without pl.mu.
func (pl *Pipeline) countAcked(p *partition, done []*outBatch) {
	now := time.Now().UnixMilli()
	var recs, bytes int64
	var maxTS int64
	for _, h := range done {
		recs += int64(h.count)
		// MM2's byte-count: value bytes; a sample stops with the Pipeline.
		bytes += p.values.size(h.raw, stoppable{pl.stopping, pl.dec})
		maxTS = max(maxTS, h.maxTS)
	}
	pl.Acked(recs)
	p.recordCount.Add(float64(recs))
	p.byteCount.Add(float64(bytes))
	p.latency.Set(float64(now - maxTS))
}

// handSyncs hands p's queued offset syncs to the writer, one per record.
// It takes p.syncMu, then pl.mu only to take the queue: whoever takes it
// under syncMu hands it on in order.
func (pl *Pipeline) handSyncs(p *partition) {
	p.syncMu.Lock()
	pl.mu.Lock()
	q := p.syncq
	p.syncq = nil
	pl.mu.Unlock()
	for _, a := range q {
		for i := range int(a.b.count) {
			pl.cfg.Syncs.Acked(p.tp.Topic, p.tp.Partition, a.b.offset(i), a.base+int64(i))
		}
	}
	p.syncMu.Unlock()
}

// answeredLocked notes that one of p's batches in flight has its answer;
// when the last one has, a blocked partition may send again (with
// sequences from seqFrom after a too-large split).
func (pl *Pipeline) answeredLocked(p *partition) {
	p.inflight--
	if p.txn != nil {
		p.txn.inflight--
	}
	if p.inflight == 0 && p.blocked {
		p.blocked = false
		if p.renumber {
			p.renumber = false
			p.seq = p.seqFrom
			for _, q := range p.queue {
				q.seqSet = false
			}
		}
	}
}

// singles re-encodes the records of b one per batch.
func (pl *Pipeline) singles(p *partition, b *outBatch) ([]*outBatch, error) {
	recs, err := decode(b.raw, 0, p.tp.Topic, p.tp.Partition, pl.dec)
	if err != nil {
		return nil, err
	}
	if len(recs) != int(b.count) {
		return nil, fmt.Errorf("batch at source offset %d holds %d records, decoded %d", b.first, b.count, len(recs))
	}
	codec := kgo.CompressionCodecType(b.raw[attrsAt+1] & attrCodec)
	out := make([]*outBatch, 0, len(recs))
	for i, r := range recs {
		raw, err := pl.enc.batch([]*kgo.Record{r}, codec)
		if err != nil {
			return nil, err
		}
		src := b.offset(i)
		out = append(out, &outBatch{raw: raw, first: src, last: src, count: 1, offsets: []int64{src}, maxTS: r.Timestamp.UnixMilli(), advanceTo: -1})
	}
	out[len(out)-1].advanceTo = max(b.last, b.advanceTo)
	return out, nil
}

package passthrough

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/kafkaerr"
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

// fetchPlan is one fetch as built: the partitions listed in it, those it
// has the broker forget, and whether it closes the session.
type fetchPlan struct {
	epoch  int32
	listed map[progress.TP]sessPart
	forgot []progress.TP
	close  bool
}

// fetcher is the fetch side: the clients of its lanes, the lanes' fetch
// sessions and the partitions a fetch pass looks at. Its mu guards its
// fields, every laneState and each partition's member and wantIn. It is
// taken after pl.mu or alone, and no other lock is taken under it: a
// fetch's answer brings the session up to date under mu only. Methods of
// fetcher named ...Locked need mu held; Pipeline methods that read both a
// partition's position and its lane (settleLocked, buildFetchLocked) need
// pl.mu and then mu.
type fetcher struct {
	mu        sync.Mutex
	sources   []*kgo.Client // Source, then MoreSources: one per lane; never changes
	lanes     map[lane]*laneState
	sessOf    map[progress.TP]*laneState // the lane whose fetch session holds a partition
	srcNames  map[[16]byte]string        // source topic IDs
	fetchesIn int
	// The partitions a fetch pass looks at (session.go).
	dirty, waiting map[*partition]struct{}
	stats          fetchStats

	// Set by New, read only.
	maxBytes, partMaxBytes int32
	autoPart               bool // partMaxBytes adapts to the partitions per fetch
	maxWait                time.Duration
	log                    *slog.Logger
}

// fetchStats count what tests want to know happened on the fetch side.
type fetchStats struct {
	incremental int // fetches answered in a session (epoch > 0)
	forgotten   int // partitions fetches had the broker forget
	resets      int // fetch sessions reset after an error
}

// startFetches sends one fetch on every lane that has a partition with
// room in its buffer (or a session to update) and no fetch in flight.
func (pl *Pipeline) startFetches(ctx context.Context) {
	if pl.Paused() {
		return
	}
	f := &pl.fetcher
	pl.mu.Lock()
	defer pl.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	pl.settleLocked(now)
	for _, ls := range f.lanes {
		if ls.fetching || now.Before(ls.retryAt) || (len(ls.want) == 0 && len(ls.sess) == 0) {
			continue
		}
		if pl.buffered > 0 && pl.buffered+int64(f.fetchesIn+1)*int64(f.maxBytes) > pl.cfg.BufferBytes {
			return
		}
		req, plan := pl.buildFetchLocked(ls)
		if req == nil {
			continue
		}
		ls.fetching = true
		f.fetchesIn++
		pl.wg.Add(1)
		go pl.fetch(ctx, ls, req, plan)
	}
}

// buildFetchLocked returns the next fetch of ls, or nil if there is
// nothing to ask. Without a session (a new one, or a broker without
// them) the fetch lists every partition that may fetch; in a session
// only those that changed. pl.mu and fetcher.mu are held.
func (pl *Pipeline) buildFetchLocked(ls *laneState) (*kmsg.FetchRequest, *fetchPlan) {
	f := &pl.fetcher
	for tp := range ls.pending {
		// A partition whose topic ID changed is keyed apart in the
		// broker's session: the session starts over.
		if p, s := ls.want[tp], ls.sess[tp]; p != nil && s.p != nil && s.topicID != p.srcID {
			f.resetLocked(ls)
			break
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(f.fetchWait(ls).Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = f.maxBytes
	req.IsolationLevel = 1 // read_committed
	if !ls.noSess {
		req.SessionID, req.SessionEpoch = ls.id, ls.epoch
	}
	fb := &fetchBuild{f: f, ls: ls, req: req, plan: &fetchPlan{epoch: req.SessionEpoch, listed: map[progress.TP]sessPart{}},
		byTopic: map[string]int{}, forgot: map[string]int{}}
	if ls.noSess || ls.epoch == 0 {
		clear(ls.pending)
		for tp, p := range ls.want {
			if !fb.list(p) {
				ls.pending[tp] = struct{}{}
			}
		}
		if len(fb.plan.listed) == 0 {
			return nil, nil
		}
		return req, fb.plan
	}
	return fb.incremental()
}

// fetchBuild is one fetch request of a lane being built under pl.mu and
// fetcher.mu.
type fetchBuild struct {
	f       *fetcher
	ls      *laneState
	req     *kmsg.FetchRequest
	plan    *fetchPlan
	byTopic map[string]int // index in req.Topics
	forgot  map[string]int // index in req.ForgottenTopics
}

// list adds p at its position to the fetch, unless p is still in the
// session of the lane it left; it reports whether p was listed.
func (fb *fetchBuild) list(p *partition) bool {
	if o := fb.f.sessOf[p.tp]; o != nil && o != fb.ls {
		return false // still in the session of the lane it left
	}
	req := fb.req
	e := fb.ls.entry(p)
	i, ok := fb.byTopic[p.tp.Topic]
	if !ok {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = p.tp.Topic, p.srcID
		req.Topics = append(req.Topics, t)
		i = len(req.Topics) - 1
		fb.byTopic[p.tp.Topic] = i
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p.tp.Partition
	rp.CurrentLeaderEpoch = e.epoch
	rp.FetchOffset = e.offset
	rp.PartitionMaxBytes = e.maxBytes
	req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	fb.plan.listed[p.tp] = e
	fb.f.sessOf[p.tp] = fb.ls
	return true
}

// forget has the broker drop tp, held in the session as s.
func (fb *fetchBuild) forget(tp progress.TP, s sessPart) {
	req := fb.req
	i, ok := fb.forgot[tp.Topic]
	if !ok {
		t := kmsg.NewFetchRequestForgottenTopic()
		t.Topic, t.TopicID = tp.Topic, s.topicID
		req.ForgottenTopics = append(req.ForgottenTopics, t)
		i = len(req.ForgottenTopics) - 1
		fb.forgot[tp.Topic] = i
	}
	req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
	fb.plan.forgot = append(fb.plan.forgot, tp)
}

// incremental builds a fetch in the lane's session: the pending
// partitions that changed are listed, those that left are forgotten. A
// session left with no partition and no member is closed; one with no
// change and partitions to come back sends nothing.
func (fb *fetchBuild) incremental() (*kmsg.FetchRequest, *fetchPlan) {
	ls := fb.ls
	kept := len(ls.sess)
	for tp := range ls.pending {
		p := ls.want[tp]
		s, in := ls.sess[tp]
		switch {
		case p != nil && in && s == ls.entry(p):
		case p != nil:
			if !fb.list(p) {
				continue // stays pending
			}
			if !in {
				kept++
			}
		case in:
			fb.forget(tp, s)
			kept--
		}
		delete(ls.pending, tp)
	}
	switch {
	case kept > 0:
	case len(ls.members) == 0:
		// The lane carries no partition any more: close the session.
		for tp := range fb.plan.listed {
			delete(fb.f.sessOf, tp)
		}
		fb.req.Topics, fb.req.ForgottenTopics = nil, nil
		fb.req.SessionEpoch, fb.req.MaxWaitMillis = -1, 0
		fb.plan = &fetchPlan{epoch: -1, close: true}
	case len(fb.plan.listed) == 0 && len(fb.plan.forgot) == 0:
		return nil, nil // an empty session, kept for the partitions to come back
	}
	return fb.req, fb.plan
}

// partitionBytes is the most one partition may fill of a fetch on a lane
// that carries n of the assigned partitions: the configured value, or
// an equal share of the fetch, at least DefaultPartitionMaxBytes and at
// most MaxAutoPartitionBytes. The buffer bound (BufferBytes) still holds.
func (f *fetcher) partitionBytes(n int) int32 {
	if !f.autoPart {
		return f.partMaxBytes
	}
	share := f.maxBytes / int32(max(n, 1))
	return min(max(share, DefaultPartitionMaxBytes), MaxAutoPartitionBytes, max(f.maxBytes, DefaultPartitionMaxBytes))
}

// sessionErrs mean the broker lost or refused the fetch session.
var sessionErrs = []error{kerr.FetchSessionIDNotFound, kerr.InvalidFetchSessionEpoch, kerr.FetchSessionTopicIDError, kerr.InconsistentTopicID}

// fetch runs one fetch request, brings the lane's session up to date
// (fetcher.mu only) and hands each partition's data on.
func (pl *Pipeline) fetch(ctx context.Context, ls *laneState, req *kmsg.FetchRequest, plan *fetchPlan) {
	f := &pl.fetcher
	defer pl.wg.Done()
	defer func() {
		f.mu.Lock()
		ls.fetching = false
		f.fetchesIn--
		f.mu.Unlock()
		pl.wake()
	}()
	resp, err := f.sources[ls.l.client].Broker(int(ls.l.broker)).Request(ctx, req)
	var fr *kmsg.FetchResponse
	if err == nil {
		fr = resp.(*kmsg.FetchResponse)
		err = kerr.ErrorForCode(fr.ErrorCode)
	}
	f.mu.Lock()
	quiet := ls.quiet
	ls.quiet = 0 // but after an empty answer in a session, below
	if err != nil {
		warn := f.failedLocked(ctx, ls, plan, err)
		f.mu.Unlock()
		if warn {
			pl.needMeta.Store(true)
			pl.Logs.Warn(pl.cfg.Log, "fetch failed|"+err.Error(), "passthrough: fetch failed; refreshing metadata", "broker", ls.l.broker, "err", err)
		}
		return
	}
	gots := f.answeredLocked(ls, plan, fr)
	f.stats.forgotten += len(plan.forgot)
	f.sessionAnsweredLocked(ls, plan, fr, quiet, len(gots))
	f.mu.Unlock()
	pl.handOn(ctx, gots)
}

// failedLocked handles a fetch that failed as a whole: the lane's
// session starts over; a broker without room for sessions is fetched
// without one from now on. Other errors pause the lane briefly and
// report true: the caller warns and refreshes metadata.
func (f *fetcher) failedLocked(ctx context.Context, ls *laneState, plan *fetchPlan, err error) bool {
	for tp := range plan.listed {
		if f.sessOf[tp] == ls {
			delete(f.sessOf, tp)
		}
	}
	f.resetLocked(ls)
	f.stats.resets++
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, kerr.FetchSessionIDNotFound) && plan.epoch == 0:
		// The broker has no room for a new session.
		ls.noSess = true
		f.log.Info("passthrough: the source broker has no fetch session for this flow; fetching without one", "broker", ls.l.broker, "err", err)
	case kafkaerr.IsAny(err, sessionErrs[:2]):
		f.log.Debug("passthrough: fetch session reset", "broker", ls.l.broker, "err", err)
	default:
		ls.retryAt = time.Now().Add(200 * time.Millisecond)
		return true
	}
	return false
}

// fetchedPart is one partition of a fetch answer and what the broker
// fetched it from.
type fetchedPart struct {
	a  fetchAsk
	rp *kmsg.FetchResponseTopicPartition
}

// answeredLocked returns the partitions of fr with what the broker
// fetched each from: what this fetch listed, or else what the session
// held. A partition known under another topic ID is left out.
func (f *fetcher) answeredLocked(ls *laneState, plan *fetchPlan, fr *kmsg.FetchResponse) []fetchedPart {
	var gots []fetchedPart
	for i := range fr.Topics {
		t := &fr.Topics[i]
		topic := t.Topic
		if topic == "" {
			topic = f.srcNames[t.TopicID]
		}
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			tp := progress.TP{Topic: topic, Partition: rp.Partition}
			e, ok := plan.listed[tp]
			if !ok {
				e, ok = ls.sess[tp]
			}
			if !ok || (t.TopicID != [16]byte{} && e.topicID != [16]byte{} && t.TopicID != e.topicID) {
				continue
			}
			gots = append(gots, fetchedPart{fetchAsk{p: e.p, offset: e.offset, gen: e.gen, maxBytes: int(e.p.maxBytes.Load())}, rp})
		}
	}
	return gots
}

// sessionAnsweredLocked brings the lane's session up to date after a
// fetch answered with n partitions (quiet: the lane's empty answers in a
// row before it).
func (f *fetcher) sessionAnsweredLocked(ls *laneState, plan *fetchPlan, fr *kmsg.FetchResponse, quiet, n int) {
	switch {
	case plan.close || ls.noSess || fr.Version < 7 || fr.SessionID == 0:
		// No session on the broker (it also ends one that has no
		// partition left): the next fetch lists every partition again
		// (and asks for a session, if it may).
		for tp := range plan.listed {
			if f.sessOf[tp] == ls {
				delete(f.sessOf, tp)
			}
		}
		f.resetLocked(ls)
		ls.id = 0
		if fr.Version < 7 && !ls.noSess {
			ls.noSess = true
			f.log.Debug("passthrough: the source broker has no fetch sessions", "broker", ls.l.broker, "version", fr.Version)
		}
	default:
		if plan.epoch > 0 {
			f.stats.incremental++
			if n == 0 {
				ls.quiet = min(quiet+1, idleFetches)
			}
		}
		ls.id, ls.epoch = fr.SessionID, nextEpoch(plan.epoch)
		for tp, e := range plan.listed {
			ls.sess[tp] = e
		}
		for _, tp := range plan.forgot {
			delete(ls.sess, tp)
			if f.sessOf[tp] == ls {
				delete(f.sessOf, tp)
			}
		}
	}
}

// handOn hands each fetched partition to fetched. Re-encoding costs CPU:
// then the partitions of one answer are handled side by side, one per
// core (each keeps its own order).
func (pl *Pipeline) handOn(ctx context.Context, gots []fetchedPart) {
	if len(gots) < 2 || !pl.reencodes() {
		for _, g := range gots {
			pl.fetched(ctx, g.a, g.rp)
		}
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, g := range gots {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl.fetched(ctx, g.a, g.rp)
			<-sem
		}()
	}
	wg.Wait()
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
// Once ctx ends (the Pipeline stops) a batch being decompressed is given
// up and the answer dropped: the next start fetches it again.
func (pl *Pipeline) fetched(ctx context.Context, a fetchAsk, rp *kmsg.FetchResponseTopicPartition) {
	p := a.p
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		switch {
		case errors.Is(err, kerr.OffsetOutOfRange):
			if p.gen == a.gen {
				p.outOfRange = true
				pl.oor[p] = struct{}{}
			}
		case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch),
			errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.UnknownTopicOrPartition),
			errors.Is(err, kerr.LeaderNotAvailable), errors.Is(err, kerr.ReplicaNotAvailable),
			errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.OffsetNotAvailable),
			errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.InconsistentTopicID):
			pl.needMeta.Store(true)
			p.retryAt = time.Now().Add(100 * time.Millisecond)
		default:
			pl.Logs.Warn(pl.cfg.Log, "fetch error|"+err.Error(), "fetch error", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
			p.retryAt = time.Now().Add(time.Second)
		}
		pl.touchLocked(p)
		return
	}
	if len(rp.RecordBatches) == 0 {
		return
	}
	if pl.Paused() {
		return // fetched again from the same offset after Resume
	}
	items, next, bad := pl.split(ctx, p, a, rp)
	if ctx.Err() != nil {
		return // stopping: a decompression may have been cut short
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p.gen != a.gen || p.next != a.offset || p.stopped || p.revoked {
		return // the position moved while this fetch was out
	}
	p.next = next
	pl.touchLocked(p)
	pl.sendable[p] = struct{}{}
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
// read (a CRC mismatch), why: what came before it still goes out. A
// decompression gives up when ctx ends.
func (pl *Pipeline) split(ctx context.Context, p *partition, a fetchAsk, rp *kmsg.FetchResponseTopicPartition) (items []item, next int64, bad error) {
	filter := newAbortFilter(rp.AbortedTransactions)
	next = a.offset
	for in := rp.RecordBatches; ; {
		raw, rest, ok := nextBatch(in)
		if !ok {
			break
		}
		in = rest
		if err := checkEntry(raw); err != nil {
			bad = err
			break
		}
		if magic(raw) < 2 {
			// Message format v0/v1: the entry's offset is that of its
			// last record.
			last := int64(beUint64(raw))
			pl.noteLegacy(p, magic(raw))
			if last < next {
				continue
			}
			items = append(items, pl.reencode(ctx, p, raw, next, last, kgo.CompressionCodecType(raw[17]&attrCodec), a.maxBytes)...)
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
		case b.FirstOffset >= next && forwardable(&b) && pl.forwards(b.Attributes) && len(raw) <= a.maxBytes:
			// The batch stays in the fetch response's buffer (franz-go
			// allocates one per response and never reuses it): no copy.
			items = append(items, item{batch: &outBatch{
				raw:   raw[:len(raw):len(raw)],
				first: b.FirstOffset, last: last, count: b.NumRecords, maxTS: b.MaxTimestamp,
			}})
		default:
			items = append(items, pl.reencode(ctx, p, raw, next, last, kgo.CompressionCodecType(b.Attributes&attrCodec), a.maxBytes)...)
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
// encodes it again, with codec or the flow's target codec (encoderFor),
// applying the provenance rules, in batches the target accepts. The source
// offsets up to last are complete after it. Decompressing gives up when
// ctx ends (stoppable).
func (pl *Pipeline) reencode(ctx context.Context, p *partition, raw []byte, from, last int64, codec kgo.CompressionCodecType, maxBytes int) []item {
	recs, err := decode(raw, from, p.tp.Topic, p.tp.Partition, stoppable{ctx, pl.dec})
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
	enc, codec := pl.encoderFor(codec)
	encs, err := enc.encode(kept, codec, maxBytes)
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

// badBatchBackoff is how long a partition waits before it fetches a batch
// that failed its check again.
var badBatchBackoff = backoff.Policy{First: 100 * time.Millisecond, Max: 30 * time.Second}

// badBatchLocked backs p off after a source batch at offset failed its
// check: fetched again after 100 ms, doubling up to 30 s, counted and shown
// in status, logged as pl.Logs lets (the first failure, then at every power
// of two of the failures and at least once a minute, with counts).
func (pl *Pipeline) badBatchLocked(p *partition, offset int64, err error) {
	p.badBatches++
	n := p.badBatches
	p.retryAt = time.Now().Add(badBatchBackoff.Delay(n))
	p.lastErr = fmt.Errorf("source batch at offset %d: %w", offset, err)
	pl.cfg.Metrics.SourceBatchErrors.With(p.labels).Inc()
	pl.Logs.Log(pl.cfg.Log, slog.LevelError, "unreadable source batch|"+p.tp.Topic+"|"+strconv.Itoa(int(p.tp.Partition)),
		"passthrough: unreadable source batch; fetching it again after a pause",
		"topic", p.tp.Topic, "partition", p.tp.Partition, "offset", offset, "failures", n, "retry_in", time.Until(p.retryAt).Round(time.Millisecond).String(), "err", err)
}

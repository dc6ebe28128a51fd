package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const recordCount = "kafka_connect_mirror_source_connector_record_count"

type tp struct {
	topic     string
	partition int32
}

// httpGet returns the body of a GET, or an error for a non-200 answer.
func httpGet(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// partState is a partition as /status shows it.
type partState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	State     string `json:"state"`
	Lag       int64  `json:"lag"`
	Error     string `json:"error"`
}

// statuses merges the flow's partitions from every live worker's /status;
// a partition shown by several workers keeps its worst state.
func (r *Run) statuses() (map[tp]partState, error) {
	out := map[tp]partState{}
	for _, w := range r.workers {
		if !w.running() { // crashed: reported already
			continue
		}
		body, err := httpGet("http://" + w.rest + "/status")
		if err != nil {
			return nil, fmt.Errorf("%v: %v", w, err)
		}
		var st struct {
			Flows []struct {
				Name       string      `json:"name"`
				Partitions []partState `json:"partitions"`
			} `json:"flows"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return nil, fmt.Errorf("%v /status: %v", w, err)
		}
		for _, f := range st.Flows {
			if f.Name != flowName {
				continue
			}
			for _, p := range f.Partitions {
				k := tp{p.Topic, p.Partition}
				if old, ok := out[k]; !ok || old.State == "running" {
					out[k] = p
				}
			}
		}
	}
	return out, nil
}

// sourcePartitions lists every partition of the source topics.
func (r *Run) sourcePartitions(ctx context.Context) ([]tp, error) {
	var topics []string
	for _, ts := range initialTopics() {
		topics = append(topics, ts.name)
	}
	topics = append(topics, topicLate)
	td, err := r.srcAdm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var out []tp
	for _, t := range td.Sorted() {
		if t.Err != nil {
			return nil, fmt.Errorf("%s: %v", t.Topic, t.Err)
		}
		for p := range t.Partitions {
			out = append(out, tp{t.Topic, p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out, nil
}

// allRunning reports whether every source partition is running with lag 0
// on some worker; otherwise it says which is not.
func (r *Run) allRunning(ctx context.Context) (bool, string) {
	parts, err := r.sourcePartitions(ctx)
	if err != nil {
		return false, err.Error()
	}
	st, err := r.statuses()
	if err != nil {
		return false, err.Error()
	}
	for _, p := range parts {
		s, ok := st[p]
		if !ok {
			return false, fmt.Sprintf("%s[%d] not in any worker's /status", p.topic, p.partition)
		}
		if s.State != "running" || s.Lag != 0 {
			return false, fmt.Sprintf("%s[%d] %s, lag %d %s", p.topic, p.partition, s.State, s.Lag, s.Error)
		}
	}
	return true, ""
}

// waitFor polls cond every second until it holds or timeout passes; it
// returns the last reason cond gave.
func waitFor(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok || time.Now().After(deadline) {
			return ok, why
		}
		time.Sleep(time.Second)
	}
}

// recordCounts sums kmirror's record-count per remote partition over the
// live workers.
func (r *Run) recordCounts() (map[tp]float64, error) {
	out := map[tp]float64{}
	for _, w := range r.workers {
		if !w.running() {
			continue
		}
		body, err := httpGet("http://" + w.metrics + "/metrics")
		if err != nil {
			return nil, fmt.Errorf("%v: %v", w, err)
		}
		for labels, v := range metricSeries(body, recordCount) {
			p, _ := strconv.Atoi(label(labels, "partition"))
			out[tp{label(labels, "topic"), int32(p)}] += v
		}
	}
	return out, nil
}

// stableCounts waits until the record counts stop moving (3 s apart).
func (r *Run) stableCounts() (map[tp]float64, error) {
	var prev map[tp]float64
	for range 60 {
		cur, err := r.recordCounts()
		if err != nil {
			return nil, err
		}
		if prev != nil && fmt.Sprint(prev) == fmt.Sprint(cur) {
			return cur, nil
		}
		prev = cur
		time.Sleep(3 * time.Second)
	}
	return nil, fmt.Errorf("record counts still moving after 3 minutes")
}

// burst writes n records to every partition of every source topic.
func (r *Run) burst(ctx context.Context, n int) error {
	parts, err := r.sourcePartitions(ctx)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.src.Bootstrap...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, p := range parts {
		for range n {
			rec := r.traffic.record(p.topic)
			rec.Partition = p.partition
			recs = append(recs, rec)
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// finish heals, waits for kmirror to catch up, then checks everything.
func (r *Run) finish() Result {
	res := r.newResult()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// 1. Every partition back to running, caught up.
	r.waitCaughtUp(ctx)

	// 2. kmirror's counters against a quiet burst: what each remote
	// partition gains on the target is what record-count gains.
	counts := r.finalBurst(ctx)

	// 3. Record by record, with kcat, on both clusters.
	srcOffsets := r.compareRecords(ctx, &res, counts)

	// 4. Checkpoints and synced group offsets against the copied data.
	res.Checkpoints = r.checkGroups(ctx, srcOffsets)
	r.logf("%d checkpoints and the synced group offsets checked", res.Checkpoints)
	return res
}

// newResult starts the run's Result from the traffic and faults, and
// fails the run for every worker that crashed.
func (r *Run) newResult() Result {
	res := Result{Seed: r.opts.Seed, Setup: r.setup, Duration: r.opts.Duration,
		Produced: r.traffic.produced.Load(), TxCommitted: r.traffic.txCommitted.Load(), TxAborted: r.traffic.txAborted.Load()}
	r.mu.Lock()
	for _, n := range r.done {
		res.FaultsDone += n
	}
	res.Faults = faultSummary(r.done, r.skipped)
	crashes := append([]string(nil), r.crashes...)
	r.mu.Unlock()
	for _, c := range crashes {
		r.t.Errorf("%s", c)
	}
	return res
}

// waitCaughtUp waits up to 4 minutes for every partition to run with
// lag 0.
func (r *Run) waitCaughtUp(ctx context.Context) {
	start := time.Now()
	if ok, why := waitFor(4*time.Minute, func() (bool, string) { return r.allRunning(ctx) }); !ok {
		r.t.Fatalf("partitions not all running and caught up 4 minutes after the faults: %s", why)
	}
	r.logf("every partition running with lag 0, %v after the traffic stopped", time.Since(start).Round(time.Second))
}

// burstCounts are the record counts and target ends around the final
// burst.
type burstCounts struct {
	before, after map[tp]float64
	endsBefore    map[tp]int64
}

// finalBurst writes a burst to every source partition, waits for it to
// be copied and checks the end states and lost-record counters.
func (r *Run) finalBurst(ctx context.Context) burstCounts {
	t := r.t
	before, err := r.stableCounts()
	if err != nil {
		t.Fatal(err)
	}
	endsBefore := r.targetEnds(ctx)
	const burstN = 20
	if err := r.burst(ctx, burstN); err != nil {
		t.Fatalf("final burst: %v", err)
	}
	if ok, why := waitFor(2*time.Minute, func() (bool, string) { return r.allRunning(ctx) }); !ok {
		t.Fatalf("final burst not copied within 2 minutes: %s", why)
	}
	after, err := r.stableCounts()
	if err != nil {
		t.Fatal(err)
	}
	r.checkEndStates()
	r.checkNoneLost()

	r.logf("final burst of %d records a partition copied; record counts compared", burstN)
	return burstCounts{before: before, after: after, endsBefore: endsBefore}
}

// checkEndStates fails the run for every partition not running.
func (r *Run) checkEndStates() {
	if st, _ := r.statuses(); len(st) > 0 {
		for k, s := range st {
			if s.State != "running" {
				r.t.Errorf("%s[%d] is %s at the end: %s", k.topic, k.partition, s.State, s.Error)
			}
		}
	}
}

// checkNoneLost fails the run for every worker whose lost-records
// counter is not 0.
func (r *Run) checkNoneLost() {
	for _, w := range r.workers {
		body, err := httpGet("http://" + w.metrics + "/metrics")
		if err != nil {
			r.t.Errorf("%v metrics: %v", w, err)
			continue
		}
		for labels, v := range metricSeries(body, "kmirror_source_records_lost_total") {
			if v != 0 {
				r.t.Errorf("%v: kmirror_source_records_lost_total%s = %v, want 0", w, labels, v)
			}
		}
	}
}

// compareRecords reads every source topic and its remote copy with kcat
// and compares them partition by partition into res. It returns, per
// partition, the source offset of each target offset's record.
func (r *Run) compareRecords(ctx context.Context, res *Result, counts burstCounts) map[tp]map[int64]int64 {
	t := r.t
	parts, err := r.sourcePartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srcRecs, dstRecs := r.readBoth(parts)
	r.mu.Lock()
	cut := r.doomedCut
	r.mu.Unlock()
	srcOffsets := map[tp]map[int64]int64{}
	for _, p := range parts {
		src, dst := srcRecs[p.topic][p.partition], dstRecs[p.topic][p.partition]
		c := int64(0)
		if p.topic == topicDoomed {
			c = min(cut[p.partition], firstCopied(src, dst))
		}
		srcOffsets[p] = r.comparePart(res, p, src, dst, c)
		r.checkBurstCount(p, dst, counts)
	}
	if len(srcRecs[topicLate]) == 0 {
		t.Errorf("topic %s created mid-run has no records", topicLate)
	}
	if len(srcRecs[topicEvents]) < 5 {
		t.Errorf("topic %s grown mid-run has records in %d partitions, want 5", topicEvents, len(srcRecs[topicEvents]))
	}

	r.logf("records compared: %d source, %d target, %d duplicates, %d lost", res.SourceRecords, res.TargetRecords, res.Duplicates, res.Lost)
	return srcOffsets
}

// readBoth reads the topics of parts on the source and their remote
// copies on the target, with kcat.
func (r *Run) readBoth(parts []tp) (srcRecs, dstRecs map[string]map[int32][]rec) {
	t := r.t
	var err error
	srcRecs, dstRecs = map[string]map[int32][]rec{}, map[string]map[int32][]rec{}
	for _, p := range parts {
		if _, ok := srcRecs[p.topic]; ok {
			continue
		}
		if srcRecs[p.topic], err = readKcat(t, r.src, p.topic); err != nil {
			t.Fatal(err)
		}
		if dstRecs[p.topic], err = readKcat(t, r.dst, remote(p.topic)); err != nil {
			t.Fatal(err)
		}
	}
	return srcRecs, dstRecs
}

// comparePart compares one partition with its copy from source offset
// cut on, adds it to res and fails the run for what it found; it returns
// the source offset of each target offset's record.
func (r *Run) comparePart(res *Result, p tp, src, dst []rec, cut int64) map[int64]int64 {
	t := r.t
	pc := comparePartition(src, dst, cut)
	res.SourceRecords += pc.source
	res.TargetRecords += pc.target
	res.Duplicates += pc.duplicates
	res.Lost += len(pc.lost)
	res.GoneWithRemote += pc.allowedGone
	for _, pr := range pc.problems {
		t.Errorf("%s[%d]: %s", p.topic, p.partition, pr)
	}
	if len(pc.lost) > 0 {
		t.Errorf("%s[%d]: %d source records missing on the target, first offsets %v", p.topic, p.partition, len(pc.lost), pc.lost[:min(10, len(pc.lost))])
	}
	if r.setup.ExactlyOne && pc.duplicates > 0 {
		t.Errorf("%s[%d]: %d duplicates with exactly-once (read_committed)", p.topic, p.partition, pc.duplicates)
	}
	return pc.srcOffset
}

// checkBurstCount checks that record-count of p's remote partition grew
// by the records the final burst added to it on the target.
func (r *Run) checkBurstCount(p tp, dst []rec, counts burstCounts) {
	k := tp{remote(p.topic), p.partition}
	got := counts.after[k] - counts.before[k]
	want := 0
	for _, d := range dst {
		if d.Offset >= counts.endsBefore[k] {
			want++
		}
	}
	if int(got) != want {
		r.t.Errorf("%s[%d]: record-count grew by %v during the final burst, the target by %d records", remote(p.topic), p.partition, got, want)
	}
}

// firstCopied is the source offset of the first record the target
// partition holds a copy of (the source's end if none): with the remote
// topic deleted, the records before it went with the old topic, provided
// they are before the cut the fault noted too.
func firstCopied(src, dst []rec) int64 {
	end := int64(0)
	if len(src) > 0 {
		end = src[len(src)-1].Offset + 1
	}
	if len(dst) == 0 {
		return end
	}
	for _, s := range src {
		if s.seq() == dst[0].seq() {
			return s.Offset
		}
	}
	return end
}

// targetEnds lists the end offsets of the remote topics.
func (r *Run) targetEnds(ctx context.Context) map[tp]int64 {
	var topics []string
	for _, ts := range initialTopics() {
		topics = append(topics, remote(ts.name))
	}
	topics = append(topics, remote(topicLate))
	ends, err := r.dstAdm.ListEndOffsets(ctx, topics...)
	if err != nil {
		r.t.Fatalf("target end offsets: %v", err)
	}
	out := map[tp]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			r.t.Fatalf("target end offset of %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		out[tp{o.Topic, o.Partition}] = o.Offset
	})
	return out
}

// checkGroups checks the checkpoints of the two groups and their offsets
// synced to the target; it returns how many checkpoints it checked.
func (r *Run) checkGroups(ctx context.Context, srcOffsets map[tp]map[int64]int64) int {
	ends := r.targetEnds(ctx)
	// Checkpoints topic, read whole.
	topic := srcAlias + ".checkpoints.internal"
	byGroupTP, n := r.readCheckpoints(ctx, topic)
	if n == 0 {
		r.t.Errorf("no checkpoints in %s", topic)
	}
	for _, cps := range byGroupTP {
		c := cps[0]
		// Checkpoints name the remote topic.
		src := tp{strings.TrimPrefix(c.topic, srcAlias+"."), c.partition}
		for _, pr := range checkCheckpoints(cps, srcOffsets[src], ends[tp{c.topic, c.partition}]) {
			r.t.Errorf("%s", pr)
		}
	}
	r.checkSyncedGroups(ctx, srcOffsets, ends)
	return n
}

// readCheckpoints reads the checkpoints topic up to its end, for up to a
// minute; it returns the checkpoints by group and partition, and their
// number.
func (r *Run) readCheckpoints(ctx context.Context, topic string) (map[string][]checkpoint, int) {
	t := r.t
	// Committed checkpoints only, as a failover reads them: a fenced
	// task's aborted transaction stays in the log. Markers are kept to
	// see the end.
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.dst.Bootstrap...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := r.checkpointEnds(ctx, topic)
	byGroupTP := map[string][]checkpoint{}
	n := 0
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(want) > 0 && rctx.Err() == nil {
		cl.PollFetches(rctx).EachRecord(func(rec *kgo.Record) {
			if rec.Offset+1 >= want[rec.Partition] {
				delete(want, rec.Partition)
			}
			if rec.Attrs.IsControl() {
				return
			}
			c, err := decodeCheckpoint(rec.Key, rec.Value)
			if err != nil {
				t.Errorf("checkpoint at %d: %v", rec.Offset, err)
				return
			}
			c.offset, c.producer, c.at = rec.Offset, rec.ProducerID, rec.Timestamp
			k := c.group + "/" + c.topic + "/" + strconv.Itoa(int(c.partition))
			byGroupTP[k] = append(byGroupTP[k], c)
			n++
		})
	}
	return byGroupTP, n
}

// checkpointEnds lists the end offsets of the checkpoints topic's
// partitions that have records.
func (r *Run) checkpointEnds(ctx context.Context, topic string) map[int32]int64 {
	cpEnds, err := r.dstAdm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		r.t.Fatal(err)
	}
	want := map[int32]int64{}
	cpEnds.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	return want
}

// checkSyncedGroups checks the group offsets synced to the target: wait
// until both groups have some, then none may be ahead of the data the
// target holds for the offset the group committed on the source.
func (r *Run) checkSyncedGroups(ctx context.Context, srcOffsets map[tp]map[int64]int64, ends map[tp]int64) {
	t := r.t
	groups := []string{groupOrders, groupPayments}
	srcOffs := r.srcAdm.FetchManyOffsets(ctx, groups...)
	if err := srcOffs.Error(); err != nil {
		t.Fatal(err)
	}
	synced, ok, why := r.waitSynced(ctx, groups)
	if !ok {
		t.Errorf("group offsets not synced to the target: %s", why)
		return
	}
	for _, g := range groups {
		synced[g].Fetched.Each(func(o kadm.OffsetResponse) {
			srcTopic := strings.TrimPrefix(o.Topic, srcAlias+".")
			so, _ := srcOffs[g].Fetched.Lookup(srcTopic, o.Partition)
			if o.At > ends[tp{o.Topic, o.Partition}] {
				t.Errorf("group %s on the target: %s[%d] at %d, beyond the end %d", g, o.Topic, o.Partition, o.At, ends[tp{o.Topic, o.Partition}])
			}
			if s := skipped(lastCopies(srcOffsets[tp{srcTopic, o.Partition}]), so.At, o.At); s >= 0 {
				t.Errorf("group %s on the target: %s[%d] at %d is ahead of the data: every copy of source offset %d is below it, the group committed %d on the source",
					g, o.Topic, o.Partition, o.At, s, so.At)
			}
		})
	}
}

// waitSynced waits up to a minute until every group has offsets on the
// target, and returns them; otherwise it says why not.
func (r *Run) waitSynced(ctx context.Context, groups []string) (kadm.FetchOffsetsResponses, bool, string) {
	var synced kadm.FetchOffsetsResponses
	ok, why := waitFor(time.Minute, func() (bool, string) {
		synced = r.dstAdm.FetchManyOffsets(ctx, groups...)
		if err := synced.Error(); err != nil {
			return false, err.Error()
		}
		for _, g := range groups {
			if len(synced[g].Fetched) == 0 {
				return false, g + " has no offsets on the target"
			}
		}
		return true, ""
	})
	return synced, ok, why
}

package passthrough

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// faultCopy is one copy between two kfake clusters with faults injected
// into the target's answers to the pipeline's produce requests.
type faultCopy struct {
	brokers int // of the target; default 1
	records int // default 2000, over 2 partitions
	// inject runs for the n-th produce request of the pipeline (from 1);
	// it may answer it (handled) with a response or, with an error,
	// close the connection.
	inject func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool)
	// during runs beside the copy until it ends.
	during func(ctx context.Context, dst *kfake.Cluster)
	// lanes is the number of source clients (Config.MoreSources + 1);
	// default 1. fetches counts the fetch requests each one sent.
	lanes   int
	fetches []atomic.Int64
	// fetchInject runs for the n-th fetch request to the source (from
	// 1), as inject does for produce requests.
	fetchInject func(n int64, fr *kmsg.FetchRequest) (kmsg.Response, error, bool)
	// txnID makes the copy exactly-once with this transactional ID,
	// committed every 50 ms; the target is then read read_committed.
	txnID string
	// commits counts the EndTxn requests that commit, as the target
	// gets them.
	commits atomic.Int64
	// reencode and codec set Config.ReencodeAll and Config.Codec: the
	// engine's re-encoding modes.
	reencode bool
	codec    string
}

// fetchCounter counts the fetch requests a client writes.
type fetchCounter struct{ n *atomic.Int64 }

func (c fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		c.n.Add(1)
	}
}

// TestFetchLanes copies over three source clients: each carries the
// fetches of its share of the partitions, and the target holds every
// record once, in order.
func TestFetchLanes(t *testing.T) {
	fc := &faultCopy{lanes: 3, records: 4000}
	fc.run(t)
	busy := 0
	for i := range fc.fetches {
		n := fc.fetches[i].Load()
		t.Logf("client %d: %d fetches", i, n)
		if n > 0 {
			busy++
		}
	}
	// Two partitions of one topic take different lanes.
	if busy != 2 {
		t.Errorf("%d of the source clients fetched; want the two partitions on two lanes", busy)
	}
}

// errorResponse answers every partition of pr with code.
func errorResponse(pr *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range pr.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, code, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// run copies the records and checks that the target holds exactly the
// source's records, in order, once each. It returns the pipeline's stats
// and how many produce requests the pipeline sent.
func (fc *faultCopy) run(t *testing.T) (allStats, int64) {
	t.Helper()
	n := fc.records
	if n == 0 {
		n = 2000
	}
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var fetchCalls atomic.Int64
	src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if fc.fetchInject == nil {
			return nil, nil, false
		}
		return fc.fetchInject(fetchCalls.Add(1), req.(*kmsg.FetchRequest))
	})
	dst, err := kfake.NewCluster(kfake.NumBrokers(max(fc.brokers, 1)), kfake.SeedTopics(2, "A.t", "mm2-offsets.A.internal"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	// Faults go only to the pipeline's requests for A.t, known by name
	// or by topic ID; the progress writes to the offsets topic are left
	// alone.
	adm, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(adm).ListTopics(context.Background(), "A.t")
	adm.Close()
	if err != nil {
		t.Fatal(err)
	}
	aID := [16]byte(td["A.t"].ID)
	var calls atomic.Int64
	dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || (pr.Topics[0].Topic != "A.t" && pr.Topics[0].TopicID != aID) {
			return nil, nil, false
		}
		c := calls.Add(1)
		if fc.inject == nil {
			return nil, nil, false
		}
		return fc.inject(c, pr)
	})

	dst.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if req.(*kmsg.EndTxnRequest).Commit {
			fc.commits.Add(1)
		}
		return nil, nil, false
	})

	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerBatchMaxBytes(4000))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	// The deadline only guards against a hang: writing, copying and
	// reading 20,000 records under -race took 80 s beside two busy loops
	// and a loaded make test (load 30 on 2 cores; loaded run 22), with a
	// copy of 5 s.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: int32(i % 2), Key: fmt.Appendf(nil, "%d", i), Value: fmt.Appendf(nil, "value %d", i)})
	}
	if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dstCl, store := openTarget(ctx, t, dst, 2)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	defer func() {
		if t.Failed() {
			t.Logf("pipeline log:\n%s", tail(logs.String(), 6000))
		}
	}()
	fc.fetches = make([]atomic.Int64, max(fc.lanes, 1))
	var fetchers []*kgo.Client
	for i := range fc.fetches {
		cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.WithHooks(fetchCounter{&fc.fetches[i]}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		fetchers = append(fetchers, cl)
	}
	// Small fetches: many batches per partition, several in flight.
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: fetchers[0], MoreSources: fetchers[1:], SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: log, PartitionMaxBytes: 20000, TransactionalID: fc.txnID,
		ReencodeAll: fc.reencode, Codec: fc.codec})
	pl.Assign([]datapath.Partition{{TP: progress.TP{Topic: "t", Partition: 0}, Remote: "A.t"}, {TP: progress.TP{Topic: "t", Partition: 1}, Remote: "A.t"}})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	copyStart := time.Now()
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	// The commit loop ends before Run does: a commit cut off mid-request
	// leaves the transaction to be aborted, and Run's last commit would
	// report that (flow.run still has that race at shutdown).
	cctx, ccancel := context.WithCancel(rctx)
	commitsDone := make(chan struct{})
	go func() {
		defer close(commitsDone)
		for fc.txnID != "" && cctx.Err() == nil {
			_ = pl.Commit(cctx) // a failed one is aborted and retried
			time.Sleep(50 * time.Millisecond)
		}
	}()
	dctx, dcancel := context.WithCancel(ctx)
	duringDone := make(chan struct{})
	go func() {
		defer close(duringDone)
		if fc.during != nil {
			fc.during(dctx, dst)
		}
	}()
	// Progress must only grow, and never past what the target holds;
	// exactly-once, an aborted transaction takes it back to what is
	// committed, never further.
	last := map[progress.TP]int64{}
	for {
		floor := map[progress.TP]int64{}
		for tp := range last {
			floor[tp], _ = store.Get(tp)
		}
		pos := pl.Positions()
		for tp, o := range pos {
			if o < last[tp] && (fc.txnID == "" || o < floor[tp]) {
				t.Fatalf("progress of %v went back from %d to %d", tp, last[tp], o)
			}
			last[tp] = o
		}
		if pos[progress.TP{Topic: "t", Partition: 0}] >= int64(n/2-1) && pos[progress.TP{Topic: "t", Partition: 1}] >= int64(n/2-1) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not copied in time; positions %v", pos)
		case <-time.After(10 * time.Millisecond):
		}
	}
	dcancel()
	<-duringDone
	ccancel()
	<-commitsDone
	rcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fc.txnID != "" {
		for p := range int32(2) {
			tp := progress.TP{Topic: "t", Partition: p}
			if got, _ := store.Get(tp); got != int64(n/2-1) {
				t.Errorf("Run returned nil with the progress of %v committed at %d, want %d; positions %v; %s", tp, got, n/2-1, pl.Positions(), fc.targetState(ctx, dst))
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	rd, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.ConsumeTopics("A.t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	next := map[int32]int{0: 0, 1: 1}
	readStart := time.Now()
	fetchErrs := map[string]int{} // errors the reader met, ignored until it gives up
	for got := 0; got < n; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records (next keys %v) in %v, after a copy of %v; fetch errors %v; %s",
				got, n, next, time.Since(readStart).Round(time.Millisecond), readStart.Sub(copyStart).Round(time.Millisecond), fetchErrs,
				fc.targetState(context.Background(), dst))
		}
		fs.EachError(func(topic string, p int32, err error) { fetchErrs[fmt.Sprintf("%s-%d: %v", topic, p, err)]++ })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprint(next[r.Partition]); string(r.Key) != want {
				t.Fatalf("partition %d offset %d: key %s, want %s", r.Partition, r.Offset, r.Key, want)
			}
			next[r.Partition] += 2
			got++
		})
	}
	if fc.txnID != "" {
		fc.checkCommitted(ctx, t, rd, dst, n)
	} else {
		ends, err := kadm.NewClient(rd).ListEndOffsets(ctx, "A.t")
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset != int64(n/2) {
				t.Errorf("partition %d of the target ends at %d, want %d: records written twice", o.Partition, o.Offset, n/2)
			}
		})
	}
	st := pl.allStats()
	t.Logf("%d produce requests; at most %d batches of a partition in flight, %d errors on later batches, %d producer IDs; %d incremental fetches, %d session resets; %d transactions committed",
		calls.Load(), st.maxInflight, st.laterErrs, st.pids, st.incremental, st.resets, fc.commits.Load())
	return st, calls.Load()
}

// TestProduceErrorsRetriedInOrder copies between two kfake clusters while
// the target answers produce requests with retriable errors (leader moved,
// not enough replicas) and a lost producer ID; every record arrives once,
// in order.
func TestProduceErrorsRetriedInOrder(t *testing.T) {
	_, calls := (&faultCopy{inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		if n%3 != 0 || n > 30 {
			return nil, nil, false
		}
		code := []int16{kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code, kerr.UnknownProducerID.Code}[(n/3)%3]
		return errorResponse(pr, code), nil, true
	}}).run(t)
	if calls < 9 {
		t.Fatalf("only %d produce requests: the errors were not exercised", calls)
	}
}

// TestLaterBatchErrorsKeepProducerID fails a request while later batches
// of the same partitions are in flight: the broker answers those with
// OUT_OF_ORDER_SEQUENCE_NUMBER, which must not cost a new producer ID; the
// partition waits for its batches in flight and sends again from the
// oldest unacknowledged one.
func TestLaterBatchErrorsKeepProducerID(t *testing.T) {
	st, _ := (&faultCopy{records: 4000, inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		if n < 4 || n%5 != 0 || n > 60 {
			return nil, nil, false
		}
		return errorResponse(pr, kerr.NotEnoughReplicas.Code), nil, true
	}}).run(t)
	if st.maxInflight < 2 {
		t.Errorf("at most %d batches of a partition in flight; want pipelining", st.maxInflight)
	}
	if st.laterErrs == 0 {
		t.Error("no error on a later batch: the case was not exercised")
	}
	if st.pids != 1 {
		t.Errorf("%d producer IDs; errors on later batches must keep the first", st.pids)
	}
}

// TestInjectedOutOfOrderOnLaterBatch answers OUT_OF_ORDER_SEQUENCE_NUMBER
// itself for requests while the partition has earlier batches still to be
// written (the previous request was failed): a reordering as the broker
// reports it. Only an OUT_OF_ORDER on the oldest batch would be a lost
// producer state.
func TestInjectedOutOfOrderOnLaterBatch(t *testing.T) {
	var failedPrev atomic.Bool
	st, _ := (&faultCopy{records: 4000, inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		if failedPrev.Swap(false) {
			return errorResponse(pr, kerr.OutOfOrderSequenceNumber.Code), nil, true
		}
		if n >= 4 && n%7 == 0 && n < 100 {
			failedPrev.Store(true)
			return errorResponse(pr, kerr.RequestTimedOut.Code), nil, true
		}
		return nil, nil, false
	}}).run(t)
	if st.laterErrs == 0 {
		t.Error("no error on a later batch: the case was not exercised")
	}
}

// TestOutOfOrderOnOldestBatchResetsProducer answers OUT_OF_ORDER on a
// request whose batches are the next the broker expects: the producer
// state is gone (the broker answers so to every later batch of that
// producer), a new producer ID is taken and nothing is lost or written
// twice.
func TestOutOfOrderOnOldestBatchResetsProducer(t *testing.T) {
	// The control function sees every request in the broker's order and
	// follows the sequence the broker expects of each partition.
	type key struct {
		pid int64
		p   int32
	}
	next := map[key]int32{}
	lost := map[int64]bool{} // producers whose state the broker "lost"
	injected := 0
	st, _ := (&faultCopy{inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		head, gone := true, false
		var bs []kmsg.RecordBatch
		var ks []key
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rp.Records); err != nil {
					return nil, nil, false
				}
				k := key{b.ProducerID, rp.Partition}
				if b.FirstSequence != next[k] {
					head = false
				}
				gone = gone || lost[b.ProducerID]
				bs, ks = append(bs, b), append(ks, k)
			}
		}
		if gone || (head && n >= 6 && injected < 2) {
			if !gone {
				injected++
				lost[bs[0].ProducerID] = true
			}
			return errorResponse(pr, kerr.OutOfOrderSequenceNumber.Code), nil, true
		}
		for i, b := range bs {
			if b.FirstSequence == next[ks[i]] {
				next[ks[i]] += b.NumRecords
			}
		}
		return nil, nil, false
	}}).run(t)
	if injected == 0 {
		t.Fatal("no request held only oldest batches: the case was not exercised")
	}
	if st.pids < 2 {
		t.Errorf("%d producer IDs; an out-of-order oldest batch must reset the producer", st.pids)
	}
}

// TestRetriedHeadGoesAlone plays a remote topic deleted and created
// again: the target answers UNKNOWN_TOPIC_OR_PARTITION until it has
// refused each partition's oldest unacknowledged batch once more, and a
// re-created partition takes any first sequence. So after an error a
// partition's oldest batch must go alone until it is acknowledged: a
// later batch sent beside it would be written first.
func TestRetriedHeadGoesAlone(t *testing.T) {
	const (
		normal   = iota
		gone     // failing everything until the oldest batch comes again
		appeared // the oldest batch was refused once more; it must come next
	)
	type state struct {
		phase int
		head  int32
	}
	parts := map[int32]*state{}
	episodes, violations := 0, []string{}
	(&faultCopy{records: 4000, inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		seqs := map[int32]int32{}
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rp.Records); err != nil {
					return nil, nil, false
				}
				seqs[rp.Partition] = b.FirstSequence
			}
		}
		if episodes < 3 && n >= 6 && n%10 == 0 && len(parts) == 0 {
			episodes++
			for p, seq := range seqs {
				parts[p] = &state{phase: gone, head: seq}
			}
			return errorResponse(pr, kerr.UnknownTopicOrPartition.Code), nil, true
		}
		fail := false
		for p, seq := range seqs {
			st := parts[p]
			if st == nil {
				continue
			}
			if st.phase == gone {
				fail = true
				if seq == st.head {
					st.phase = appeared
				}
			} else if seq != st.head {
				violations = append(violations, fmt.Sprintf("request %d: partition %d sent sequence %d while its oldest batch %d was unacknowledged after an error", n, p, seq, st.head))
			}
		}
		if fail {
			return errorResponse(pr, kerr.UnknownTopicOrPartition.Code), nil, true
		}
		for p, seq := range seqs {
			if st := parts[p]; st != nil && st.phase == appeared && seq == st.head {
				delete(parts, p)
			}
		}
		return nil, nil, false
	}}).run(t)
	if episodes == 0 {
		t.Fatal("no topic deletion played: the case was not exercised")
	}
	for _, v := range violations {
		t.Error(v)
	}
}

// TestConnectionDropsWithSeveralInFlight closes the produce connection
// now and then: the request and those pipelined behind it on the same
// connection fail, and everything is sent again in order.
func TestConnectionDropsWithSeveralInFlight(t *testing.T) {
	st, _ := (&faultCopy{records: 4000, inject: func(n int64, pr *kmsg.ProduceRequest) (kmsg.Response, error, bool) {
		if n >= 4 && n%9 == 0 && n < 120 {
			return nil, errors.New("injected connection drop"), true
		}
		return nil, nil, false
	}}).run(t)
	if st.maxInflight < 2 {
		t.Errorf("at most %d batches of a partition in flight; want pipelining", st.maxInflight)
	}
}

// TestLeaderMovesWithSeveralInFlight moves the target partitions between
// three brokers while batches are in flight: the old leader refuses them,
// the new one may see later batches first.
func TestLeaderMovesWithSeveralInFlight(t *testing.T) {
	(&faultCopy{brokers: 3, records: 6000, during: func(ctx context.Context, dst *kfake.Cluster) {
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(15 * time.Millisecond):
			}
			for p := range int32(2) {
				cur := dst.LeaderFor("A.t", p)
				_ = dst.MoveTopicPartition("A.t", p, (cur+1+int32(i%2))%3)
			}
		}
	}}).run(t)
}

// openTarget returns a client of dst and a progress store on it with
// partitions partitions.
func openTarget(ctx context.Context, t *testing.T, dst *kfake.Cluster, partitions int32) (*kgo.Client, *progress.Store) {
	t.Helper()
	dstCl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dstCl.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := progress.Open(ctx, kadm.NewClient(dstCl), []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, dstCl, progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: partitions}, log)
	if err != nil {
		t.Fatal(err)
	}
	return dstCl, store
}

// TestRewind copies a topic, then rewinds it as the flow does for a
// re-created source topic: every batch is copied again from the log start,
// even with StartAtEnd, and the progress follows.
func TestRewind(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { rewind(t, m) })
	}
}

func rewind(t *testing.T, m mode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srcCl, dst := twoPartitions(ctx, t, 40)
	dstCl, store := openTarget(ctx, t, dst, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tps := []progress.TP{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	// Saved progress, so that StartAtEnd does not apply at first.
	if err := store.Save(ctx, map[progress.TP]int64{tps[0]: 0, tps[1]: 4}); err != nil {
		t.Fatal(err)
	}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: log, StartAtEnd: true, ReencodeAll: m.reencode, Codec: m.codec})
	pl.Assign([]datapath.Partition{{TP: tps[0], Remote: "A.t"}, {TP: tps[1], Remote: "A.t"}})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	waitPositions := func(want int64) {
		t.Helper()
		for {
			pos := pl.Positions()
			if pos[tps[0]] == want && pos[tps[1]] == want {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("positions %v, want %d", pos, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ends := func() int64 {
		t.Helper()
		o, err := kadm.NewClient(dstCl).ListEndOffsets(ctx, "A.t")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		o.Each(func(l kadm.ListedOffset) { n += l.Offset })
		return n
	}
	waitPositions(19)
	first := ends()
	if err := store.Save(ctx, map[progress.TP]int64{tps[0]: -1, tps[1]: -1}); err != nil {
		t.Fatal(err)
	}
	if err := pl.Rewind(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if pos := pl.Positions(); len(pos) != 2 || pos[tps[0]] > 19 || pos[tps[1]] > 19 {
		t.Errorf("positions after Rewind %v", pos)
	}
	waitPositions(19)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := ends(); got != first+40 {
		t.Errorf("target holds %d records, want %d", got, first+40)
	}
	for _, tp := range tps {
		if got, _ := store.Get(tp); got != 19 {
			t.Errorf("%s saved at %d, want 19", tp, got)
		}
	}
}

// TestRestart stands for what the watchdog meets: a partition that does
// not fetch (here it is held back by hand, as if a fetch never
// answered) while its source holds records. Restart gets it copying from
// its progress; the target holds every record once.
func TestRestart(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { restart(t, m) })
	}
}

func restart(t *testing.T, m mode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srcCl, dst := twoPartitions(ctx, t, 80)
	dstCl, store := openTarget(ctx, t, dst, 1)
	tps := []progress.TP{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	if err := store.Save(ctx, map[progress.TP]int64{tps[0]: 9}); err != nil {
		t.Fatal(err)
	}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler), ReencodeAll: m.reencode, Codec: m.codec})
	pl.Assign([]datapath.Partition{{TP: tps[0], Remote: "A.t"}, {TP: tps[1], Remote: "A.t"}})
	pl.mu.Lock()
	pl.parts[tps[0]].retryAt = time.Now().Add(time.Hour)
	pl.mu.Unlock()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 10*time.Second) }()
	waitPosition := func(tp progress.TP, want int64) {
		t.Helper()
		for pl.Positions()[tp] != want {
			if ctx.Err() != nil {
				t.Fatalf("%s at %d, want %d", tp, pl.Positions()[tp], want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitPosition(tps[1], 39)
	time.Sleep(300 * time.Millisecond)
	if got := pl.Positions()[tps[0]]; got != 9 {
		t.Fatalf("%s at %d while not fetching, want 9", tps[0], got)
	}
	if pl.Restart(ctx, progress.TP{Topic: "gone", Partition: 0}) {
		t.Error("Restart of a partition not assigned reported true")
	}
	if !pl.Restart(ctx, tps[0]) {
		t.Fatal("Restart of an idle partition reported false")
	}
	waitPosition(tps[0], 39)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	o, err := kadm.NewClient(dstCl).ListEndOffsets(ctx, "A.t")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	o.Each(func(l kadm.ListedOffset) { n += l.Offset })
	if n != 70 { // p0 from offset 10
		t.Errorf("target holds %d records, want 70", n)
	}
}

// twoPartitions starts a kfake source with topic t and a kfake target with
// A.t, both of two partitions, and writes n records to t, alternating
// partitions. It returns a client of the source and the target cluster.
func twoPartitions(ctx context.Context, t *testing.T, n int) (*kgo.Client, *kfake.Cluster) {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	dst, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "A.t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srcCl.Close)
	for i := range n {
		if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return srcCl, dst
}

// TestFetchSessionErrors copies while the source answers some fetches
// of the pipeline's session with the errors that end a session, or drops
// the connection: the session starts over with a full fetch and the
// target holds every record once, in order.
func TestFetchSessionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16 // top-level error; 0 drops the connection
	}{
		{"session not found", kerr.FetchSessionIDNotFound.Code},
		{"invalid session epoch", kerr.InvalidFetchSessionEpoch.Code},
		{"connection dropped", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var injected, inSession atomic.Int64
			fc := &faultCopy{records: 20000, fetchInject: func(n int64, fr *kmsg.FetchRequest) (kmsg.Response, error, bool) {
				if fr.SessionEpoch <= 0 {
					return nil, nil, false
				}
				if inSession.Add(1) > 3 {
					return nil, nil, false
				}
				injected.Add(1)
				if tc.code == 0 {
					return nil, errors.New("connection dropped by the test"), true
				}
				resp := fr.ResponseKind().(*kmsg.FetchResponse)
				resp.Version = fr.Version
				resp.ErrorCode = tc.code
				return resp, nil, true
			}}
			st, _ := fc.run(t)
			if injected.Load() == 0 || st.resets == 0 {
				t.Errorf("%d errors injected, %d session resets; want some of each", injected.Load(), st.resets)
			}
			if st.incremental == 0 {
				t.Error("no fetch was answered in a session")
			}
		})
	}
}

// targetState describes, for a failure message, what the target holds
// of A.t: each partition's high watermark and last stable offset, and
// the transactions open on it.
func (fc *faultCopy) targetState(ctx context.Context, dst *kfake.Cluster) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var b strings.Builder
	if ends, err := adm.ListEndOffsets(ctx, "A.t"); err != nil {
		fmt.Fprintf(&b, "end offsets: %v; ", err)
	} else {
		ends.Each(func(o kadm.ListedOffset) { fmt.Fprintf(&b, "A.t-%d ends at %d; ", o.Partition, o.Offset) })
	}
	if lso, err := adm.ListCommittedOffsets(ctx, "A.t"); err != nil {
		fmt.Fprintf(&b, "stable offsets: %v; ", err)
	} else {
		lso.Each(func(o kadm.ListedOffset) { fmt.Fprintf(&b, "A.t-%d stable to %d; ", o.Partition, o.Offset) })
	}
	if fc.txnID != "" {
		txns, err := adm.DescribeTransactions(ctx, fc.txnID)
		if err != nil {
			fmt.Fprintf(&b, "transactions: %v", err)
		}
		for _, d := range txns {
			fmt.Fprintf(&b, "transaction %s: state %s, producer %d epoch %d, partitions %v", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, d.Topics)
		}
	}
	return b.String()
}

// allStats is what the Pipeline's sides counted.
type allStats struct {
	stats
	fetchStats
}

func (pl *Pipeline) allStats() allStats {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.fetcher.mu.Lock()
	defer pl.fetcher.mu.Unlock()
	return allStats{pl.stats, pl.fetcher.stats}
}

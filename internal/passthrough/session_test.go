package passthrough

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/throttle"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// fetchSizes records the size of every fetch request a client writes.
type fetchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (f *fetchSizes) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		f.mu.Lock()
		f.sizes = append(f.sizes, n)
		f.mu.Unlock()
	}
}

func (f *fetchSizes) take() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sizes
	f.sizes = nil
	return s
}

// lockedBuffer is a log destination the pipeline and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFetchSessionOnBroker copies between two real clusters through a
// target throttled to 128 KiB/s with 16 KiB per partition and fetch, so
// that partitions leave the fetch session while their buffer is full
// (4 fetches' worth) and join it again. At 256 KiB/s and load 60, no
// partition's buffer filled in one run; half the rate gives the fetches
// twice the time. Idle fetches of the session list no partition and are
// far smaller than the first, full one. Then, with more records coming,
// the session is broken twice on the broker's side (an unknown session ID,
// a wrong epoch) while the pipeline is paused: it starts a new session
// and the target holds the source's records exactly, in order.
func TestFetchSessionOnBroker(t *testing.T) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	const parts, per = 8, 100
	topic := testkafka.Topic(t, "ptsess")
	remote := "A." + topic
	a.CreateTopic(t, topic, parts, nil)
	b.CreateTopic(t, remote, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Batches of 8 records: several in a partition's share of a fetch.
	pcl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(8<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce := func(from int) {
		t.Helper()
		var recs []*kgo.Record
		for p := range int32(parts) {
			for i := from; i < from+per; i++ {
				v := fmt.Appendf(nil, "p%d-%d ", p, i)
				v = append(v, bytes.Repeat([]byte{'a' + byte(i%26)}, 1024-len(v))...)
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v})
			}
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)

	sizes := &fetchSizes{}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	adm := b.Admin(t)
	store, err := progress.Open(ctx, adm, []kgo.Opt{kgo.SeedBrokers(b.Bootstrap...)}, b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), progress.Options{
		Topic: "mm2-offsets." + topic + ".internal", Source: "A", Partitions: 1, ReplicationFactor: 1,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: a.Client(t, kgo.WithHooks(sizes)), SourceAdmin: a.Admin(t),
		Target: b.Client(t), TargetAdmin: adm, Progress: store, Metrics: metrics.New(), Log: log,
		PartitionMaxBytes: 16 << 10, Throttle: throttle.New(128 << 10)})
	var ps []datapath.Partition
	for p := range int32(parts) {
		ps = append(ps, datapath.Partition{TP: progress.TP{Topic: topic, Partition: p}, Remote: remote})
	}
	pl.Assign(ps)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 30*time.Second) }()
	defer func() {
		stop()
		<-done
	}()
	copied := func(n int64) {
		t.Helper()
		for {
			ends, err := adm.ListEndOffsets(ctx, remote)
			all := err == nil
			ends.Each(func(o kadm.ListedOffset) { all = all && o.Offset >= n })
			if all {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("target not at %d in every partition: %v %v; log:\n%s", n, ends, err, tail(logs.String(), 6000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	stats := pl.allStats
	copied(per)
	first := sizes.take()
	st := stats()
	t.Logf("first copy: %d fetches, %d in a session, %d partitions forgotten; first fetch %d bytes", len(first), st.incremental, st.forgotten, first[0])
	if st.incremental == 0 || st.forgotten == 0 {
		t.Errorf("%d fetches in a session, %d partitions forgotten; want both above 0", st.incremental, st.forgotten)
	}
	time.Sleep(500 * time.Millisecond)
	sizes.take() // the last changes to the session
	// An idle lane's fetch waits up to idleFetchWait on the broker, so
	// the window holds at least one of them.
	time.Sleep(2*idleFetchWait + 500*time.Millisecond)
	idle := sizes.take()
	if len(idle) == 0 {
		t.Fatal("no fetch while idle")
	}
	for _, n := range idle {
		if n > first[0]/3 {
			t.Errorf("idle fetches of %v bytes; the full one had %d", idle, first[0])
			break
		}
	}
	t.Logf("idle: %d fetches of %v bytes", len(idle), idle)

	// break the session on the broker's side while no fetch is out.
	// A lane just reset may not have sent its full fetch yet: paused, it
	// never would, so the pipeline resumes between tries.
	breakSession := func(how func(ls *laneState)) {
		t.Helper()
		for try := 0; ; try++ {
			pl.Pause(true)
			for wait := 0; wait < 100; wait++ { // in-flight fetches end within MaxWait
				pl.fetcher.mu.Lock()
				n := 0
				for _, ls := range pl.fetcher.lanes {
					if !ls.fetching && ls.epoch > 0 {
						how(ls)
						n++
					}
				}
				pl.fetcher.mu.Unlock()
				if n > 0 {
					pl.Pause(false)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			pl.Pause(false)
			if ctx.Err() != nil {
				t.Fatalf("no lane in a session without a fetch out after %d tries", try+1)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	produce(per)
	time.Sleep(200 * time.Millisecond)
	for i, how := range []func(ls *laneState){
		func(ls *laneState) { ls.id ^= 0x5a5a5a },
		func(ls *laneState) { ls.epoch += 1000 },
	} {
		resets := stats().resets
		breakSession(how)
		for stats().resets == resets {
			if ctx.Err() != nil {
				t.Fatalf("break %d: the session was not reset", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	copied(2 * per)
	for _, e := range []string{"FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"} {
		if !strings.Contains(logs.String(), e) {
			t.Errorf("no session reset after %s logged", e)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred stop

	src, dst := a.ReadAll(t, topic), b.ReadAll(t, remote)
	if len(dst) != len(src) {
		t.Fatalf("target holds %d records, source %d", len(dst), len(src))
	}
	for i := range src {
		if src[i].Partition != dst[i].Partition || !bytes.Equal(src[i].Value, dst[i].Value) {
			t.Fatalf("record %d: target partition %d %.12q, source partition %d %.12q", i, dst[i].Partition, dst[i].Value, src[i].Partition, src[i].Value)
		}
	}
	st = stats()
	t.Logf("%d records exact; %d fetches in a session, %d partitions forgotten, %d session resets", len(dst), st.incremental, st.forgotten, st.resets)
}

// tail is the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestIdleFetchWait: once a session's fetches come back empty, the lane
// asks the broker to wait idleFetchWait; a record that arrives is still
// copied, and the fetches after it wait Config.FetchMaxWait again.
func TestIdleFetchWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var mu sync.Mutex
	var waits []int32 // MaxWaitMillis of the fetches in a session
	src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if fr := req.(*kmsg.FetchRequest); fr.SessionEpoch > 0 {
			mu.Lock()
			waits = append(waits, fr.MaxWaitMillis)
			mu.Unlock()
		}
		return nil, nil, false
	})
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "A.t"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	dstCl, store := openTarget(ctx, t, dst, 1)
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, SourceAdmin: kadm.NewClient(srcCl), Target: dstCl,
		Progress: store, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler), FetchMaxWait: 50 * time.Millisecond})
	tp := progress.TP{Topic: "t", Partition: 0}
	pl.Assign([]datapath.Partition{{TP: tp, Remote: "A.t"}})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 5*time.Second) }()
	// waitFor waits until the last fetch in a session waited want ms
	// and returns how many there were.
	waitFor := func(want int32) int {
		t.Helper()
		for ctx.Err() == nil {
			mu.Lock()
			n := len(waits)
			last := int32(-1)
			if n > 0 {
				last = waits[n-1]
			}
			mu.Unlock()
			if last == want {
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no fetch waited %d ms: %v", want, waits)
		return 0
	}
	waitFor(int32(idleFetchWait.Milliseconds()))
	if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for pl.Positions()[tp] != 0 {
		if ctx.Err() != nil {
			t.Fatal("the record was not copied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(50)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := slices.Index(waits, int32(idleFetchWait.Milliseconds())); n < idleFetches {
		t.Errorf("fetch waits %v: the long wait came after %d empty fetches, want %d", waits, n, idleFetches)
	}
}

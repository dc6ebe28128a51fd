package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/passthrough"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
)

// ptRun is a passthrough pipeline running against real brokers.
type ptRun struct {
	pl     *passthrough.Pipeline
	cancel context.CancelFunc
	done   chan error
	log    *syncBuffer
}

// ptSetup names what a passthrough test replicates.
type ptSetup struct {
	a, b       *testkafka.Cluster
	src, dst   string // cluster aliases
	topics     []string
	partitions int32
	syncs      string // offset-syncs topic on b; "" for none
	addOrigin  bool
	reencode   bool   // every batch (passthrough.Config.ReencodeAll)
	codec      string // the target codec (passthrough.Config.Codec)
	partBytes  int32  // fetch bytes per partition; 0 for 64 KiB
}

// start builds a pipeline for every partition of s.topics, reading its
// progress from b, and runs it until stop.
func (s ptSetup) start(t *testing.T) *ptRun {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	adm := s.b.Admin(t)
	producer := s.b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	store, err := progress.Open(ctx(t), adm, []kgo.Opt{kgo.SeedBrokers(s.b.Bootstrap...)}, producer, progress.Options{
		Topic: "mm2-offsets." + s.src + ".internal", Source: s.src, Partitions: 1, ReplicationFactor: 1,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	var syncs *offsetsync.Writer
	if s.syncs != "" {
		syncs = offsetsync.New(s.b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), s.syncs, 100, log, nil)
	}
	pl := passthrough.New(passthrough.Config{
		SourceAlias: s.src, TargetAlias: s.dst,
		Source: s.a.Client(t), SourceAdmin: s.a.Admin(t),
		Target: s.b.Client(t), TargetAdmin: adm,
		Progress: store, Syncs: syncs, AddOrigin: s.addOrigin, ReencodeAll: s.reencode, Codec: s.codec,
		Metrics: metrics.New(), Log: log,
		PartitionMaxBytes: cmp.Or(s.partBytes, 64<<10), // small: several fetches per partition
	})
	var ps []datapath.Partition
	for _, tp := range s.topics {
		for p := range s.partitions {
			ps = append(ps, datapath.Partition{TP: progress.TP{Topic: tp, Partition: p}, Remote: s.src + "." + tp})
		}
	}
	pl.Assign(ps)
	c, cancel := context.WithCancel(context.Background())
	r := &ptRun{pl: pl, cancel: cancel, done: make(chan error, 1), log: logs}
	go func() { r.done <- pl.Run(c, 30*time.Second) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("pipeline log:\n%s", logs.String())
		}
	})
	return r
}

// stop ends the pipeline cleanly and fails the test on a stop error.
func (r *ptRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- nil // for the cleanup
		if err != nil {
			t.Fatalf("pipeline stopped with %v\n%s", err, r.log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("pipeline did not stop within 60s")
	}
}

// rawBatch is what a raw fetch shows of one stored batch.
type rawBatch struct {
	codec         int16
	records       int32
	transactional bool
	control       bool
}

// rawBatches reads the stored batches of a partition as they are on disk,
// with a plain kmsg fetch (read_uncommitted).
func rawBatches(t *testing.T, c *testkafka.Cluster, topic string, partition int32) []rawBatch {
	t.Helper()
	cl := c.Client(t)
	md, err := c.Admin(t).Metadata(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]
	leader := td.Partitions[partition].Leader
	var out []rawBatch
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 100
		req.MaxBytes = 8 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(leader)).Request(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		part := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			t.Fatalf("raw fetch of %s/%d: error code %d", topic, partition, part.ErrorCode)
		}
		in := part.RecordBatches
		got := 0
		for len(in) >= 12 {
			var b kmsg.RecordBatch
			n := 12 + int(int32(uint32(in[8])<<24|uint32(in[9])<<16|uint32(in[10])<<8|uint32(in[11])))
			if n > len(in) || b.ReadFrom(in[:n]) != nil {
				break
			}
			in = in[n:]
			if b.FirstOffset < offset {
				continue
			}
			out = append(out, rawBatch{codec: b.Attributes & 7, records: b.NumRecords, transactional: b.Attributes&0x10 != 0, control: b.Attributes&0x20 != 0})
			offset = b.FirstOffset + int64(b.LastOffsetDelta) + 1
			got++
		}
		if got == 0 || offset >= part.HighWatermark {
			return out
		}
	}
}

// TestPassthroughCodecs copies every codec, keys, headers, timestamps,
// tombstones and committed and aborted transactions, and checks that the
// target holds the same records in batches of the source's codecs.
func TestPassthroughCodecs(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "ptcodecs")
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	a.CreateTopic(t, topic, 3, nil)
	b.CreateTopic(t, remote, 3, nil)
	syncsTopic := "mm2-offset-syncs." + src + ".internal"
	compact := "compact"
	b.CreateTopic(t, syncsTopic, 1, map[string]*string{"cleanup.policy": &compact})
	produceMixed(t, a, topic, 3, 60)
	produceTxn(t, a, topic, 3)

	s := ptSetup{a: a, b: b, src: src, dst: dst, topics: []string{topic}, partitions: 3, syncs: syncsTopic}
	r := s.start(t)
	want := a.ReadAll(t, topic)
	waitFor(t, 90*time.Second, "records in "+remote, func() bool { return countAll(t, b, remote) >= len(want) })
	r.stop(t)
	got := b.ReadAll(t, remote)
	sameRecords(t, want, got, "")

	var committed, aborted int
	for _, r := range got {
		switch string(r.Value) {
		case "round 0", "round 2":
			committed++
		case "round 1", "round 3":
			aborted++
		}
	}
	if committed != 30 || aborted != 0 {
		t.Errorf("target has %d committed and %d aborted transactional records, want 30 and 0", committed, aborted)
	}

	// The target stores the source's batches: same codec and record count
	// for the non-transactional ones, in order, then the committed
	// transactional batches without their transactional bit.
	codecs := map[int16]int{}
	for p := range int32(3) {
		var srcPlain, srcTxn []rawBatch
		for _, rb := range rawBatches(t, a, topic, p) {
			switch {
			case rb.control:
			case rb.transactional:
				srcTxn = append(srcTxn, rb)
			default:
				srcPlain = append(srcPlain, rb)
			}
		}
		dstBatches := rawBatches(t, b, remote, p)
		if len(dstBatches) != len(srcPlain)+len(srcTxn)/2 {
			t.Errorf("partition %d: target has %d batches, want %d plain + %d committed transactional", p, len(dstBatches), len(srcPlain), len(srcTxn)/2)
			continue
		}
		for i, d := range dstBatches {
			if d.transactional || d.control {
				t.Errorf("partition %d batch %d: target batch is transactional or control: %+v", p, i, d)
			}
			if i < len(srcPlain) && (d.codec != srcPlain[i].codec || d.records != srcPlain[i].records) {
				t.Errorf("partition %d batch %d: target codec %d with %d records, source codec %d with %d", p, i, d.codec, d.records, srcPlain[i].codec, srcPlain[i].records)
			}
			codecs[d.codec]++
		}
	}
	for c := range int16(5) {
		if codecs[c] == 0 {
			t.Errorf("no target batch with codec %d; batches per codec: %v", c, codecs)
		}
	}
	t.Logf("target batches per codec: %v", codecs)

	// Every offset sync pairs a source record with its copy.
	checkSyncs(t, b, syncsTopic, topic, want, got)
}

// checkSyncs reads the offset syncs of topic and checks that each points
// at the copy of its upstream record.
func checkSyncs(t *testing.T, b *testkafka.Cluster, syncsTopic, topic string, src, dst []*kgo.Record) {
	t.Helper()
	type key struct {
		p   int32
		off int64
	}
	srcAt, dstAt := map[key]*kgo.Record{}, map[key]*kgo.Record{}
	for _, r := range src {
		srcAt[key{r.Partition, r.Offset}] = r
	}
	for _, r := range dst {
		dstAt[key{r.Partition, r.Offset}] = r
	}
	n := 0
	err := readlog.ToEnd(ctx(t), []kgo.Opt{kgo.SeedBrokers(b.Bootstrap...)}, syncsTopic, func(r *kgo.Record) {
		s, err := wire.DecodeOffsetSync(r.Key, r.Value)
		if err != nil || s.Topic != topic {
			return
		}
		n++
		up, down := srcAt[key{s.Partition, s.UpstreamOffset}], dstAt[key{s.Partition, s.DownstreamOffset}]
		if up == nil || down == nil {
			return // a skipped offset (marker) or a record not read back
		}
		if d := diff(up, down, ""); d != "" {
			t.Errorf("offset sync %d:%d -> %d pairs different records: %s", s.Partition, s.UpstreamOffset, s.DownstreamOffset, d)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no offset syncs written")
	}
}

// TestPassthroughRestart stops the pipeline while a producer writes, starts
// a new one from the saved progress, and checks that nothing is lost or
// copied twice.
func TestPassthroughRestart(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "ptrestart")
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	a.CreateTopic(t, topic, 2, nil)
	b.CreateTopic(t, remote, 2, nil)

	produced := make(chan error, 1)
	go func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.Bootstrap...), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
		if err != nil {
			produced <- err
			return
		}
		defer cl.Close()
		for round := range 40 {
			var recs []*kgo.Record
			for i := range 500 {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: fmt.Appendf(nil, "r%d-%d", round, i), Value: []byte(strings.Repeat("x", 100+i%50))})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			// About 8 s of writing: longer than the pipeline's start-up,
			// so the first pipeline stops while records still arrive.
			time.Sleep(200 * time.Millisecond)
		}
		produced <- nil
	}()

	s := ptSetup{a: a, b: b, src: src, dst: dst, topics: []string{topic}, partitions: 2}
	r := s.start(t)
	waitFor(t, 60*time.Second, "some records copied", func() bool { return countAll(t, b, remote) >= 3000 })
	r.stop(t)
	mid := countAll(t, b, remote)
	r = s.start(t)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	want := a.ReadAll(t, topic)
	if mid >= len(want) {
		t.Fatalf("the first pipeline copied everything (%d records) before it stopped; the test needs a longer load", mid)
	}
	waitFor(t, 90*time.Second, "all records", func() bool { return countAll(t, b, remote) >= len(want) })
	r.stop(t)
	got := b.ReadAll(t, remote)
	t.Logf("first pipeline copied %d of %d records", mid, len(want))
	sameRecords(t, want, got, "")
}

// TestPassthroughFallbacks covers batches that cannot go out as they are:
// LogAppendTime at the source, a target max.message.bytes smaller than
// the source's batches, the provenance header, records that came from the
// target, and a record too large for the target, which stops the partition
// at its offset after copying the records before it.
func TestPassthroughFallbacks(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "ptfallback")
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	lat, small := "LogAppendTime", "20000"
	a.CreateTopic(t, topic, 1, map[string]*string{"message.timestamp.type": &lat})
	b.CreateTopic(t, remote, 1, map[string]*string{"max.message.bytes": &small})

	cl := a.Client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(20*time.Millisecond))
	var recs []*kgo.Record
	for i := range 600 {
		v := make([]byte, 400) // random: zstd cannot shrink it
		_, _ = io.ReadFull(rand.Reader, v)
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: v, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
		if i%100 == 7 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: datapath.OriginHeader, Value: []byte(dst)}) // came from the target
		}
		recs = append(recs, r)
	}
	big := make([]byte, 30000)
	_, _ = io.ReadFull(rand.Reader, big)
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("big"), Value: big})
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("after"), Value: []byte("after")})
	if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	all := a.ReadAll(t, topic)
	var want []*kgo.Record
	var bigOffset int64 = -1
	for _, r := range all {
		if string(r.Key) == "big" {
			bigOffset = r.Offset
			break
		}
		if _, looped := headerValue(r, datapath.OriginHeader); !looped {
			want = append(want, r)
		}
	}

	s := ptSetup{a: a, b: b, src: src, dst: dst, topics: []string{topic}, partitions: 1, addOrigin: true}
	r := s.start(t)
	waitFor(t, 90*time.Second, "records in "+remote, func() bool { return countAll(t, b, remote) >= len(want) })
	waitFor(t, 30*time.Second, "the partition to stop at the large record", func() bool {
		return strings.Contains(r.log.String(), "partition stopped") && strings.Contains(r.log.String(), fmt.Sprintf("offset=%d", bigOffset))
	})
	r.stop(t)
	got := b.ReadAll(t, remote)
	sameRecords(t, want, got, datapath.OriginHeader)
	for _, g := range got {
		if v, ok := headerValue(g, datapath.OriginHeader); !ok || v != src {
			t.Fatalf("target record at %d has origin %q (present %v), want %q", g.Offset, v, ok, src)
		}
	}
	if pos := r.pl.Positions()[progress.TP{Topic: topic, Partition: 0}]; pos != bigOffset-1 {
		t.Errorf("progress is %d, want %d (just before the large record)", pos, bigOffset-1)
	}
	for i, rb := range rawBatches(t, b, remote, 0) {
		if rb.codec != 4 {
			t.Errorf("target batch %d has codec %d, want zstd as at the source", i, rb.codec)
		}
	}
}

func headerValue(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestPassthroughThroughput copies the same lz4 topic of 1 KiB records with
// batches forwarded and with every batch re-encoded, and logs time and CPU
// per MB of each. It asserts only that both copy
// everything: performance is measured by bench/ and the Go benchmarks.
// KMIRROR_PT_MB sets the size (default 8, enough to exercise many batches).
func TestPassthroughThroughput(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	mb := 8
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_PT_MB")); err == nil && v > 0 {
		mb = v
	}
	const parts = 4
	topic := testkafka.Topic(t, "ptspeed")
	a.CreateTopic(t, topic, parts, nil)
	cl := a.Client(t, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(10*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	words := []string{"kafka", "mirror", "record", "batch", "offset", "partition", "topic", "replica", "leader", "commit"}
	n := mb * 1024
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := range n {
		var v []byte
		for len(v) < 1024 {
			v = fmt.Appendf(v, "%s %d ", words[(i*7+len(v))%len(words)], (i*31+len(v)*17)%100000)
		}
		wg.Add(1)
		cl.Produce(ctx(t), &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: v[:1024]}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		t.Fatal(err)
	}

	run := func(name string, start func(src, remote string) func()) {
		src := alias(t, name)
		remote := src + "." + topic
		b.CreateTopic(t, remote, parts, nil)
		adm := b.Admin(t)
		var before, after syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		t0 := time.Now()
		stop := start(src, remote)
		testwait.Every(t, 5*time.Minute, 20*time.Millisecond, "the records on the target", func() bool {
			ends, err := adm.ListEndOffsets(ctx(t), remote)
			if err != nil {
				return false
			}
			var sum int64
			ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
			return sum >= int64(n)
		})
		d := time.Since(t0)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		stop()
		cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
		t.Logf("%-12s %d MiB of 1 KiB lz4 records in %v: %.0f MiB/s, CPU %v (%.2f ms per MiB)",
			name, mb, d.Round(time.Millisecond), float64(mb)/d.Seconds(), cpu.Round(time.Millisecond), float64(cpu.Milliseconds())/float64(mb))
	}

	run("passthru", func(src, remote string) func() {
		s := ptSetup{a: a, b: b, src: src, dst: alias(t, "dst"), topics: []string{topic}, partitions: parts, partBytes: passthrough.DefaultPartitionMaxBytes}
		r := s.start(t)
		return func() { r.stop(t) }
	})
	run("reencode", func(src, remote string) func() {
		s := ptSetup{a: a, b: b, src: src, dst: alias(t, "dst"), topics: []string{topic}, partitions: parts, partBytes: passthrough.DefaultPartitionMaxBytes, reencode: true}
		r := s.start(t)
		return func() { r.stop(t) }
	})
}

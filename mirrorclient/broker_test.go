package mirrorclient_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/heartbeat"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
	"github.com/kmirror/kmirror/mirrorclient"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// alias returns a cluster alias unique to the test and run, so tests that
// share clusters never share internal topics.
func alias(t *testing.T, base string) string {
	name := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "")
	if len(name) > 16 {
		name = name[len(name)-16:]
	}
	return fmt.Sprintf("%s%s%d", base, name, time.Now().UnixNano()%100000)
}

func realClient(t *testing.T, c *testkafka.Cluster, opts ...mirrorclient.Option) *mirrorclient.Client {
	t.Helper()
	mc, err := mirrorclient.New(append([]mirrorclient.Option{mirrorclient.WithSeedBrokers(c.Bootstrap...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}

// TestRealBrokerCheckpoints writes checkpoints and corrupt records with
// kmirror's encoder to a real broker and reads them back.
func TestRealBrokerCheckpoints(t *testing.T) {
	c := testkafka.Shared(t, 1)[0]
	up := alias(t, "up")
	topic := up + ".checkpoints.internal"
	compact := "compact"
	c.CreateTopic(t, topic, 1, map[string]*string{"cleanup.policy": &compact})
	c.CreateTopic(t, up+".heartbeats", 1, nil)

	var recs []*kgo.Record
	add := func(k, v []byte) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: v})
	}
	const n = 500
	for i := range n {
		k, v, err := wire.Encode(wire.Checkpoint{Group: "g", Topic: up + ".t", Partition: int32(i % 5),
			UpstreamOffset: int64(i), DownstreamOffset: int64(i - 1), Metadata: "m"})
		if err != nil {
			t.Fatal(err)
		}
		add(k, v)
		if i%100 == 0 {
			add(k, v[:3]) // corrupt: value cut short
		}
	}
	c.Produce(t, recs...)

	mc := realClient(t, c)
	ctx := context.Background()
	start := time.Now()
	got, err := mc.RemoteConsumerOffsets(ctx, "g", up, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d records (%d corrupt) in %v", len(recs), mc.SkippedRecords(), time.Since(start))
	if len(got) != 5 {
		t.Fatalf("got %d partitions, want 5: %v", len(got), got)
	}
	for p := range int32(5) {
		// The last checkpoint of partition p has upstream offset n-5+p.
		if off, want := got[mirrorclient.TopicPartition{Topic: up + ".t", Partition: p}], int64(n-5+int(p)-1); off != want {
			t.Errorf("partition %d: offset %d, want %d", p, off, want)
		}
	}
	if s := mc.SkippedRecords(); s != n/100 {
		t.Errorf("SkippedRecords = %d, want %d", s, n/100)
	}
	if hops, err := mc.ReplicationHops(ctx, up); err != nil || hops != 1 {
		t.Errorf("ReplicationHops(%s) = %d, %v; want 1", up, hops, err)
	}
	cps, err := mc.CheckpointTopics(ctx)
	if err != nil || !slices.Contains(cps, topic) {
		t.Errorf("CheckpointTopics = %q, %v; want it to contain %s", cps, err, topic)
	}
}

// syncBuffer is a bytes.Buffer safe for a process writing while a test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mm2Log4j logs MM2 at INFO and the Kafka clients at WARN.
const mm2Log4j = `status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
`

// startMM2 runs Apache MirrorMaker 2 in dedicated mode for the clusters
// given, and stops it at cleanup.
func startMM2(t *testing.T, props string, clusters ...string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(cfg, []byte(props+testkafka.MM2FastStart(props)), 0o644); err != nil {
		t.Fatal(err)
	}
	log4j := filepath.Join(t.TempDir(), "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(mm2Log4j), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-Xms128m", "-Xmx768m", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=file:" + log4j,
		"-cp", filepath.Join(testkafka.Libs(t), "*"),
		"org.apache.kafka.connect.mirror.MirrorMaker", cfg, "--clusters"}
	cmd := exec.Command("java", append(args, clusters...)...)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	// Pdeathsig is tied to the starting thread: keep it for the start.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	err := cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			out := log.String()
			// Its warnings and errors first (the tail is mostly the
			// shutdown), up to 100 lines.
			var bad []string
			for _, l := range strings.Split(out, "\n") {
				if (strings.Contains(l, "] WARN ") || strings.Contains(l, "] ERROR ")) && len(bad) < 100 {
					bad = append(bad, l)
				}
			}
			if len(out) > 20000 {
				out = out[len(out)-20000:]
			}
			t.Logf("MM2 warnings and errors:\n%s\nMM2 output (tail):\n%s", strings.Join(bad, "\n"), out)
		}
	})
}

// TestMM2Interop runs Apache MM2 from src (cluster A) to dst (cluster B)
// and checks that mirrorclient on B reads MM2's checkpoints and sees src
// upstream. src's heartbeats on A are written by kmirror's heartbeat
// emitter, so the test also checks that MM2 replicates them.
func TestMM2Interop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Apache MirrorMaker 2")
	}
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	src, dst := alias(t, "src"), alias(t, "dst")
	topic := testkafka.Topic(t, "orders")
	group := testkafka.Topic(t, "app")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// 50 records in each of 2 partitions on A.
	a.CreateTopic(t, topic, 2, nil)
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	// c.Produce picks partitions itself; these records name theirs.
	if err := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The group reads everything, then commits all of partition 0 and
	// the first 20 records of partition 1.
	consumer := a.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for seen := 0; seen < 100; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		seen += fs.NumRecords()
	}
	committed := map[int32]int64{0: 50, 1: 20}
	var commitErr error
	consumer.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {
		0: {Epoch: -1, Offset: committed[0]}, 1: {Epoch: -1, Offset: committed[1]},
	}}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						commitErr = err
					}
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	consumer.Close() // leave the group so that it is empty

	// kmirror's emitter stands in for a dst->src flow writing heartbeats
	// into A; MM2 must replicate them to B as src.heartbeats.
	hbCl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	em := heartbeat.New(hbCl, kadm.NewClient(hbCl), "heartbeats", dst, src, 1, 500*time.Millisecond, slog.New(slog.DiscardHandler))
	if err := em.CreateTopic(ctx); err != nil {
		t.Fatal(err)
	}
	hbDone := make(chan error, 1)
	go func() { hbDone <- em.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-hbDone })

	startMM2(t, strings.Join([]string{
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
		dst + ".bootstrap.servers = " + strings.Join(b.Bootstrap, ","),
		src + "->" + dst + ".enabled = true",
		src + "->" + dst + ".topics = " + topic,
		src + "->" + dst + ".groups = " + group,
		dst + "->" + src + ".emit.heartbeats.enabled = false",
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"sync.topic.acls.enabled = false",
		"emit.heartbeats.interval.seconds = 1",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.topics.interval.seconds = 2",
		"refresh.groups.interval.seconds = 2",
		"sync.group.offsets.enabled = true",
		"sync.group.offsets.interval.seconds = 1",
		dst + ".offset.flush.interval.ms = 1000",
	}, "\n")+"\n", dst)
	started := time.Now()

	mc := realClient(t, b)
	remote := src + "." + topic
	bAdm := b.Admin(t)
	var got map[mirrorclient.TopicPartition]int64
	var synced map[int32]int64
	var state string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last state: %s", state)
		}
	})
	testwait.For(t, 180*time.Second, "MM2 checkpoints for both partitions, matching the group offsets MM2 synced to B", func() bool {
		var err error
		got, err = mc.RemoteConsumerOffsets(ctx, group, src, 10*time.Second)
		state = fmt.Sprintf("checkpoints %v, err %v", got, err)
		if err != nil || len(got) != 2 {
			return false
		}
		fo, err := bAdm.FetchOffsets(ctx, group)
		if err != nil {
			state += fmt.Sprintf("; fetching group offsets on B: %v", err)
			return false
		}
		synced = map[int32]int64{}
		fo.Each(func(o kadm.OffsetResponse) {
			if o.Topic == remote && o.Err == nil {
				synced[o.Partition] = o.At
			}
		})
		state += fmt.Sprintf("; group offsets on B %v", synced)
		for p := range int32(2) {
			if got[mirrorclient.TopicPartition{Topic: remote, Partition: p}] != synced[p] {
				return false
			}
		}
		return true
	})
	t.Logf("after %v: checkpointed offsets on %s: %v (committed on %s: %v; synced to the group on %s: %v; skipped %d)",
		time.Since(started).Round(time.Second), dst, got, src, committed, dst, synced, mc.SkippedRecords())
	for p, up := range committed {
		off := got[mirrorclient.TopicPartition{Topic: remote, Partition: p}]
		// MM2 translates conservatively: never past the commit, and
		// past the first record once a commit is past it.
		if off < 1 || off > up {
			t.Errorf("partition %d: translated offset %d not in [1, %d]", p, off, up)
		}
	}
	if s := mc.SkippedRecords(); s != 0 {
		t.Errorf("skipped %d of MM2's checkpoint records", s)
	}

	// Topology: src.heartbeats arrives with the first topic refresh
	// after the emitter's heartbeats exist.
	testwait.For(t, 60*time.Second, "src.heartbeats on B", func() bool {
		hops, err := mc.ReplicationHops(ctx, src)
		return err == nil && hops == 1
	})
	up, err := mc.UpstreamClusters(ctx)
	if err != nil || !slices.Contains(up, src) {
		t.Errorf("UpstreamClusters = %q, %v; want it to contain %s", up, err, src)
	}
	hb, err := mc.HeartbeatTopics(ctx)
	if err != nil || !slices.Contains(hb, "heartbeats") || !slices.Contains(hb, src+".heartbeats") {
		t.Errorf("HeartbeatTopics = %q, %v; want heartbeats and %s.heartbeats", hb, err, src)
	}
	cps, err := mc.CheckpointTopics(ctx)
	if err != nil || !slices.Contains(cps, src+".checkpoints.internal") {
		t.Errorf("CheckpointTopics = %q, %v", cps, err)
	}
	from, err := mc.RemoteTopicsFrom(ctx, src)
	// Other tests' heartbeats topics on the shared cluster A may be
	// replicated too.
	if err != nil || !slices.Contains(from, src+".heartbeats") || !slices.Contains(from, remote) {
		t.Errorf("RemoteTopicsFrom(%s) = %q, %v; want %s.heartbeats and %s in it", src, from, err, src, remote)
	}
	if hops, _ := mc.ReplicationHops(ctx, dst); hops != -1 {
		t.Errorf("ReplicationHops(%s) = %d, want -1", dst, hops)
	}

	// Heartbeats written by kmirror, copied by MM2, decode unchanged; and
	// MM2's own heartbeats on B decode with kmirror's decoder.
	copied := 0
	for _, r := range b.ReadAll(t, src+".heartbeats") {
		h, err := wire.DecodeHeartbeat(r.Key, r.Value)
		if err != nil || h.Timestamp != r.Timestamp.UnixMilli() {
			t.Errorf("%s.heartbeats offset %d: %+v, %v", src, r.Offset, h, err)
		}
		// Other tests write heartbeats to the shared cluster A too.
		if h.SourceAlias == dst && h.TargetAlias == src {
			copied++
		}
	}
	fromMM2 := 0
	for _, r := range b.ReadAll(t, "heartbeats") {
		h, err := wire.DecodeHeartbeat(r.Key, r.Value)
		if err == nil && h.SourceAlias == src && h.TargetAlias == dst {
			fromMM2++
			if r.Partition != 0 || h.Timestamp != r.Timestamp.UnixMilli() {
				t.Errorf("MM2 heartbeat at partition %d offset %d: timestamp %d, record timestamp %d", r.Partition, r.Offset, h.Timestamp, r.Timestamp.UnixMilli())
			}
		}
	}
	t.Logf("kmirror sent %d heartbeats to %s, MM2 copied %d to %s; MM2 wrote %d (%s,%s) heartbeats on %s",
		em.Sent(), src, copied, dst, fromMM2, src, dst, dst)
	if copied == 0 || fromMM2 == 0 {
		t.Errorf("copied %d kmirror heartbeats, read %d MM2 heartbeats; want both > 0", copied, fromMM2)
	}
}

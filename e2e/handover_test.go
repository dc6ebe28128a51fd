package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/mirrorclient"
)

// TestWorkersHandoverCheckpoint checks that offset translation stays exact
// when a partition moves to another worker right after it was copied: two
// workers in group mode, a group committed on the source inside each
// partition, the second worker joins and takes one partition over. The
// checkpoints must name, for each committed offset, the target offset of
// the very record the group stopped at, read from the target. Progress is
// saved only every 60 s, so the partition is handed over before its
// worker published its newest offset sync: the revoke must publish it.
// The target topic starts with records of its own, so target offsets
// differ from source ones.
func TestWorkersHandoverCheckpoint(t *testing.T) {
	t.Parallel()
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		handoverCheckpoint(t)
	})
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		handoverCheckpoint(t, reencodeAll)
	})
	// Exactly-once: the partitions move with their slots.
	t.Run("exactly-once", func(t *testing.T) {
		t.Parallel()
		handoverCheckpoint(t, exactlyOnce)
	})
}

// exactlyOnce makes handoverCheckpoint's flow exactly-once; as a
// properties line it is a comment.
const exactlyOnce = "# exactly-once"

func handoverCheckpoint(t *testing.T, extra ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "handover")
	a.CreateTopic(t, topic, 2, nil)
	const perPartition = 300
	var recs []*kgo.Record
	for p := int32(0); p < 2; p++ {
		for i := 0; i < perPartition; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "p%d-%d", p, i), Value: []byte("v")})
		}
	}
	if err := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	b.CreateTopic(t, remote, 2, nil)
	foreign := map[int32]int{0: 7, 1: 3}
	var local []*kgo.Record
	for p, n := range foreign {
		for i := 0; i < n; i++ {
			local = append(local, &kgo.Record{Topic: remote, Partition: p, Key: fmt.Appendf(nil, "local-%d-%d", p, i)})
		}
	}
	if err := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx(t), local...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	group := topic + "-g"
	commit := map[int32]int64{0: 150, 1: 222}
	commitOnA(t, a, group, topic, commit)

	lines := []string{
		src + "->" + dst + ".topics = " + topic,
		"kmirror.workers = group",
		src + ".consumer.session.timeout.ms = 6000",
		src + ".consumer.heartbeat.interval.ms = 500",
		dst + ".offset.flush.interval.ms = 60000",
		"offset.lag.max = 100000",
		"groups = " + group,
		"emit.checkpoints.interval.seconds = 1",
		"refresh.groups.interval.seconds = 1"}
	if slices.Contains(extra, exactlyOnce) {
		lines = append(lines, dst+".exactly.once.source.support = enabled")
	}
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append(lines, extra...)...))
	const assigned = "partition assigned to this worker"
	w1 := startKmirror(t, cfg)
	started := time.Now()
	total := 2*perPartition + foreign[0] + foreign[1]
	waitFor(t, 60*time.Second, "worker 1 to copy every record", func() bool { return countOrZero(t, b, remote) >= total })
	w2 := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "worker 2 to take a partition over", func() bool { return strings.Contains(w2.log.String(), assigned) })
	// Only a handover before worker 1's first progress save measures
	// anything: that save publishes every partition's newest sync.
	// 60 s leaves a loaded machine room (at 20 s and load 50 the
	// handover came at 18 s).
	if d := time.Since(started); d > 55*time.Second {
		t.Fatalf("the handover came %v after worker 1 started, too close to its first progress save (60 s)", d.Round(time.Millisecond))
	} else {
		t.Logf("handover %v after worker 1 started", d.Round(time.Millisecond))
	}
	for _, l := range strings.Split(w2.log.String(), "\n") {
		if strings.Contains(l, assigned) {
			t.Logf("worker 2: %s", l)
		}
	}

	// Where each committed record is on the target, from the target's data.
	up := a.ReadAll(t, topic)
	down := map[string]int64{}
	for _, r := range b.ReadAll(t, remote) {
		down[string(r.Key)] = r.Offset
	}
	want := map[int32]int64{}
	for _, r := range up {
		if u, ok := commit[r.Partition]; ok && r.Offset == u {
			d, ok := down[string(r.Key)]
			if !ok {
				t.Fatalf("record %s (partition %d offset %d) is not on the target", r.Key, r.Partition, u)
			}
			want[r.Partition] = d
		}
	}
	mc, err := mirrorclient.New(mirrorclient.WithSeedBrokers(b.Bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	// The partition that stayed publishes its sync at worker 1's next
	// progress save, 60 s after its start; the moved one at the handover.
	var got map[int32]int64
	deadline := time.Now().Add(120 * time.Second)
	for {
		got = map[int32]int64{}
		cps, err := mc.RemoteCheckpoints(ctx(t), group, src, 10*time.Second)
		if err == nil {
			for tp, c := range cps {
				if tp.Topic == remote && c.UpstreamOffset == commit[tp.Partition] {
					got[tp.Partition] = c.DownstreamOffset
				}
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("group committed %v on the source; checkpoints translate to %v, the records are at %v on the target", commit, got, want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("checkpoints after the handover: %v, want the target offsets of the committed records %v", got, want)
	}
	w2.stop()
	w1.stop()
	dataPathRan(t, extra, w1, w2)
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestMM1StartsWhereTheGroupStands migrates from MirrorMaker 1: MM1's
// consumer group had copied part of a topic; kmirror mm1 with the same
// consumer.config starts where that group stands instead of copying the
// topic again from its start.
func TestMM1StartsWhereTheGroupStands(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "mm1group")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 100, "r") // 50 per partition

	// MM1's group got to offset 30 on partition 0 and 20 on partition 1.
	group := topic + "-mm1"
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 30, LeaderEpoch: -1})
	o.Add(kadm.Offset{Topic: topic, Partition: 1, At: 20, LeaderEpoch: -1})
	if err := a.Admin(t).CommitAllOffsets(ctx(t), group, o); err != nil {
		t.Fatal(err)
	}
	consumer := writeFile(t, "consumer.properties", "bootstrap.servers="+strings.Join(a.Bootstrap, ",")+"\ngroup.id="+group+"\n")
	producer := writeFile(t, "producer.properties", "bootstrap.servers="+strings.Join(b.Bootstrap, ",")+"\n")
	p := startMM1(t, t.TempDir(), "--consumer.config", consumer, "--producer.config", producer,
		"--whitelist", topic, "--replication.factor", "1", "--source-alias", alias(t, "src"))
	waitFor(t, 60*time.Second, "the records after the group's position", func() bool { return countOrZero(t, b, topic) == 50 })
	time.Sleep(2 * time.Second) // nothing older may follow
	p.stop()
	first := map[int32]int64{}
	for _, r := range b.ReadAll(t, topic) {
		if _, ok := first[r.Partition]; !ok {
			first[r.Partition] = int64(len(r.Key))
		}
	}
	got := b.ReadAll(t, topic)
	if len(got) != 50 {
		t.Fatalf("target holds %d records, want the 20+30 after the group's offsets", len(got))
	}
	src := a.ReadAll(t, topic)
	want := map[int32][]string{}
	for _, r := range src {
		if (r.Partition == 0 && r.Offset >= 30) || (r.Partition == 1 && r.Offset >= 20) {
			want[r.Partition] = append(want[r.Partition], string(r.Key))
		}
	}
	have := map[int32][]string{}
	for _, r := range got {
		have[r.Partition] = append(have[r.Partition], string(r.Key))
	}
	for p := int32(0); p < 2; p++ {
		if strings.Join(have[p], ",") != strings.Join(want[p], ",") {
			t.Errorf("partition %d: target %v, want %v", p, have[p], want[p])
		}
	}
}

package replicate

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestAwaitProducers: a producer that wrote to a remote topic before
// partitions were added to it would fail a record for a new partition at
// once; awaitProducers has it learn them first. A producer that never
// wrote to the topic is not waited for.
func TestAwaitProducers(t *testing.T) {
	f := newFakePair(t)
	f.topics(t, "g", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	knows := client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := knows.ProduceSync(ctx, &kgo.Record{Topic: "A.g", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := client(t, f.dstOpts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := kadm.NewClient(client(t, f.dstOpts)).UpdatePartitions(ctx, 4, "A.g"); err != nil {
		t.Fatal(err)
	}
	if leader, _, _ := knows.PartitionLeader("A.g", 3); leader >= 0 {
		t.Fatal("the producer knows the new partition already; the test proves nothing")
	}
	r := &Replicator{cfg: Config{Target: knows, ByCodec: map[uint8]*kgo.Client{0: fresh}, Log: testLog()}}
	start := time.Now()
	r.awaitProducers([]datapath.Partition{
		{TP: progress.TP{Topic: "g", Partition: 2}, Remote: "A.g"},
		{TP: progress.TP{Topic: "g", Partition: 3}, Remote: "A.g"},
	})
	if leader, _, _ := knows.PartitionLeader("A.g", 3); leader < 0 {
		t.Errorf("after %v the producer does not know partition 3", time.Since(start))
	}
	if time.Since(start) >= metadataWait {
		t.Errorf("waited %v: for the producer that never wrote to the topic too", time.Since(start))
	}
	if err := knows.ProduceSync(ctx, &kgo.Record{Topic: "A.g", Partition: 3, Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("producing to the new partition: %v", err)
	}
}

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestBrokerRestartsLoseNothing replicates between two 3-node clusters while
// a producer keeps writing, and meanwhile kills (SIGKILL) and restarts the
// leader of a source partition, then the leader of a target partition, then
// stops a target node cleanly (SIGTERM) and starts it again, and at last
// kills the whole target cluster for 40 s. Afterwards every source record
// is on the target, in order, on both data paths, and kmirror never exited.
func TestBrokerRestartsLoseNothing(t *testing.T) {
	t.Parallel()
	cs := testkafka.Start(t, testkafka.Options{Clusters: 2, Nodes: 3})
	for _, path := range []struct {
		name  string
		extra []string
	}{
		{"record path", []string{recordPath}},
		{"passthrough", []string{"kmirror.passthrough.enabled = true"}},
	} {
		t.Run(path.name, func(t *testing.T) { brokerRestarts(t, cs[0], cs[1], path.extra) })
	}
}

func brokerRestarts(t *testing.T, a, b *testkafka.Cluster, extra []string) {
	topic := testkafka.Topic(t, "restarts")
	isr2 := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	a.CreateTopic(t, topic, 3, isr2)

	pctx, stopProducing := context.WithCancel(context.Background())
	var produced, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
			kgo.RecordDeliveryTimeout(2*time.Minute))
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "value-%d", i)}
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				} else {
					produced.Add(1)
				}
			})
			if i%100 == 99 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		cl.Flush(context.Background())
	}()

	src, dst := alias(t, "src"), alias(t, "dst")
	lines := append([]string{
		src + "->" + dst + ".topics = " + topic,
		"replication.factor = 3",
		"offset-syncs.topic.replication.factor = 3",
		"offset.storage.replication.factor = 3",
		"checkpoints.topic.replication.factor = 3",
		"heartbeats.topic.replication.factor = 3",
		dst + ".producer.delivery.timeout.ms = 120000",
	}, extra...)
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, lines...))
	remote := src + "." + topic
	p := startKmirror(t, cfg)
	grow := func(what string) {
		t.Helper()
		start := countOrZero(t, b, remote)
		waitFor(t, 90*time.Second, what, func() bool { return countOrZero(t, b, remote) > start+500 })
	}
	grow("first records on the target")

	leader := func(c *testkafka.Cluster, topic string) int32 {
		t.Helper()
		td, err := c.Admin(t).ListTopics(ctx(t), topic)
		if err != nil || td[topic].Err != nil {
			t.Fatalf("metadata of %s: %v %v", topic, err, td[topic].Err)
		}
		return td[topic].Partitions[0].Leader
	}
	bounce := func(c *testkafka.Cluster, side, topic string, kill bool) {
		t.Helper()
		id := leader(c, topic)
		down := true
		// A failure below must not leave the node down for the next
		// subtest, whose RF 3 topics need all three.
		t.Cleanup(func() {
			if down {
				c.StartNode(t, id)
			}
		})
		how := "stopped (SIGTERM)"
		if kill {
			c.KillNode(t, id)
			how = "killed (SIGKILL)"
		} else {
			c.StopNode(t, id)
		}
		t.Logf("%s node %d, leader of %s-0, %s; %d records produced so far", side, id, topic, how, produced.Load())
		grow("replication to go on while " + side + " node " + strconv.Itoa(int(id)) + " is down")
		c.StartNode(t, id)
		down = false
		grow("replication to go on after " + side + " node " + strconv.Itoa(int(id)) + " came back")
	}
	bounce(a, "source", topic, true)
	bounce(b, "target", remote, true)
	bounce(b, "target", remote, false)

	// The whole target cluster goes away for longer than a produce
	// request's timeout, then comes back: kmirror keeps trying and goes on
	// where it was, without a restart.
	nodes := b.Nodes()
	outage := true
	t.Cleanup(func() {
		if outage {
			b.StartNode(t, nodes...)
		}
	})
	for _, id := range nodes {
		b.KillNode(t, id)
	}
	t.Logf("every target node killed (SIGKILL); %d records produced so far", produced.Load())
	time.Sleep(40 * time.Second)
	select {
	case <-p.done:
		t.Fatalf("kmirror exited while the target cluster was down: %v", p.err)
	default:
	}
	b.StartNode(t, nodes...)
	outage = false
	grow("replication to go on after the target cluster came back")

	stopProducing()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Logf("%d source writes failed during the restarts (not acknowledged, so not expected on the target)", n)
	}
	want := a.ReadAll(t, topic)
	waitFor(t, 120*time.Second, "the target to catch up", func() bool { return hasAllKeys(t, b, remote, want) })
	p.stop()
	got := b.ReadAll(t, remote)
	dups := checkNoLoss(t, want, got)
	t.Logf("source %d records, target %d records, duplicates after the broker restarts and the target outage: %d", len(want), len(got), dups)
	if out, code := runKmirror(t, 120*time.Second, "verify", "--config", cfg); code != 0 {
		t.Errorf("kmirror verify after the restarts: exit %d\n%s", code, out)
	}
}

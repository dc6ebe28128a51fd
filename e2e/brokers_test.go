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
// producers keep writing, and meanwhile kills (SIGKILL) and restarts the
// leader of a source partition, then the leader of a target partition, then
// stops a target node cleanly (SIGTERM) and starts it again, and at last
// kills the whole target cluster for 40 s. Both data paths run at once, one
// kmirror each on a topic of its own, so both go through the same faults.
// Afterwards every source record is on the target, in order, on both data
// paths, and neither kmirror exited.
func TestBrokerRestartsLoseNothing(t *testing.T) {
	t.Parallel()
	cs := testkafka.Start(t, testkafka.Options{Clusters: 2, Nodes: 3})
	a, b := cs[0], cs[1]
	var lanes []*restartLane
	for _, path := range []struct {
		name  string
		extra []string
	}{
		{"re-encode", []string{reencodeAll}},
		{"passthrough", []string{"kmirror.passthrough.enabled = true"}},
	} {
		lanes = append(lanes, startRestartLane(t, a, b, path.name, path.extra))
	}
	grow := func(what string) {
		t.Helper()
		for _, l := range lanes {
			start := countOrZero(t, b, l.remote)
			waitFor(t, 90*time.Second, l.name+": "+what, func() bool { return countOrZero(t, b, l.remote) > start+500 })
		}
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
		how := "stopped (SIGTERM)"
		if kill {
			c.KillNode(t, id)
			how = "killed (SIGKILL)"
		} else {
			c.StopNode(t, id)
		}
		t.Logf("%s node %d, leader of %s-0, %s", side, id, topic, how)
		grow("replication to go on while " + side + " node " + strconv.Itoa(int(id)) + " is down")
		c.StartNode(t, id)
		grow("replication to go on after " + side + " node " + strconv.Itoa(int(id)) + " came back")
	}
	bounce(a, "source", lanes[0].topic, true)
	bounce(b, "target", lanes[1].remote, true)
	bounce(b, "target", lanes[0].remote, false)

	// The whole target cluster goes away for longer than a produce
	// request's timeout, then comes back: kmirror keeps trying and goes on
	// where it was, without a restart.
	nodes := b.Nodes()
	for _, id := range nodes {
		b.KillNode(t, id)
	}
	t.Log("every target node killed (SIGKILL)")
	time.Sleep(40 * time.Second)
	for _, l := range lanes {
		select {
		case <-l.p.done:
			t.Fatalf("%s: kmirror exited while the target cluster was down: %v", l.name, l.p.err)
		default:
		}
	}
	b.StartNode(t, nodes...)
	grow("replication to go on after the target cluster came back")

	for _, l := range lanes {
		l.check(t, a, b)
	}
}

// restartLane is one data path's flow in TestBrokerRestartsLoseNothing:
// its topic, its producer and its kmirror.
type restartLane struct {
	name, topic, remote, cfg string
	p                        *proc
	stopProducing            context.CancelFunc
	wg                       sync.WaitGroup
	produced, failed         atomic.Int64
}

func startRestartLane(t *testing.T, a, b *testkafka.Cluster, name string, extra []string) *restartLane {
	l := &restartLane{name: name, topic: testkafka.Topic(t, "restarts")}
	isr2 := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	a.CreateTopic(t, l.topic, 3, isr2)

	pctx, stop := context.WithCancel(context.Background())
	l.stopProducing = stop
	t.Cleanup(stop)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
			kgo.RecordDeliveryTimeout(2*time.Minute))
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: l.topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "value-%d", i)}
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					l.failed.Add(1)
				} else {
					l.produced.Add(1)
				}
			})
			if i%50 == 49 { // about 1,000 records/s: the faults matter, not the volume
				time.Sleep(50 * time.Millisecond)
			}
		}
		cl.Flush(context.Background())
	}()

	src, dst := alias(t, "src"), alias(t, "dst")
	lines := append([]string{
		src + "->" + dst + ".topics = " + l.topic,
		"replication.factor = 3",
		"offset-syncs.topic.replication.factor = 3",
		"offset.storage.replication.factor = 3",
		"checkpoints.topic.replication.factor = 3",
		"heartbeats.topic.replication.factor = 3",
		dst + ".producer.delivery.timeout.ms = 120000",
	}, extra...)
	l.cfg = writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, lines...))
	l.remote = src + "." + l.topic
	l.p = startKmirror(t, l.cfg)
	return l
}

// check stops the lane's producer and compares source and target record
// by record once the target caught up.
func (l *restartLane) check(t *testing.T, a, b *testkafka.Cluster) {
	l.stopProducing()
	l.wg.Wait()
	if n := l.failed.Load(); n > 0 {
		t.Logf("%s: %d source writes failed during the restarts (not acknowledged, so not expected on the target)", l.name, n)
	}
	want := a.ReadAll(t, l.topic)
	waitFor(t, 120*time.Second, l.name+": the target to catch up", func() bool { return hasAllKeys(t, b, l.remote, want) })
	l.p.stop()
	got := b.ReadAll(t, l.remote)
	dups := checkNoLoss(t, want, got)
	t.Logf("%s: source %d records (%d produced), target %d records, duplicates after the broker restarts and the target outage: %d", l.name, len(want), l.produced.Load(), len(got), dups)
	if out, code := runKmirror(t, 120*time.Second, "verify", "--config", l.cfg); code != 0 {
		t.Errorf("%s: kmirror verify after the restarts: exit %d\n%s", l.name, code, out)
	}
}

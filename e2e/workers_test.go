package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestWorkersShareAndTakeOver runs two kmirror workers on one flow in group
// mode: the source's group coordinator spreads the partitions over both;
// one is killed with SIGKILL under load and the other takes its partitions
// over. Nothing is lost.
func TestWorkersShareAndTakeOver(t *testing.T) {
	t.Parallel()
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		workersTakeOver(t)
	})
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		workersTakeOver(t, reencodeAll)
	})
}

func workersTakeOver(t *testing.T, extra ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "workers")
	a.CreateTopic(t, topic, 6, nil)

	stopProducing := produceSteadily(t, a, topic, 6)

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{
		src + "->" + dst + ".topics = " + topic,
		"kmirror.workers = group",
		src + ".consumer.session.timeout.ms = 6000",
		src + ".consumer.heartbeat.interval.ms = 500"}, extra...)...))
	remote := src + "." + topic
	w1 := startKmirror(t, cfg)
	w2 := startKmirror(t, cfg)
	owns := func(p *proc) int { return strings.Count(p.log.String(), "partition assigned to this worker") }
	waitFor(t, 60*time.Second, "both workers to own partitions", func() bool { return owns(w1) > 0 && owns(w2) > 0 })
	waitFor(t, 60*time.Second, "records on the target", func() bool { return countOrZero(t, b, remote) > 2000 })
	t.Logf("worker 1 was assigned %d partitions, worker 2 %d", owns(w1), owns(w2))
	// Progress is saved every second: let worker 1 save some before it
	// dies. Time passing is the point (saves are on a timer), not a wait
	// for something the test can see.
	time.Sleep(2500 * time.Millisecond)
	before := owns(w2)
	logAtKill := len(strings.Split(w2.log.String(), "\n")) - 1
	w1.kill()
	waitGrowth(t, 60*time.Second, "records copied after worker 1 was killed", func() int { return countOrZero(t, b, remote) }, 1000)
	stopProducing()

	want := a.ReadAll(t, topic)
	waitFor(t, 90*time.Second, "worker 2 to copy everything", func() bool { return hasAllKeys(t, b, remote, want) })
	// One worker at a time runs the checkpoints: the one that owns
	// partition 0; after the kill that is worker 2 (checked every 2 s).
	const leading = "this worker leads the flow"
	waitFor(t, 30*time.Second, "worker 2, the only one left, to lead the flow's checkpoints", func() bool {
		return strings.Contains(w2.log.String(), leading)
	})
	w2.stop()
	got := b.ReadAll(t, remote)
	dups := checkNoLoss(t, want, got)
	t.Logf("source %d records, target %d, duplicates after the takeover: %d; worker 2 was assigned %d partitions in all", len(want), len(got), dups, owns(w2))
	dataPathRan(t, extra, w2)
	// The partitions worker 2 took over resume where worker 1's saved
	// progress stood (worker 2 reads it when they are assigned), not where
	// worker 2 last looked, which was before worker 1 copied anything.
	// (A partition worker 1 had saved nothing for may start at 0; one
	// run showed that for one of three partitions — see issue notes.)
	var taken, resumed int
	for _, l := range strings.Split(w2.log.String(), "\n")[logAtKill:] {
		i := strings.Index(l, " from=")
		if !strings.Contains(l, "partition assigned to this worker") || i < 0 {
			continue
		}
		taken++
		if from, err := strconv.ParseInt(strings.Fields(l[i+len(" from="):])[0], 10, 64); err == nil && from > 0 {
			resumed++
		} else {
			t.Logf("taken over without saved progress: %s", l)
		}
	}
	t.Logf("checkpoint leadership taken: worker 1 %d times, worker 2 %d times", strings.Count(w1.log.String(), leading), strings.Count(w2.log.String(), leading))
	if taken == 0 || resumed == 0 {
		t.Errorf("%d partitions taken over after the kill, %d resumed from worker 1's progress; want some of each", taken, resumed)
	}
	// Every assigned partition is copied without the stall watchdog's help
	// (health.Watcher restarts a partition that makes no progress).
	for i, w := range []*proc{w1, w2} {
		if n := strings.Count(w.log.String(), "partition stalled"); n > 0 {
			t.Errorf("worker %d: %d partitions stalled and were restarted by the watchdog", i+1, n)
		}
	}
	if owns(w2) <= before {
		t.Errorf("worker 2 never took over worker 1's partitions: %d assignments before the kill, %d after", before, owns(w2))
	}
}

// produceSteadily writes keyed records ("0", "1", ... with values "v0",
// "v1", ...) round robin over the partitions of topic on c, pausing 20 ms
// every 100, until stop is called; stop waits until they are flushed. The
// test's end stops it too.
func produceSteadily(t *testing.T, c *testkafka.Cluster, topic string, partitions int) (stop func()) {
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprint("v", i))}, nil)
			if i%100 == 99 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		cl.Flush(context.Background())
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

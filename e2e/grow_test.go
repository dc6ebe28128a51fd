package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestGrownPartitionsWaitForTarget grows a source topic from 2 to 48
// partitions while a producer writes into every partition, new ones
// included. The remote partitions kmirror adds on the target must not be
// written before the target hosts them: no produce to them may fail and
// be retried (passthrough logs and counts every first retry; the record
// path counts a record that fails), and every record arrives as it was
// written (key, value, headers, timestamp), in single and group mode.
func TestGrownPartitionsWaitForTarget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{"passthrough", nil},
		{"passthrough group", []string{"kmirror.workers = group"}},
		{"re-encode", []string{reencodeAll}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			grownPartitions(t, tt.extra...)
		})
	}
}

func grownPartitions(t *testing.T, extra ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "grown")
	const before, after = 2, 48
	a.CreateTopic(t, topic, before, nil)

	src, dst := alias(t, "src"), alias(t, "dst")
	metricsAddr := freeAddr(t)
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{src + "->" + dst + ".topics = " + topic}, extra...)...))
	p := startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	remote := src + "." + topic

	w := startWriter(t, a, topic, before)
	waitFor(t, 60*time.Second, "the first records copied", func() bool { return countOrZero(t, b, remote) > 0 })
	if _, err := a.Admin(t).UpdatePartitions(ctx(t), after, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the source to list the new partitions", func() bool {
		td, err := a.Admin(t).ListTopics(ctx(t), topic)
		return err == nil && len(td[topic].Partitions) == after
	})
	w.grow(after)
	waitFor(t, 60*time.Second, "kmirror to add the partitions on the target", func() bool {
		return strings.Contains(p.log.String(), "added partitions to remote topic")
	})
	// Records keep going into every partition while the target hosts
	// the new ones and kmirror starts copying them.
	w.waitWritten(t, 3000)
	w.stop()

	want := a.ReadAll(t, topic)
	waitFor(t, 90*time.Second, "every record copied", func() bool { return countOrZero(t, b, remote) >= len(want) })
	_, m := httpGet("http://" + metricsAddr + "/metrics")
	p.stop()
	got := b.ReadAll(t, remote)
	if dups := checkNoLoss(t, want, got); dups != 0 || len(got) != len(want) {
		t.Errorf("%d duplicates, %d records on the target for %d on the source", dups, len(got), len(want))
	}
	sameRecords(t, want, got, "")
	newParts := map[int32]bool{}
	for _, r := range got {
		if r.Partition >= before {
			newParts[r.Partition] = true
		}
	}
	if len(newParts) != after-before {
		t.Errorf("records copied into %d of the %d new partitions", len(newParts), after-before)
	}

	// Nothing was written to a partition the target did not host yet.
	if n := strings.Count(p.log.String(), "produce failed"); n != 0 {
		t.Errorf("%d produce retries logged, want none", n)
	}
	if !strings.Contains(m, "kmirror_partition_state") {
		t.Errorf("no partition metrics scraped:\n%s", m)
	}
	re := regexp.MustCompile(`(?m)^kmirror_partition_errors_total\{[^}]*source="` + src + `"[^}]*\} (\S+)$`)
	if errs := re.FindAllString(m, -1); len(errs) > 0 {
		t.Errorf("partition errors counted, want none:\n%s", strings.Join(errs, "\n"))
	}
	t.Logf("%d records, %d in the %d new partitions, copied once", len(got), countFrom(got, before), after-before)
}

func countFrom(rs []*kgo.Record, partition int32) int {
	n := 0
	for _, r := range rs {
		if r.Partition >= partition {
			n++
		}
	}
	return n
}

// writer produces records with keys, headers and timestamps into every
// partition of a topic, a batch every 20 ms, until stopped.
type writer struct {
	written atomic.Int64
	grown   chan int32
	done    chan struct{}
	wg      sync.WaitGroup
}

func startWriter(t *testing.T, c *testkafka.Cluster, topic string, n int32) *writer {
	w := &writer{grown: make(chan int32), done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		// Timestamps of their own, recent enough for retention to keep them.
		ts := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		for i := 0; ; i++ {
			select {
			case <-w.done:
				return
			case n = <-w.grown:
				// A new client: its first metadata lists the new partitions.
				cl = c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			case <-time.After(20 * time.Millisecond):
			}
			var recs []*kgo.Record
			for p := range n {
				k := fmt.Sprintf("k-%d-%d", i, p)
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte("v-" + k),
					Timestamp: ts.Add(time.Duration(i) * time.Millisecond),
					Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(k)}, {Key: "empty", Value: []byte{}}}})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing to the source: %v", err)
				return
			}
			w.written.Add(int64(len(recs)))
		}
	}()
	return w
}

// grow makes the writer write into n partitions from now on.
func (w *writer) grow(n int32) { w.grown <- n }

// waitWritten waits until n more records were written.
func (w *writer) waitWritten(t *testing.T, n int64) {
	t.Helper()
	from := w.written.Load()
	waitFor(t, 60*time.Second, fmt.Sprintf("%d more records written", n), func() bool { return w.written.Load()-from >= n })
}

func (w *writer) stop() {
	close(w.done)
	w.wg.Wait()
}

// TestUncreatableRemoteTopicVisible replicates a topic whose remote name
// is too long for Kafka (over 249 characters), beside one that copies:
// the target cannot make the remote topic, so its partitions wait with the
// reason in /flows and in kmirror_partition_state{state="waiting"}, the
// start says how many wait, and /ready answers 503, while the other topic
// is copied and running.
func TestUncreatableRemoteTopicVisible(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	good := testkafka.Topic(t, "fine")
	long := testkafka.Topic(t, "long")
	long += strings.Repeat("x", 240-len(long))
	a.CreateTopic(t, good, 1, nil)
	a.CreateTopic(t, long, 2, nil)
	produceN(t, a, good, 1, 10, "g")
	produceN(t, a, long, 2, 10, "l")

	src, dst := alias(t, "src"), alias(t, "dst")
	name := src + "->" + dst
	b.CreateTopic(t, src+"."+good, 1, nil) // hosted from the start
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		name+".topics = "+regexp.QuoteMeta(good)+"|"+regexp.QuoteMeta(long),
		"kmirror.rest.listener = "+addr, "kmirror.rest.auth = none"))
	p := startKmirror(t, "--metrics-addr", metricsAddr, cfg)

	waitFor(t, 60*time.Second, "the other topic copied", func() bool { return countOrZero(t, b, src+"."+good) == 10 })
	waitFor(t, 30*time.Second, "the long topic's partitions waiting with the reason, the other running", func() bool {
		waiting, running := 0, 0
		for _, p := range flowParts(addr, name) {
			switch {
			case p.Topic == long && p.State == "waiting" && strings.Contains(p.Error, "remote topic"):
				waiting++
			case p.Topic == good && p.State == "running":
				running++
			}
		}
		return waiting == 2 && running == 1
	})
	t.Logf("%+v", flowParts(addr, name))
	if code, body := httpGet("http://" + addr + "/ready"); code != 503 {
		t.Errorf("/ready answered %d %s with partitions that cannot be copied, want 503", code, body)
	}
	remote := src + "." + long
	for p := range 2 {
		labels := fmt.Sprintf(`partition="%d",source="%s",state="waiting",target="%s",topic="%s"`, p, src, dst, regexp.QuoteMeta(remote))
		waitFor(t, 30*time.Second, `kmirror_partition_state{state="waiting"} 1`, func() bool { return metricValue(metricsAddr, "kmirror_partition_state", labels) == 1 })
	}
	if !regexp.MustCompile(`flow started.* partitions=1 waiting_for_target=2`).MatchString(p.log.String()) {
		t.Errorf("the start does not say 1 partition copies and 2 wait:\n%s", p.log.String())
	}
	p.stop()
}

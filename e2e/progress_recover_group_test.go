package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestProgressRecoveredInGroupMode deletes the progress topic while a
// worker in group mode (kmirror.workers = group) is down. On restart the
// group assigns it the partitions, and it recovers each one's position
// from the last offset sync as it is assigned (datapath.Group.Recover),
// not at its first topic refresh for every partition of the flow: a few
// duplicates, not a full copy, and nothing missing.
func TestProgressRecoveredInGroupMode(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "recovergroup")
	a.CreateTopic(t, topic, 3, nil)
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	progressTopic := "mm2-offsets." + src + ".internal"
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic, "kmirror.workers = group", "offset.flush.interval.ms = 1000"))
	t.Cleanup(func() {
		_, _ = b.Admin(t).DeleteTopics(ctx(t), remote, progressTopic, "mm2-offset-syncs."+src+".internal")
	})
	next := 0
	produce := func(n int) {
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(next % 3), Key: fmt.Appendf(nil, "k-%d", next), Value: fmt.Appendf(nil, "value-%d", next)})
			next++
		}
		a.Produce(t, rs...)
	}
	caughtUp := func() bool { return hasAllKeys(t, b, remote, a.ReadAll(t, topic)) }

	p := startKmirror(t, cfg)
	produce(3000)
	waitFor(t, 120*time.Second, "the records on the target", caughtUp)
	before := countOrZero(t, b, remote)
	produce(1500)
	waitFor(t, 60*time.Second, "the copy of the new records to start", func() bool { return countOrZero(t, b, remote) > before })
	p.kill()
	if _, err := b.Admin(t).DeleteTopics(ctx(t), progressTopic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the progress topic deleted", func() bool { return !hasTopic(t, b, progressTopic) })
	produce(1500)
	p = startKmirror(t, cfg)
	waitFor(t, 120*time.Second, "the target to catch up after a restart without progress", caughtUp)
	p.stop()
	want, got := a.ReadAll(t, topic), b.ReadAll(t, remote)
	dups := checkNoLoss(t, want, got)
	t.Logf("without progress, group mode: source %d records, target %d, %d duplicates (a full copy would add %d)", len(want), len(got), dups, len(want)-1500)
	if dups > 1500 {
		t.Errorf("%d duplicates from a restart without progress, want a few (at most offset.lag.max per partition and the records in flight)", dups)
	}
	if n := strings.Count(p.log.String(), "position recovered from its last offset sync"); n != 3 {
		t.Errorf("%d partitions said they recovered their position from an offset sync, want 3", n)
	}
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestProgressTopicDeleted deletes the progress topic (the Connect offsets
// topic mm2-offsets.<source>.internal) on the target:
//
//   - while kmirror runs: /ready answers 503 naming it, the topic is made
//     again, kmirror_progress_topic_recreated_total counts it, and the
//     progress held in memory is written to it; a kill -9 and a restart
//     then copy again only the records since the last save, and nothing
//     is missing;
//   - while kmirror is down (after a kill -9): the restart finds no
//     progress for remote partitions that hold records, says so and
//     recovers each position from the last offset sync: a few duplicates,
//     not a full copy, and nothing is missing; with exactly-once, no
//     duplicate (the target's committed records after the sync are
//     paired with the source's).
//
// Every record is checked, partition by partition, in order.
func TestProgressTopicDeleted(t *testing.T) {
	t.Parallel()
	t.Run("at-least-once", func(t *testing.T) { progressTopicDeleted(t, false) })
	t.Run("exactly-once", func(t *testing.T) { progressTopicDeleted(t, true) })
}

func progressTopicDeleted(t *testing.T, eos bool) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "progressgone")
	a.CreateTopic(t, topic, 3, nil)
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	progressTopic := "mm2-offsets." + src + ".internal"
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	extra := []string{src + "->" + dst + ".topics = " + topic,
		"kmirror.rest.listener = " + addr, "kmirror.rest.auth = none",
		"offset.flush.interval.ms = 1000"}
	if eos {
		extra = append(extra, dst+".exactly.once.source.support = enabled")
	}
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, extra...))
	t.Cleanup(func() {
		_, _ = b.Admin(t).DeleteTopics(context.Background(), remote, progressTopic, "mm2-offset-syncs."+src+".internal")
	})

	next := 0
	produce := func(n int) {
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(next % 3), Key: []byte(fmt.Sprintf("k-%d", next)), Value: []byte(fmt.Sprintf("value-%d", next))})
			next++
		}
		a.Produce(t, rs...)
	}
	caughtUp := func() bool { return hasAllKeys(t, b, remote, a.ReadAll(t, topic)) }
	// copyUnderWay produces n records and waits until some of them are
	// on the target (read_committed), so a kill that follows hits a copy
	// that has started, however loaded the machine.
	copyUnderWay := func(n int) {
		before := countOrZero(t, b, remote)
		produce(n)
		waitFor(t, 60*time.Second, "the copy of the new records to start", func() bool { return countOrZero(t, b, remote) > before })
	}
	metric := func(name string) string {
		_, m := httpGet("http://" + metricsAddr + "/metrics")
		prefix := fmt.Sprintf("%s{source=%q,target=%q} ", name, src, dst)
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
		}
		return ""
	}

	// The repair pauses 3 s between finding the topic missing and making
	// it again, so that /ready is seen meanwhile even on a loaded machine
	// (without the pause it lasts a few hundred ms).
	p := startKmirrorEnv(t, []string{"KMIRROR_FAILPOINT_PROGRESS_REPAIR_PAUSE=3s"}, "--metrics-addr", metricsAddr, cfg)
	produce(3000)
	waitFor(t, 90*time.Second, "the first records on the target", caughtUp)

	// Deleted while kmirror runs.
	var notReady atomic.Value // the first 503 body naming the topic
	pollCtx, stopPolling := context.WithCancel(context.Background())
	defer stopPolling()
	go func() {
		for pollCtx.Err() == nil {
			if code, body := httpGet("http://" + addr + "/ready"); code == 503 && strings.Contains(body, progressTopic) && notReady.Load() == nil {
				notReady.Store(body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if _, err := b.Admin(t).DeleteTopics(ctx(t), progressTopic); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	produce(3000) // progress moves: its save finds the topic gone
	waitFor(t, 60*time.Second, "the progress topic made again", func() bool {
		return metric("kmirror_progress_topic_recreated_total") == "1" && hasTopic(t, b, progressTopic)
	})
	t.Logf("progress topic made again %v after its deletion", time.Since(deleted).Round(100*time.Millisecond))
	waitFor(t, 10*time.Second, "/ready 503 naming the progress topic", func() bool { return notReady.Load() != nil })
	t.Logf("/ready while the topic was missing: %s", strings.Join(strings.Fields(notReady.Load().(string)), " "))
	stopPolling()
	if m := metric("kmirror_progress_topic_missing"); m != "0" {
		t.Errorf("kmirror_progress_topic_missing %q after the topic was made again, want 0", m)
	}
	waitFor(t, 20*time.Second, "/ready 200 again", func() bool { code, _ := httpGet("http://" + addr + "/ready"); return code == 200 })
	waitFor(t, 90*time.Second, "the records since the deletion on the target", caughtUp)
	// The topic holds the progress of every partition, up to its end.
	tgtConn := []kgo.Opt{kgo.SeedBrokers(b.Bootstrap...)}
	ends := map[int32]int64{}
	for _, r := range a.ReadAll(t, topic) {
		ends[r.Partition] = max(ends[r.Partition], r.Offset)
	}
	var lastSaved map[progress.TP]int64
	var lastErr error
	defer func() {
		if t.Failed() {
			t.Logf("last read of %s: %v (error %v); source ends %v", progressTopic, lastSaved, lastErr, ends)
		}
	}()
	waitFor(t, 60*time.Second, "the progress of every partition in the topic made again", func() bool {
		saved, err := progress.Read(ctx(t), tgtConn, progressTopic, src, slog.New(slog.NewTextHandler(io.Discard, nil)))
		lastSaved, lastErr = saved, err
		if err != nil {
			return false
		}
		for p, end := range ends {
			if saved[progress.TP{Topic: topic, Partition: p}] != end {
				return false
			}
		}
		return true
	})
	if v, _ := topicOverride(t, b, progressTopic, "cleanup.policy"); v != "compact" {
		t.Errorf("progress topic made again with cleanup.policy %q, want compact", v)
	}

	// kill -9 and a restart: only what was copied since the last save
	// is copied again.
	copyUnderWay(1500) // killed mid-copy (or just after), not an assertion
	p.kill()
	produce(1500)
	p = startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	waitFor(t, 90*time.Second, "the target to catch up after the restart", caughtUp)
	want := a.ReadAll(t, topic)
	dups := checkNoLoss(t, want, b.ReadAll(t, remote))
	t.Logf("after a kill -9 and a restart: source %d records, %d duplicates", len(want), dups)
	if dups > 3000 || (eos && dups != 0) {
		t.Errorf("%d duplicates after a restart, want at most the records produced around the kill (3000), none with exactly-once", dups)
	}

	// Deleted while kmirror is down: positions from the offset syncs.
	copyUnderWay(1500)
	p.kill()
	if _, err := b.Admin(t).DeleteTopics(ctx(t), progressTopic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the progress topic deleted", func() bool { return !hasTopic(t, b, progressTopic) })
	produce(1500)
	p = startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	waitFor(t, 90*time.Second, "the target to catch up after a restart without progress", caughtUp)
	p.stop()
	want = a.ReadAll(t, topic)
	got := b.ReadAll(t, remote)
	all := checkNoLoss(t, want, got)
	t.Logf("without progress: source %d records, target %d, %d more duplicates (a full copy would add %d)", len(want), len(got), all-dups, len(want)-1500)
	if all-dups > 1000 || (eos && all-dups != 0) {
		t.Errorf("%d duplicates from a restart without progress, want a few (at most offset.lag.max per partition and the records in flight), none with exactly-once (the committed records after each sync are paired with the source's)", all-dups)
	}
	if n := strings.Count(p.log.String(), "position recovered from its last offset sync"); n != 3 {
		t.Errorf("%d partitions said they recovered their position from an offset sync, want 3\n", n)
	}
}

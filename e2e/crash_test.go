package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestKillNineLosesNothing kills kmirror with SIGKILL five times while a
// producer keeps writing, restarts it each time, and then checks that every
// source record reached the target in order, reporting duplicates.
func TestKillNineLosesNothing(t *testing.T) {
	t.Parallel()
	t.Run("at-least-once", func(t *testing.T) {
		t.Parallel()
		killNine(t, false)
	}) // passthrough, the default
	t.Run("at-least-once re-encode", func(t *testing.T) {
		t.Parallel()
		killNine(t, false, reencodeAll)
	})
	t.Run("at-least-once re-encode one lane", func(t *testing.T) {
		t.Parallel()
		killNine(t, false, reencodeAll, oneLane)
	})
	// Exactly-once: a read_committed reader of the target sees no
	// duplicate at all.
	// passthrough in target transactions, the default
	t.Run("exactly-once", func(t *testing.T) {
		t.Parallel()
		killNine(t, true)
	})
	t.Run("exactly-once two lanes", func(t *testing.T) {
		t.Parallel()
		killNine(t, true, twoLanes)
	})
	t.Run("exactly-once re-encode", func(t *testing.T) {
		t.Parallel()
		killNine(t, true, reencodeAll)
	})
	// Source producers in transactions, a quarter of them aborted: the
	// target holds the committed records only, once each.
	t.Run("exactly-once transactional source", func(t *testing.T) {
		t.Parallel()
		killNine(t, true, txnSource)
	})
}

// txnSource makes killNine's source producer transactional, aborting
// every fourth transaction; as a properties line it is a comment.
const txnSource = "# transactional source producer"

func killNine(t *testing.T, eos bool, extraLines ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "crash")
	a.CreateTopic(t, topic, 3, nil)

	// A steady producer: sequence numbers as keys, round robin partitions.
	pctx, stopProducing := context.WithCancel(context.Background())
	var produced atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if slices.Contains(extraLines, txnSource) {
			produceInTransactions(pctx, t, a, topic, &produced)
			return
		}
		cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%d", i))}
			cl.Produce(pctx, r, func(_ *kgo.Record, err error) {
				if err == nil {
					produced.Add(1)
				}
			})
			if i%200 == 199 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		cl.Flush(context.Background())
	}()

	src, dst := alias(t, "src"), alias(t, "dst")
	extra := append([]string{src + "->" + dst + ".topics = " + topic}, extraLines...)
	if eos {
		extra = append(extra, dst+".exactly.once.source.support = enabled")
	}
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, extra...))
	remote := src + "." + topic
	for round := 0; round < 5; round++ {
		p := startKmirror(t, cfg)
		// Let it copy something, then kill it at a random moment.
		start := countOrZero(t, b, remote)
		waitFor(t, 60*time.Second, "progress in round "+strconv.Itoa(round), func() bool {
			return countOrZero(t, b, remote) > start+200
		})
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		p.kill()
		t.Logf("round %d: killed with SIGKILL after the target held %d records (%d produced)", round, countOrZero(t, b, remote), produced.Load())
	}
	stopProducing()
	wg.Wait()

	want := a.ReadAll(t, topic)
	p := startKmirror(t, cfg)
	waitFor(t, 90*time.Second, "the target to catch up", func() bool {
		return hasAllKeys(t, b, remote, want)
	})
	p.stop()

	got := b.ReadAll(t, remote)
	dups := checkNoLoss(t, want, got)
	t.Logf("source %d records, target %d records, duplicates after 5 SIGKILLs: %d", len(want), len(got), dups)
	// Progress is saved at least every flow.CommitRecords acknowledged
	// records; with the records in flight, a crash re-copies well under
	// three times that (docs/architecture.md).
	if limit := 5 * 3 * flow.CommitRecords; dups > limit {
		t.Errorf("%d duplicates after 5 crashes, more than the documented bound %d", dups, limit)
	}
	// kmirror's own check agrees: every copied record is on the target.
	if out, code := runKmirror(t, 120*time.Second, "verify", "--config", cfg); code != 0 {
		t.Errorf("kmirror verify after the crashes: exit %d\n%s", code, out)
	}
	if eos && dups != 0 {
		t.Errorf("exactly-once: %d duplicates seen by a read_committed reader, want 0", dups)
	}
}

// produceInTransactions writes sequence-numbered records to topic's three
// partitions in transactions of 60 records until ctx ends, aborting every
// fourth; produced counts the committed records.
func produceInTransactions(ctx context.Context, t *testing.T, a *testkafka.Cluster, topic string, produced *atomic.Int64) {
	cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(topic+"-source"))
	for txn, i := 0, 0; ctx.Err() == nil; txn++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Errorf("source producer: %v", err)
			return
		}
		for range 60 {
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%d", i))}
			cl.Produce(context.Background(), r, nil)
			i++
		}
		commit := kgo.TransactionEndTry(txn%4 != 3)
		if err := cl.Flush(context.Background()); err != nil {
			commit = kgo.TryAbort
		}
		if err := cl.EndTransaction(context.Background(), commit); err != nil {
			t.Errorf("source producer: ending transaction %d: %v", txn, err)
			return
		}
		if commit == kgo.TryCommit {
			produced.Add(60)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countOrZero(t *testing.T, c *testkafka.Cluster, topic string) int {
	if !hasTopic(t, c, topic) {
		return 0
	}
	return countAll(t, c, topic)
}

func hasAllKeys(t *testing.T, c *testkafka.Cluster, topic string, want []*kgo.Record) bool {
	if !hasTopic(t, c, topic) {
		return false
	}
	have := map[string]bool{}
	for _, r := range c.ReadAll(t, topic) {
		have[string(r.Key)] = true
	}
	for _, r := range want {
		if !have[string(r.Key)] {
			return false
		}
	}
	return true
}

// checkNoLoss checks that got holds every record of want in the same
// partition and, once duplicates are dropped, in the same order. It
// returns the number of duplicates.
func checkNoLoss(t *testing.T, want, got []*kgo.Record) int {
	t.Helper()
	per := func(rs []*kgo.Record) map[int32][]*kgo.Record {
		m := map[int32][]*kgo.Record{}
		for _, r := range rs {
			m[r.Partition] = append(m[r.Partition], r)
		}
		return m
	}
	w, g := per(want), per(got)
	dups := 0
	for p, ws := range w {
		seen := map[string]bool{}
		var firsts []*kgo.Record
		for _, r := range g[p] {
			if seen[string(r.Key)] {
				dups++
				continue
			}
			seen[string(r.Key)] = true
			firsts = append(firsts, r)
		}
		if len(firsts) != len(ws) {
			t.Errorf("partition %d: %d distinct records on the target, %d on the source", p, len(firsts), len(ws))
			continue
		}
		for i := range ws {
			if string(ws[i].Key) != string(firsts[i].Key) || string(ws[i].Value) != string(firsts[i].Value) {
				t.Errorf("partition %d position %d: target has %q, source %q", p, i, firsts[i].Key, ws[i].Key)
				break
			}
		}
	}
	return dups
}

// TestExactlyOnceFencing starts a second kmirror with the same
// exactly-once configuration while the first copies: the second fences
// the first, which stops with an error and writes nothing more, and the
// target read read_committed holds every source record once.
func TestExactlyOnceFencing(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "fence")
	a.CreateTopic(t, topic, 3, nil)
	var produced atomic.Int64
	write := func(from, n int) {
		cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%d", i))})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced.Add(int64(n))
	}
	write(0, 20000)
	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic, dst+".exactly.once.source.support = enabled"))
	remote := src + "." + topic
	first := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "the first kmirror to copy", func() bool { return countOrZero(t, b, remote) > 0 })
	second := startKmirror(t, cfg)
	// A fenced producer learns it at its next write: records keep coming
	// until the first kmirror stops.
	deadline := time.After(90 * time.Second)
	for n := 20000; ; n += 500 {
		write(n, 500)
		select {
		case <-first.done:
		case <-deadline:
			t.Fatal("the first kmirror did not stop after the second fenced it")
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	if !strings.Contains(first.log.String(), "fenced") {
		t.Errorf("the first kmirror's log does not say it was fenced:\n%s", first.log.String())
	}
	t.Logf("the first kmirror stopped after fencing: %v", first.err)
	want := a.ReadAll(t, topic)
	waitFor(t, 90*time.Second, "the second kmirror to catch up", func() bool { return hasAllKeys(t, b, remote, want) })
	second.stop()
	got := b.ReadAll(t, remote)
	if dups := checkNoLoss(t, want, got); dups != 0 {
		t.Errorf("%d duplicates seen by a read_committed reader after fencing, want 0", dups)
	}
	t.Logf("source %d records, target %d records read_committed", len(want), len(got))
}

package e2e

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestWorkersExactlyOnce runs exactly-once with several workers in group
// mode while a producer writes: it scales from one worker to three, kills
// one with SIGKILL, stops another with SIGSTOP past its session timeout
// (the group gives its slots to the survivor, which fences it) and resumes
// it, then scales back to one. A read_committed reader of the target must
// see every source record exactly once, in source order per partition. It
// runs with batches forwarded (the default) and re-encoded.
func TestWorkersExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		workersExactlyOnce(t)
	})
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		workersExactlyOnce(t, reencodeAll)
	})
}

// dataPathRan fails t unless every worker ran the data path that extra
// asks for: batches forwarded, or every batch re-encoded when it holds
// reencodeAll.
func dataPathRan(t *testing.T, extra []string, ws ...*proc) {
	t.Helper()
	want := "data path: source batches are forwarded"
	if slices.Contains(extra, reencodeAll) {
		want = "data path: every batch is re-encoded"
	}
	for i, w := range ws {
		if !strings.Contains(w.log.String(), want) {
			t.Errorf("worker %d did not log %q", i+1, want)
		}
	}
}

func workersExactlyOnce(t *testing.T, extra ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "eosworkers")
	a.CreateTopic(t, topic, 6, nil)

	stopProducing := produceSteadily(t, a, topic, 6)

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{
		src + "->" + dst + ".topics = " + topic,
		"kmirror.workers = group",
		src + "->" + dst + ".kmirror.exactly.once.slots = 6",
		dst + ".exactly.once.source.support = enabled",
		src + ".consumer.session.timeout.ms = 6000",
		src + ".consumer.heartbeat.interval.ms = 500"}, extra...)...))
	remote := src + "." + topic
	const taken = "exactly-once: slot taken"
	const fenced = "exactly-once: this worker was fenced"
	slotsOf := func(p *proc) int { return strings.Count(p.log.String(), taken) }
	// Partitions handed to a worker after their slots were taken and
	// their progress read: the worker copies them from then on.
	owns := func(p *proc) int { return strings.Count(p.log.String(), "partition assigned to this worker") }
	copied := func() int { return countOrZero(t, b, remote) }

	// 1 -> 3 workers.
	w1 := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "worker 1 to copy records", func() bool { return copied() > 1000 })
	metrics2 := freeAddr(t)
	w2, w3 := startKmirror(t, "--metrics-addr", metrics2, cfg), startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "all three workers to own slots", func() bool { return owns(w2) > 0 && owns(w3) > 0 })
	waitGrowth(t, 60*time.Second, "records copied by three workers", copied, 1000)
	t.Logf("three workers: slots taken %d, %d, %d; target holds %d records", slotsOf(w1), slotsOf(w2), slotsOf(w3), copied())

	// SIGKILL one under load.
	// Every rebalance hands all slots out anew (the balancer is eager):
	// each worker logs the slots it takes again.
	before := owns(w2) + owns(w3)
	w1.kill()
	waitFor(t, 60*time.Second, "the others to take worker 1's slots", func() bool { return owns(w2)+owns(w3) > before })
	// Worker 2 copies, so it has transactions open when it is stopped.
	waitGrowth(t, 60*time.Second, "records copied by the two left", copied, 1000)

	// SIGSTOP another past its session timeout: the group gives its
	// slots to worker 3, whose producers fence it. Then it resumes, with a
	// transaction open from before the stop, and must not commit it.
	before = owns(w3)
	stopWithOpenTransaction(t, w2, b, remote)
	waitFor(t, 60*time.Second, "worker 3 to take the stopped worker's slots", func() bool { return owns(w3) > before })
	waitGrowth(t, 60*time.Second, "records copied while worker 2 is stopped", copied, 1000)
	if err := w2.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the resumed worker to find itself fenced", func() bool { return strings.Contains(w2.log.String(), fenced) })
	for _, l := range strings.Split(w2.log.String(), "\n") {
		if strings.Contains(l, fenced) {
			t.Logf("zombie: %s", l)
			break
		}
	}
	// The fencing is counted.
	fencedMetric := `kmirror_exactly_once_fenced_total{source="` + src + `",target="` + dst + `"} `
	waitFor(t, 10*time.Second, "the resumed worker to count its fencing", func() bool {
		resp, err := http.Get("http://" + metrics2 + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, fencedMetric); ok {
				n, err := strconv.ParseFloat(v, 64)
				return err == nil && n >= 1
			}
		}
		return false
	})
	waitGrowth(t, 60*time.Second, "records copied after the fencing", copied, 1000)

	// 3 -> 1: the resumed worker leaves, worker 3 copies the rest alone.
	w2.stop()
	waitGrowth(t, 60*time.Second, "records copied by worker 3 alone", copied, 1000)
	stopProducing()
	want := a.ReadAll(t, topic)
	waitFor(t, 90*time.Second, "worker 3 to copy everything", func() bool { return hasAllKeys(t, b, remote, want) })
	w3.stop()

	got := b.ReadAll(t, remote) // read_committed
	dups := checkNoLoss(t, want, got)
	t.Logf("source %d records, target %d (read_committed), duplicates %d; slots taken by workers 1, 2, 3: %d, %d, %d",
		len(want), len(got), dups, slotsOf(w1), slotsOf(w2), slotsOf(w3))
	if dups != 0 || len(got) != len(want) {
		t.Errorf("exactly-once: %d duplicates, %d records on the target for %d on the source; want 0 and the same count", dups, len(got), len(want))
	}
	// Record by record: each target partition holds its source partition's
	// records, in order, key and value the same.
	sameRecords(t, want, got, "")
	dataPathRan(t, extra, w1, w2, w3)
}

// stopWithOpenTransaction stops w with SIGSTOP while a transaction of
// its is open on the target: one of the partitions it was last assigned
// holds records past the last stable offset. Stopped between a commit
// and its next batch, w would have nothing to commit when resumed, and
// nothing to be fenced on (a loaded run saw that); then it is resumed
// and stopped again a moment later. It checks at once after the stop,
// before the group's session timeout gives w's slots away (which aborts
// the transaction).
func stopWithOpenTransaction(t *testing.T, w *proc, b *testkafka.Cluster, remote string) {
	t.Helper()
	adm := b.Admin(t)
	// A worker in the middle of a rebalance owns nothing (it handed its
	// partitions back), and a target electing a leader answers
	// LEADER_NOT_AVAILABLE: both pass, so tries go on for a minute.
	deadline := time.Now().Add(time.Minute)
	for try := 1; ; try++ {
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		owned := ownedPartitions(w.log.String())
		hw, err1 := adm.ListEndOffsets(ctx(t), remote)
		lso, err2 := adm.ListCommittedOffsets(ctx(t), remote)
		open := 0
		if err1 == nil && err2 == nil {
			for p := range owned {
				h, _ := hw.Lookup(remote, p)
				l, _ := lso.Lookup(remote, p)
				if h.Offset > l.Offset {
					open++
				}
			}
		}
		if open > 0 {
			t.Logf("stopped with a transaction open on %d of its %d partitions (try %d)", open, len(owned), try)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no transaction of the worker open on the target in %d tries over a minute (partitions %v; errors %v %v)", try, owned, err1, err2)
		}
		if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ownedPartitions returns the partitions a worker's log says it was
// assigned since it last handed its partitions back.
func ownedPartitions(log string) map[int32]bool {
	owned := make(map[int32]bool)
	for _, l := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(l, "partitions handed back to the group"):
			clear(owned)
		case strings.Contains(l, "partition assigned to this worker"):
			if _, rest, ok := strings.Cut(l, " partition="); ok {
				n, _, _ := strings.Cut(rest, " ")
				if p, err := strconv.Atoi(n); err == nil {
					owned[int32(p)] = true
				}
			}
		}
	}
	return owned
}

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
)

// startMM2 runs Apache MirrorMaker 2 (dedicated mode) from the Maven jars.
func startMM2(t *testing.T, cfg string, clusters ...string) *proc {
	t.Helper()
	// MM2 reads a copy with testkafka.MM2FastStart's lines; the caller's
	// file may go to kmirror next.
	props, err := os.ReadFile(cfg)
	if err == nil {
		cfg = filepath.Join(t.TempDir(), filepath.Base(cfg))
		err = os.WriteFile(cfg, append(props, testkafka.MM2FastStart(string(props))...), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-Xms128m", "-Xmx768m", "-XX:TieredStopAtLevel=1", "-cp", filepath.Join(testkafka.Libs(t), "*"),
		"org.apache.kafka.connect.mirror.MirrorMaker", cfg}
	if len(clusters) > 0 {
		args = append(args, append([]string{"--clusters"}, clusters...)...)
	}
	return startProc(t, "MM2", exec.Command("java", args...))
}

// stopJava stops a JVM with SIGTERM; a JVM exits with 143 on it, which is
// a clean stop.
func (p *proc) stopJava() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.kill()
		p.t.Fatalf("process did not stop within 60s of SIGTERM")
	}
}

// savedProgress reads the MirrorSourceConnector offsets of alias src from
// the Connect offsets topic on c.
func savedProgress(t *testing.T, c *testkafka.Cluster, src string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	topic := "mm2-offsets." + src + ".internal"
	if !hasTopic(t, c, topic) {
		return out
	}
	err := readlog.ToEnd(context.Background(), []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...)}, topic, func(r *kgo.Record) {
		conn, cluster, _, part, err := wire.DecodeSourceOffsetKey(r.Key)
		if err != nil || conn != wire.SourceConnector || cluster != src {
			return
		}
		if off, err := wire.DecodeOffsetValue(r.Value); err == nil {
			out[part] = off
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResumeFromMM2 runs Apache MM2 on a flow, stops it, and runs kmirror
// on the same file: kmirror continues where MM2 saved its progress.
func TestResumeFromMM2(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "frommm2")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 200, "mm2")

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic,
		dst+".offset.flush.interval.ms = 1000",
		"sync.topic.acls.enabled = false",
		"emit.checkpoints.enabled = false",
		"emit.heartbeats.enabled = false",
		"offset-syncs.topic.location = target"))
	remote := src + "." + topic
	mm2 := startMM2(t, cfg, dst)
	waitFor(t, 180*time.Second, "MM2 to copy 200 records and save its progress", func() bool {
		saved := savedProgress(t, b, src)
		return countOrZero(t, b, remote) == 200 && saved[0] == 99 && saved[1] == 99
	})
	mm2.stopJava()
	saved := savedProgress(t, b, src)
	copied := countAll(t, b, remote)
	window := copied - int(saved[0]+1) - int(saved[1]+1)
	t.Logf("MM2 stopped: copied %d records, saved progress %v (uncommitted window %d)", copied, saved, window)

	produceN(t, a, topic, 2, 100, "kmirror")
	want := a.ReadAll(t, topic)
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "kmirror to copy the rest", func() bool { return hasAllKeys(t, b, remote, want) })
	p.stop()
	got := b.ReadAll(t, remote)
	dups := checkNoLoss(t, want, got)
	if dups > window {
		t.Errorf("kmirror re-copied %d records; MM2's uncommitted window was %d", dups, window)
	}
	if len(got) != len(want)+dups {
		t.Errorf("target has %d records, want %d + %d duplicates", len(got), len(want), dups)
	}
}

// TestMM2ResumesFromKmirror is the reverse switch: kmirror runs a flow and
// stops; Apache MM2 on the same file continues from kmirror's progress.
func TestMM2ResumesFromKmirror(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "tomm2")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 200, "kmirror")

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic,
		dst+".offset.flush.interval.ms = 1000",
		"sync.topic.acls.enabled = false",
		"emit.checkpoints.enabled = false",
		"emit.heartbeats.enabled = false",
		"offset-syncs.topic.location = target"))
	remote := src + "." + topic
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "kmirror to copy 200 records", func() bool { return countOrZero(t, b, remote) == 200 })
	p.stop()
	if saved := savedProgress(t, b, src); saved[0] != 99 || saved[1] != 99 {
		t.Fatalf("kmirror saved progress %v, want 99 for both partitions", saved)
	}

	produceN(t, a, topic, 2, 100, "mm2")
	want := a.ReadAll(t, topic)
	mm2 := startMM2(t, cfg, dst)
	waitFor(t, 180*time.Second, "MM2 to copy the rest", func() bool { return hasAllKeys(t, b, remote, want) })
	mm2.stopJava()
	got := b.ReadAll(t, remote)
	if dups := checkNoLoss(t, want, got); dups != 0 {
		t.Errorf("MM2 re-copied %d records that kmirror had saved as done", dups)
	}
}

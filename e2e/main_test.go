// Package e2e runs the kmirror binary against real Apache Kafka clusters and
// checks what reaches the target, record by record.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// kmirrorBin builds cmd/kmirror once per test binary (with the failpoints
// tag; with -race only when KMIRROR_E2E_RACE=1).
func kmirrorBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kmirror-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "kmirror")
		// Plain by default: a race-built kmirror costs 4-5 times the
		// CPU, and the suite runs dozens at once on two cores. The code
		// runs under -race in-process in its packages' tests and in the
		// robustness run's race-built workers; KMIRROR_E2E_RACE=1 builds
		// this one with -race too.
		args := []string{"build", "-tags", "failpoints", "-o", binPath}
		if os.Getenv("KMIRROR_E2E_RACE") == "1" {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../cmd/kmirror")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// writeFile writes content to a new file in the test's temp dir.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a log sink safe for a process writer and test readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running kmirror.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	err  error
}

// startKmirror runs "kmirror run ARGS..." until the test ends.
func startKmirror(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProc(t, "kmirror", exec.Command(kmirrorBin(t), append([]string{"run"}, args...)...))
}

// startKmirrorEnv is startKmirror with env added to the environment, such
// as a failpoint (KMIRROR_FAILPOINT_*: the binary is built with the
// failpoints tag).
func startKmirrorEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(kmirrorBin(t), append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return startProc(t, "kmirror", cmd)
}

// startProc starts cmd, capturing its output, and kills it when the test
// ends, logging the output under name if the test failed.
func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, log: &syncBuffer{}, done: make(chan struct{}), cmd: cmd}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			p.dumpGoroutines()
		}
		p.kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.log.String())
		}
	})
	return p
}

// dumpGoroutines asks a process still running for its goroutines (Go
// prints them on SIGQUIT and exits) so that a failed test's log shows where
// kmirror stood, e.g. what a stuck save waits on.
func (p *proc) dumpGoroutines() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.kill()
		p.t.Fatalf("kmirror did not stop within 60s of SIGTERM\n%s", p.log.String())
	}
	if p.err != nil {
		p.t.Fatalf("kmirror exited with %v after SIGTERM; its errors and last lines:\n%s\nits whole log:\n%s", p.err, p.why(), p.log.String())
	}
}

// why returns the ERROR lines of p's log and its last 10 lines, to be
// printed before the whole log: CI shows only the start of a long failure.
func (p *proc) why() string {
	lines := strings.Split(strings.TrimRight(p.log.String(), "\n"), "\n")
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	out = append(out, "...")
	return strings.Join(append(out, lines[max(0, len(lines)-10):]...), "\n")
}

// waitFor polls cond until it holds or the timeout passes (testwait.For).
var waitFor = testwait.For

// alias returns a cluster alias unique to the test, so that tests sharing
// clusters never share internal topics.
func alias(t *testing.T, base string) string {
	name := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "")
	if len(name) > 20 {
		name = name[len(name)-20:]
	}
	return fmt.Sprintf("%s%s%d", base, name, time.Now().UnixNano()%100000)
}

// reencodeAll is the setting that makes the batch engine decode and
// re-encode every batch; forwarding batches as they are is the default
// where a flow allows it. Tests that run both modes run both settings.
const reencodeAll = "kmirror.passthrough.enabled = false"

// twoLanes and oneLane set the source fetches per broker (default 2).
const (
	twoLanes = "kmirror.fetches.per.broker = 2"
	oneLane  = "kmirror.fetches.per.broker = 1"
)

// mm2Config returns a properties file body for src->dst with RF 1 and fast
// intervals; extra lines are appended.
func mm2Config(src, dst string, a, b *testkafka.Cluster, extra ...string) string {
	lines := []string{
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
		dst + ".bootstrap.servers = " + strings.Join(b.Bootstrap, ","),
		src + "->" + dst + ".enabled = true",
		dst + "->" + src + ".emit.heartbeats.enabled = false",
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"refresh.topics.interval.seconds = 2",
		// Tests share clusters: other tests' heartbeat topics stay theirs.
		"heartbeats.replication.enabled = false",
	}
	return strings.Join(append(lines, extra...), "\n") + "\n"
}

// hasTopic reports whether c has topic. A request that fails (a broker
// too busy to accept a connection in time) is tried again for up to two
// minutes, as ReadAll does.
func hasTopic(t *testing.T, c *testkafka.Cluster, topic string) bool {
	t.Helper()
	rctx := ctx(t)
	for {
		td, err := c.Admin(t).ListTopics(rctx, topic)
		if err == nil {
			d, ok := td[topic]
			return ok && d.Err == nil
		}
		if rctx.Err() != nil {
			t.Fatalf("listing topic %s on %s: %v", topic, c.Name, err)
		}
		t.Logf("listing topic %s on %s: %v; trying again", topic, c.Name, err)
		select {
		case <-rctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// countAll returns how many records topic holds, committed ones only.
func countAll(t *testing.T, c *testkafka.Cluster, topic string) int {
	return len(c.ReadAll(t, topic))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// sameRecords compares source and target records of one topic: same
// partition, same order, same key, value (null kept apart from empty),
// headers and timestamp.
func sameRecords(t *testing.T, src, dst []*kgo.Record, dropHeader string) {
	t.Helper()
	bySrc := map[int32][]*kgo.Record{}
	byDst := map[int32][]*kgo.Record{}
	for _, r := range src {
		bySrc[r.Partition] = append(bySrc[r.Partition], r)
	}
	for _, r := range dst {
		byDst[r.Partition] = append(byDst[r.Partition], r)
	}
	for p, srs := range bySrc {
		drs := byDst[p]
		if len(drs) != len(srs) {
			t.Errorf("partition %d: source has %d records, target %d", p, len(srs), len(drs))
			continue
		}
		for i := range srs {
			if d := diff(srs[i], drs[i], dropHeader); d != "" {
				t.Errorf("partition %d record %d (source offset %d, target offset %d): %s", p, i, srs[i].Offset, drs[i].Offset, d)
				break
			}
		}
	}
	for p, drs := range byDst {
		if _, ok := bySrc[p]; !ok {
			t.Errorf("target partition %d has %d records the source partition lacks", p, len(drs))
		}
	}
}

func diff(s, d *kgo.Record, dropHeader string) string {
	switch {
	case !bytes.Equal(s.Key, d.Key) || (s.Key == nil) != (d.Key == nil):
		return fmt.Sprintf("key %q (nil %v) != %q (nil %v)", s.Key, s.Key == nil, d.Key, d.Key == nil)
	case !bytes.Equal(s.Value, d.Value) || (s.Value == nil) != (d.Value == nil):
		return fmt.Sprintf("value %q (nil %v) != %q (nil %v)", s.Value, s.Value == nil, d.Value, d.Value == nil)
	case !s.Timestamp.Equal(d.Timestamp):
		return fmt.Sprintf("timestamp %v != %v", s.Timestamp, d.Timestamp)
	}
	var dh []kgo.RecordHeader
	for _, h := range d.Headers {
		if h.Key != dropHeader {
			dh = append(dh, h)
		}
	}
	if len(s.Headers) != len(dh) {
		return fmt.Sprintf("headers %v != %v", s.Headers, dh)
	}
	for i := range dh {
		if s.Headers[i].Key != dh[i].Key || !bytes.Equal(s.Headers[i].Value, dh[i].Value) || (s.Headers[i].Value == nil) != (dh[i].Value == nil) {
			return fmt.Sprintf("header %d: %q=%q != %q=%q", i, s.Headers[i].Key, s.Headers[i].Value, dh[i].Key, dh[i].Value)
		}
	}
	return ""
}

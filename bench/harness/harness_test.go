package harness

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// TestQuickKB runs the benchmark end to end in --quick mode on the kb
// workload, one round: real brokers, kmirror, kmirror-pt and Apache MM2.
// All must get every record to the target, kmirror-pt on the passthrough
// path, and both kmirror runs are CPU-profiled.
func TestQuickKB(t *testing.T) {
	if os.Getenv("KMIRROR_SKIP_INTEGRATION") == "1" {
		t.Skip("SKIPPED: KMIRROR_SKIP_INTEGRATION=1 — the end-to-end benchmark smoke test (real Kafka, kmirror, Apache MM2) did NOT run")
	}
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: the end-to-end benchmark smoke test needs real Kafka brokers and Apache MM2")
	}
	root, err := kafkalocal.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log bytes.Buffer
	dir := t.TempDir()
	res, err := Run(ctx, Config{
		Root: root, Dir: dir, Workloads: []string{"kb"}, Runs: 1, Quick: true,
		Timeout: 90 * time.Second, Log: &log, Profile: []string{"kb"},
	})
	t.Logf("harness log:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range res.Runs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Replicator, r.Error)
			continue
		}
		w, _ := Lookup(r.Workload)
		if r.Records != w.Quick || r.Seconds < 0 || r.PeakRSS <= 0 && r.Replicator != Limit {
			t.Errorf("%s: implausible result %+v", r.Replicator, r)
		}
		if r.Replicator != MM2 && r.Replicator != Limit && r.Profile == nil {
			t.Errorf("%s: no CPU profile", r.Replicator)
		}
		seen[r.Replicator] = true
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kb-r1-kmirror-pt.log")); err != nil || !strings.Contains(string(b), "data path: source batches are forwarded") {
		t.Errorf("kmirror-pt did not take the passthrough path (err %v)", err)
	}
	for _, want := range Replicators {
		if !seen[want] {
			t.Errorf("no successful %s run", want)
		}
	}
	if t.Failed() {
		for _, f := range []string{"kb-r1-kmirror.log", "kb-r1-kmirror-pt.log", "kb-r1-mm2.log"} {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			t.Logf("tail of %s:\n%s", f, tail(string(b), 30))
		}
		return
	}
	if err := WriteReport(res, dir, ""); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil || !strings.Contains(string(md), "| kb | kmirror | 1/1 |") {
		t.Errorf("report lacks the kb kmirror row (err %v):\n%s", err, md)
	}
	f, err := os.Open(filepath.Join(dir, "benchmarks.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("chart is not a PNG: %v", err)
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

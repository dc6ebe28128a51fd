package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestConfigErrors runs kmirror on bad files: each must exit non-zero
// before replicating, with a message naming the file, line and key.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	base := "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
	tests := []struct {
		name, body string
		want       []string
	}{
		{"bad interval", base + "A->B.enabled = true\nrefresh.topics.interval.seconds = soon\n", []string{"mm2.properties:5", "refresh.topics.interval.seconds"}},
		{"bad regex", base + "A->B.enabled = true\nA->B.topics = orders(\n", []string{"mm2.properties:5", "topics"}},
		{"java-only regex", base + "A->B.enabled = true\ntopics = (?!secret).*\n", []string{"mm2.properties:5", "topics"}},
		{"unknown alias", base + "A->C.enabled = true\n", []string{"mm2.properties:4", "A->C.enabled", "C"}},
		{"missing bootstrap", "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nA->B.enabled = true\n", []string{"mm2.properties", "B.bootstrap.servers"}},
		{"missing clusters", "A.bootstrap.servers = x:1\n", []string{"mm2.properties", "clusters"}},
		{"bad policy", base + "A->B.enabled = true\nreplication.policy.class = com.example.Nope\n", []string{"mm2.properties:5", "replication.policy.class", "com.example.Nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeFile(t, "mm2.properties", tt.body)
			out, code := runKmirror(t, 20*time.Second, "run", cfg)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero; output:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestUnreachableCluster names the cluster that cannot be reached.
func TestUnreachableCluster(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "mm2.properties", "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\nA->B.enabled = true\n")
	out, code := runKmirror(t, 60*time.Second, "run", cfg)
	if code == 0 || !strings.Contains(out, "cluster A is unreachable") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func runKmirror(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(kmirrorBin(t), args...)
	done := make(chan struct{})
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	close(done)
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return string(out), 0
}

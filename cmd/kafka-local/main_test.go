package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

var update = flag.Bool("update", false, "rewrite testdata/run-*.golden")

// TestRunGolden runs the commands that need no broker (usage, flag and
// argument errors, status and node commands on a run folder whose nodes
// are down): the exit code, standard output and standard error must match
// testdata/run-NAME.golden, with ROOT for the repository and RUN for a
// run folder.
func TestRunGolden(t *testing.T) {
	root := t.TempDir()
	t.Setenv(kafkalocal.EnvRoot, root)
	runDir := t.TempDir()
	writeRun(t, runDir)
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		args []string
	}{
		{"no-args", nil},
		{"help", []string{"help"}},
		{"dash-h", []string{"-h"}},
		{"dash-dash-help", []string{"--help"}},
		{"unknown-command", []string{"upp"}},
		{"libs-bad-flag", []string{"libs", "--nodes", "2"}},
		{"up-bad-flag", []string{"up", "--bogus"}},
		{"up-bad-config", []string{"up", "--config", "no-equals"}},
		{"up-bad-nodes", []string{"up", "--nodes", "two"}},
		{"up-unknown-version", []string{"up", "--version", "0.1", "--dir", runDir}},
		{"down-bad-timeout", []string{"down", "--timeout", "soon"}},
		{"down-nothing-runs", []string{"down", "--dir", runDir, "--timeout", "1s"}},
		{"status", []string{"status", "--dir", runDir}},
		{"status-file", []string{"status", "--dir", filepath.Join(runDir, kafkalocal.StateFile)}},
		{"status-missing", []string{"status", "--dir", missing}},
		{"status-bad-flag", []string{"status", "--kill"}},
		{"stop-node-no-ids", []string{"stop-node", "--dir", runDir, "A"}},
		{"stop-node-no-args", []string{"stop-node"}},
		{"stop-node-bad-id", []string{"stop-node", "--dir", runDir, "A", "1", "x"}},
		{"stop-node-down", []string{"stop-node", "--kill", "--dir", runDir, "A", "1"}},
		{"stop-node-until-unknown-node", []string{"stop-node", "--dir", runDir, "b", "1", "2"}},
		{"stop-node-unknown-cluster", []string{"stop-node", "--dir", runDir, "Z", "1"}},
		{"stop-node-unknown-node", []string{"stop-node", "--dir", runDir, "A", "1", "7"}},
		{"stop-node-missing-run", []string{"stop-node", "--dir", missing, "A", "1"}},
		{"start-node-bad-flag", []string{"start-node", "--version", "3.9.1"}},
		{"start-node-unknown-cluster", []string{"start-node", "--dir", runDir, "Z", "1"}},
		{"start-node-unknown-node", []string{"start-node", "--dir", runDir, "A", "9"}},
	}
	durations := regexp.MustCompile(`in [0-9.]+[µnm]?s\b`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			got := fmt.Sprintf("kafka-local %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tt.args, " "), code, &stdout, &stderr)
			got = strings.NewReplacer(runDir, "RUN", missing, "MISSING", root, "ROOT").Replace(got)
			got = durations.ReplaceAllString(got, "in DURATION")
			golden := filepath.Join("testdata", "run-"+tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("differs from %s (go test -run TestRunGolden -update to rewrite it):\n%s", golden, got)
			}
		})
	}
}

// writeRun writes the clusters.json of a run whose nodes are down: a
// plain cluster A of two nodes and a secure cluster B of one.
func writeRun(t *testing.T, dir string) {
	node := func(c string, id int32, port int) *kafkalocal.Node {
		return &kafkalocal.Node{ID: id, Port: port, ControllerPort: port + 1, PID: 0,
			Dir: filepath.Join(dir, c, fmt.Sprintf("node-%d", id)), Command: []string{"java", "kafka.Kafka"}}
	}
	secure := node("B", 1, 9300)
	secure.SecurePort = 9302
	r := kafkalocal.Run{KafkaVersion: kafkalocal.KafkaVersion, Libs: filepath.Join(dir, "libs"), Dir: dir,
		Clusters: []*kafkalocal.Cluster{
			{Name: "A", ClusterID: "a-id", Bootstrap: []string{"127.0.0.1:9100", "127.0.0.1:9200"},
				Nodes: []*kafkalocal.Node{node("A", 1, 9100), node("A", 2, 9200)}},
			{Name: "B", ClusterID: "b-id", Bootstrap: []string{"127.0.0.1:9300"}, Secure: true,
				SecureBootstrap: []string{"127.0.0.1:9302"}, CAFile: filepath.Join(dir, kafkalocal.CAFile),
				Users: []kafkalocal.User{{Name: "admin", Password: "pw-admin", Super: true}, {Name: "alice", Password: "pw-alice"}},
				Nodes: []*kafkalocal.Node{secure}},
		}}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, kafkalocal.StateFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

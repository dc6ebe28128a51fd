package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCommand: `kmirror check` without --connect needs no broker; it
// prints what each flow does and exits 1 on an invalid file or a file that
// runs nothing.
func TestCheckCommand(t *testing.T) {
	const base = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
	tests := []struct {
		name, body string
		code       int
		want       []string
	}{
		{"passthrough flow", base + "A->B.enabled = true\nB->A.emit.heartbeats.enabled = false\n", 0,
			[]string{"flow A->B:", "data path: batch engine, source batches forwarded as they are", "2 fetches per source broker", "exactly-once: off", "workers: single", "configuration OK"}},
		{"exactly-once flow", base + "A->B.enabled = true\nB.exactly.once.source.support = ENABLED\n", 0,
			[]string{"data path: batch engine, source batches forwarded", "batches and progress in target transactions", "transactional id kmirror-A->B", "heartbeats only B->A: every 1s into A's heartbeats topic"}},
		{"exactly-once re-encode", base + "A->B.enabled = true\nB.exactly.once.source.support = enabled\nkmirror.passthrough.enabled = false\n", 0,
			[]string{"data path: batch engine, every batch is re-encoded because kmirror.passthrough.enabled = false, 2 fetches", "batches and progress in target transactions"}},
		{"target codec", base + "A->B.enabled = true\nB.producer.compression.type = zstd\n", 0,
			[]string{"data path: batch engine, batches not compressed with zstd are re-encoded with it because the target producer sets compression.type = zstd"}},
		{"group workers", base + "A->B.enabled = true\nA->B.kmirror.workers = Group\nA->B.kmirror.workers.group.id = w\n", 0,
			[]string{`workers: group "w" on A`}},
		{"plan", base + "A->B.enabled = true\nB->A.enabled = true\nreplication.policy.class = IdentityReplicationPolicy\n" +
			"A.consumer.fetch.max.bytes = 8388608\nA.consumer.auto.offset.reset = latest\nB.exactly.once.source.support = enabled\n" +
			"A->B.kmirror.workers = group\nA->B.kmirror.exactly.once.slots = 2\n", 0,
			[]string{"flow A->B:\n  data path: batch engine, every batch is re-encoded because the provenance header is written, 2 fetches per source broker\n" +
				"  fetch sizes: 8 MiB per fetch, a share of the fetch, 1 MiB to 16 MiB per partition, waiting at most 500ms\n" +
				"  start: partitions without progress start at the log end (auto.offset.reset = latest)\n" +
				"  provenance header: written; records that came from the target are not copied back\n" +
				"  exactly-once: on (B.exactly.once.source.support = enabled), records and progress in target transactions, 2 slots, transactional ids kmirror-A->B-slot-0 to kmirror-A->B-slot-1\n" +
				`  workers: group "kmirror-A->B" on A shares the partitions between kmirror processes` + "\n" +
				"  checkpoints: the worker that leads the flow writes them in transactions (transactional id kmirror-A->B-checkpoints), fencing the one that led before\n  topics: ",
				"flow B->A:\n  data path: batch engine, every batch is re-encoded because the provenance header is written",
				"  start: partitions without progress start at the log start\n"}},
		{"heartbeats only", base, 0, []string{"heartbeats only A->B", "heartbeats only B->A", "only heartbeats run"}},
		{"nothing to run", base + "emit.heartbeats.enabled = false\n", 1, []string{"nothing to run"}},
		{"typo warned", base + "A->B.enabled = true\nA.consumer.fetch.max.byte = 1\n", 0,
			[]string{`mm2.properties:5: unknown consumer key "A.consumer.fetch.max.byte" (did you mean "A.consumer.fetch.max.bytes"?)`}},
		{"invalid", base + "A->B.enabled = true\nB.offset.flush.interval.ms = -5\n", 1,
			[]string{"invalid configuration:", "mm2.properties:5: B.offset.flush.interval.ms: -5 is out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "mm2.properties")
			if err := os.WriteFile(p, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"check", p}, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d:\n%s%s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

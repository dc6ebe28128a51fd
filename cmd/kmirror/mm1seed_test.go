package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seed004 returns seed 004's producer.properties (e2e/testdata/seeds) with
// the replacements given as old, new pairs.
func seed004(t *testing.T, pairs ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "seeds", "004-2-producer.properties"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("seed 004 has no %q", pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

// Issue 19 item 14: kmirror mm1's messages name the user's file and line.
// Seed 004's producer file, as the article prints it, holds two keys on
// two of its lines; as the fixture has it (one key a line) pointed at a
// PLAINTEXT listener, its security keys have no effect. Either way every
// message names producer.properties:N, never a generated file.
func TestMM1Seed004Positions(t *testing.T) {
	const bootstrap = "SASL接入点（公网） # 需要根据实际情况修改"
	tests := []struct {
		name     string
		producer string
		code     int
		want     []string
		lacks    []string
	}{
		{
			name: "as the article prints it: two keys on one line",
			producer: seed004(t, bootstrap, "b:9092",
				"sasl.mechanism=PLAIN\nsecurity.protocol=SASL_SSL", "sasl.mechanism=PLAIN security.protocol=SASL_SSL",
				"ssl.truststore.password=KafkaTrustStorePass\nssl.endpoint.identification.algorithm=",
				"ssl.truststore.password=KafkaTrustStorePass ssl.endpoint.identification.algorithm="),
			code: 1,
			want: []string{
				`p.properties:3: sasl.mechanism: two keys on one line: the value holds "security.protocol="`,
				`p.properties:5: ssl.truststore.password: two keys on one line: the value holds "ssl.endpoint.identification.algorithm="`,
			},
			lacks: []string{"PLAINTEXT", "KafkaTrustStorePass"},
		},
		{
			name:     "one key a line, PLAINTEXT listener",
			producer: seed004(t, bootstrap, "b:9092", "security.protocol=SASL_SSL", "security.protocol=PLAINTEXT"),
			code:     0,
			want: []string{
				`p.properties:2: "target.sasl.jaas.config" has no effect: not used with security.protocol PLAINTEXT`,
				`p.properties:3: "target.sasl.mechanism" has no effect`,
				`p.properties:5: "ssl.truststore.location": the value ends in "#根据实际情况替换证书路径"`,
				`p.properties:7: "target.ssl.endpoint.identification.algorithm" has no effect`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := mm1Files(t, "bootstrap.servers=a:9092\ngroup.id=test-consumer-group\n", tt.producer)
			var out, errb bytes.Buffer
			code := run([]string{"mm1", "--consumer.config", c, "--producer.config", p, "--whitelist", "testTopic", "--print-config"}, &out, &errb)
			stderr := errb.String()
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			for _, l := range append(tt.lacks, "kmirror mm1:2", "kmirror-mm1-", "generated") {
				if strings.Contains(stderr, l) {
					t.Errorf("stderr holds %q:\n%s", l, stderr)
				}
			}
			if n := strings.Count(stderr, `"#根据实际情况替换证书路径"`); n > 1 {
				t.Errorf("the note is warned about %d times, want once:\n%s", n, stderr)
			}
		})
	}
}

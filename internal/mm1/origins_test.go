package mm1

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
)

// Every generated key maps to the user's file and line, or to the flag (or
// "kmirror mm1") that supplied it.
func TestTranslationOrigins(t *testing.T) {
	o := whitelist("orders.*")
	o.TopicsFlag = "--whitelist"
	o.ReplicationFactor = "1"
	_, tr := translated(t, "bootstrap.servers=a:1\n# note\ngroup.id=g\nmax.poll.records=10\n",
		"bootstrap.servers=b:1\nsasl.mechanism=PLAIN\n\nacks=all\n", o)
	origins := tr.Origins()
	tests := []struct {
		key  string
		file string // base name, or a flag
		line int
	}{
		{"source.bootstrap.servers", "c.properties", 1},
		{"source->target." + config.StartGroupKey, "c.properties", 3},
		{"source.consumer.max.poll.records", "c.properties", 4},
		{"target.bootstrap.servers", "p.properties", 1},
		{"target.sasl.mechanism", "p.properties", 2},
		{"target.producer.acks", "p.properties", 4},
		{"source->target.topics", "--whitelist", 0},
		{"replication.factor", "--replication.factor", 0},
		{"offset.storage.replication.factor", "--replication.factor", 0},
		{"clusters", "kmirror mm1", 0},
		{"replication.policy.class", "kmirror mm1", 0},
	}
	for _, tt := range tests {
		got, ok := origins[tt.key]
		if !ok {
			t.Errorf("%s: no origin", tt.key)
			continue
		}
		if filepath.Base(got.File) != tt.file || got.Line != tt.line {
			t.Errorf("%s: origin %s:%d, want %s:%d", tt.key, got.File, got.Line, tt.file, tt.line)
		}
	}
	for _, l := range tr.lines {
		if _, ok := origins[l.key]; !ok {
			t.Errorf("generated key %s has no origin", l.key)
		}
	}
}

// The warnings "kmirror run" gives for the generated file name the user's
// file and line (issue 19 item 14: they named a temporary file's line 29).
func TestCheckWarningsNameUserFiles(t *testing.T) {
	o := whitelist("t")
	_, tr := translated(t, "bootstrap.servers=a:1\n",
		"bootstrap.servers=b:1\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";\n", o)
	if _, err := tr.Check(&o); err != nil {
		t.Fatal(err)
	}
	want := string(filepath.Separator) + `p.properties:2: "target.sasl.jaas.config" has no effect`
	found := false
	for _, w := range tr.ConfigWarnings {
		if file, _, _ := strings.Cut(w, ":"); strings.HasSuffix(file, "p.properties") && strings.Contains(w, want) {
			found = true
		}
		if strings.HasPrefix(w, "kmirror mm1:") {
			t.Errorf("warning names the generated file: %s", w)
		}
	}
	if !found {
		t.Errorf("warnings %q, want one starting %q", tr.ConfigWarnings, want)
	}
}

// Seed 004's producer.properties as the article prints it: two lines hold
// two keys each. Reading it fails before anything connects, naming the file,
// both lines and the keys that would be lost.
func TestReadClientFileTwoKeysOnOneLine(t *testing.T) {
	seed := "bootstrap.servers= SASL接入点（公网） # 需要根据实际情况修改\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="替换用户名" password="替换密码";` + "\n" +
		"sasl.mechanism=PLAIN security.protocol=SASL_SSL\n" +
		"ssl.truststore.location=/xxx/Kafka.client.truststore.jks #根据实际情况替换证书路径\n" +
		"ssl.truststore.password=KafkaTrustStorePass ssl.endpoint.identification.algorithm=\n"
	p := filepath.Join(t.TempDir(), "producer.properties")
	if err := os.WriteFile(p, []byte(seed), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadClientFile("producer.config", p)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		p + `:3: sasl.mechanism: two keys on one line: the value holds "security.protocol=", which a properties file reads as part of sasl.mechanism's value, so security.protocol is not set; put security.protocol on a line of its own`,
		p + `:5: ssl.truststore.password: two keys on one line: the value holds "ssl.endpoint.identification.algorithm="`,
	}
	if len(lines) != len(want) {
		t.Fatalf("error %q, want %d lines", err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start %q", i+1, lines[i], w)
		}
	}
	if strings.Contains(err.Error(), "KafkaTrustStorePass") {
		t.Errorf("error shows the trust store password: %v", err)
	}
}

// Replication factor errors of the flow name --replication.factor, in text
// and JSON logs alike, and JSON stays valid.
func TestExplainWriter(t *testing.T) {
	const rec = `creating mm2-offsets.source.internal with replication factor 3 (key offset.storage.replication.factor): INVALID_REPLICATION_FACTOR`
	tests := []struct {
		name, rf, in string
		want, lacks  string
	}{
		{"unset, progress topic", "", rec, "(MM2 key offset.storage.replication.factor at its default, as --replication.factor is not given; give --replication.factor N", "(key offset"},
		{"unset, mirrored topic", "", "creating remote topic t on target with replication factor 2 (key replication.factor): INVALID_REPLICATION_FACTOR",
			"(MM2 key replication.factor at its default, as --replication.factor is not given;", "(key replication"},
		{"given", "5", strings.ReplaceAll(rec, "offset.storage", "offset-syncs.topic"), "(--replication.factor 5, MM2 key offset-syncs.topic.replication.factor)", "(key "},
		{"other text unchanged", "", "flow started (key order kept)", "flow started (key order kept)", "--replication.factor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				var buf bytes.Buffer
				o := &Options{ReplicationFactor: tt.rf}
				in := tt.in
				if format == "json" {
					b, _ := json.Marshal(map[string]string{"err": tt.in})
					in = string(b)
				}
				n, err := o.ExplainWriter(&buf).Write([]byte(in))
				if err != nil || n != len(in) {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
				}
				got := buf.String()
				if !strings.Contains(got, tt.want) || strings.Contains(got, tt.lacks) {
					t.Errorf("%s: %q, want %q and not %q", format, got, tt.want, tt.lacks)
				}
				if format == "json" && !json.Valid(buf.Bytes()) {
					t.Errorf("invalid JSON: %s", got)
				}
			}
		})
	}
}

package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestTwoKeysOnOneLine(t *testing.T) {
	tests := []struct {
		name, line string
		hidden     string // "" for none
	}{
		// Seed 004 (producer.properties) as the article prints it.
		{"seed 004 sasl.mechanism", "sasl.mechanism=PLAIN security.protocol=SASL_SSL", "security.protocol"},
		{"seed 004 truststore", "ssl.truststore.password=KafkaTrustStorePass ssl.endpoint.identification.algorithm=", "ssl.endpoint.identification.algorithm"},
		{"blanks around =", "acks=all linger.ms = 5", "linger.ms"},
		{"producer key", "compression.type=lz4 batch.size=65536", "batch.size"},
		{"consumer key", "group.id=g auto.offset.reset=earliest", "auto.offset.reset"},
		{"MM2 cluster prefix", "A.bootstrap.servers=a:9092 B.bootstrap.servers=b:9092", "B.bootstrap.servers"},
		{"MM2 flow prefix", "A->B.enabled=true A->B.topics=.*", "A->B.topics"},
		{"client role prefix", "A.consumer.max.poll.records=10 A.consumer.fetch.min.bytes=1", "A.consumer.fetch.min.bytes"},
		{"connector key", "clusters=A, B replication.factor=1", "replication.factor"},
		{"kmirror key", "tasks.max=1 kmirror.workers=group", "kmirror.workers"},
		{"JAAS then a key", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p"; sasl.mechanism=PLAIN`, "sasl.mechanism"},
		{"seed 004 JAAS line", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="替换用户名" password="替换密码";`, ""},
		{"JAAS option named like a key", `sasl.jaas.config=x required acks="all" linger.ms=5;`, ""},
		{"JAAS entry ends, then a key", `sasl.jaas.config=x required linger.ms=5; acks=all`, "acks"},
		{"quoted blank", `sasl.jaas.config=x required password="a acks=all";`, ""},
		{"note after the value", "bootstrap.servers=localhost:9092 # 需要根据实际情况修改", ""},
		{"key=value inside a note", "acks=all # or acks=1", ""},
		{"seed 004 bootstrap", "bootstrap.servers= SASL接入点（公网） # 需要根据实际情况修改", ""},
		{"unknown word=", "topics=a b=c", ""},
		{"first token is not a second key", "replication.policy.separator=acks=1", ""},
		{"list", "topics=orders.*, payments", ""},
		{"empty", "ssl.endpoint.identification.algorithm=", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProperties("producer.properties", []byte("# first line\n"+tt.line+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = p.TwoKeysOnOneLine()
			if tt.hidden == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			key, _, _ := strings.Cut(tt.line, "=")
			want := `producer.properties:2: ` + key + `: two keys on one line: the value holds "` + tt.hidden + `="`
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %v, want one starting %q", err, want)
			}
			if !strings.Contains(err.Error(), "put "+tt.hidden+" on a line of its own") {
				t.Errorf("error %v does not say how to fix it", err)
			}
		})
	}
}

// An MM2 file for "kmirror run" is checked too, every such line is named,
// and no value (a password here) appears in the error.
func TestParseRefusesTwoKeysOnOneLine(t *testing.T) {
	file := strings.Join([]string{
		"clusters = A, B",
		"A.bootstrap.servers = a:9092",
		"B.bootstrap.servers = b:9092",
		"A->B.enabled = true",
		"B.sasl.mechanism = PLAIN B.security.protocol = SASL_SSL",
		"B.ssl.truststore.password = s3cr3t-pass B.ssl.endpoint.identification.algorithm=",
	}, "\n") + "\n"
	_, err := Parse("mm2.properties", []byte(file), nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`mm2.properties:5: B.sasl.mechanism: two keys on one line: the value holds "B.security.protocol="`,
		`mm2.properties:6: B.ssl.truststore.password: two keys on one line: the value holds "B.ssl.endpoint.identification.algorithm="`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error shows a password: %v", err)
	}
}

// A generated file registered with SetOrigins (kmirror mm1's) reports the
// user's files, lines and flags, not its own name or lines.
func TestSetOrigins(t *testing.T) {
	generated := strings.Join([]string{
		"# generated",
		"clusters = source, target",
		"source->target.enabled = true",
		"source.bootstrap.servers = a:9092",
		"target.bootstrap.servers = b:9092",
		"target.sasl.jaas.config = x required;",
		"source->target.topics = t",
		"replication.factor = 0",
	}, "\n") + "\n"
	origins := map[string]Origin{
		"clusters":                 {File: "kmirror mm1"},
		"source->target.enabled":   {File: "kmirror mm1"},
		"source.bootstrap.servers": {File: "consumer.properties", Line: 1},
		"target.bootstrap.servers": {File: "producer.properties", Line: 1},
		"target.sasl.jaas.config":  {File: "producer.properties", Line: 2},
		"source->target.topics":    {File: "--whitelist"},
		"replication.factor":       {File: "--replication.factor"},
	}
	name := "/tmp/kmirror-mm1-123.properties"
	check := func(t *testing.T, cfg *Config, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "--replication.factor: replication.factor: ") {
			t.Errorf("error %v, want it at --replication.factor", err)
		}
		if cfg == nil {
			t.Fatal("no config")
		}
		want := `producer.properties:2: "target.sasl.jaas.config" has no effect`
		if len(cfg.Warnings) == 0 || !strings.HasPrefix(cfg.Warnings[0], want) {
			t.Errorf("warnings %q, want one starting %q", cfg.Warnings, want)
		}
		all := strings.Join(cfg.Warnings, "\n") + err.Error()
		if strings.Contains(all, "kmirror-mm1-123") {
			t.Errorf("messages name the generated file:\n%s", all)
		}
		if got := fmt.Sprintf("%s:%d", cfg.Props.File("target.sasl.jaas.config"), cfg.Props.Line("target.sasl.jaas.config")); got != "producer.properties:2" {
			t.Errorf("File:Line = %s, want producer.properties:2", got)
		}
	}
	t.Run("ParseWithOrigins", func(t *testing.T) {
		cfg, err := ParseWithOrigins(name, []byte(generated), nil, origins)
		check(t, cfg, err)
	})
	t.Run("SetOrigins and Parse", func(t *testing.T) {
		SetOrigins(name, origins)
		defer SetOrigins(name, nil)
		cfg, err := Parse(name, []byte(generated), nil)
		check(t, cfg, err)
	})
	t.Run("removed", func(t *testing.T) {
		SetOrigins(name, origins)
		SetOrigins(name, nil)
		cfg, _ := Parse(name, []byte(generated), nil)
		if len(cfg.Warnings) == 0 || !strings.HasPrefix(cfg.Warnings[0], name+":6:") {
			t.Errorf("warnings %q, want the generated file's line 6 once origins are removed", cfg.Warnings)
		}
	})
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
)

// mm1Files writes a consumer and a producer file and returns their paths.
func mm1Files(t *testing.T, consumer, producer string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	c, p := filepath.Join(dir, "c.properties"), filepath.Join(dir, "p.properties")
	for path, body := range map[string]string{c: consumer, p: producer} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c, p
}

func TestParseMM1Args(t *testing.T) {
	base := []string{"--consumer.config", "c.properties", "--producer.config=p.properties"}
	tests := []struct {
		name    string
		args    []string
		check   func(*mm1Options) bool
		wantErr string
	}{
		{"whitelist", append(base, "--whitelist", "a.*"),
			func(o *mm1Options) bool {
				return o.consumerConfig == "c.properties" && o.producerConfig == "p.properties" &&
					o.topics == "a.*" && o.topicsFlag == "--whitelist" && o.source == "source" && o.target == "target"
			}, ""},
		{"include with equals", append(base, "--include=a,b"),
			func(o *mm1Options) bool { return o.topics == "a|b" && o.topicsFlag == "--include" }, ""},
		{"include wins over whitelist", append(base, "--whitelist", "x", "--include", "y"),
			func(o *mm1Options) bool { return o.topics == "y" && len(o.notes) == 1 }, ""},
		{"single dash", []string{"-consumer.config", "c", "-producer.config", "p", "-whitelist", "t"},
			func(o *mm1Options) bool { return o.topics == "t" }, ""},
		{"commit interval and rf", append(base, "--whitelist", "t", "--offset.commit.interval.ms", "5000", "--replication.factor=1"),
			func(o *mm1Options) bool { return o.commitIntervalMs == "5000" && o.replicationFactor == "1" }, ""},
		{"accepted no-ops", append(base, "--whitelist", "t", "--num.streams", "4", "--abort.on.send.failure", "false", "--new.consumer"),
			func(o *mm1Options) bool { return len(o.notes) == 3 }, ""},
		{"run flags handed on", append(base, "--whitelist", "t", "--rest-addr", ":8083", "--log-format=json"),
			func(o *mm1Options) bool {
				return slices.Equal(o.runArgs, []string{"--log-format=json", "--rest-addr=:8083"}) && o.logFormat == "json"
			}, ""},
		{"aliases", append(base, "--whitelist", "t", "--source-alias", "dc1", "--target-alias=dc2"),
			func(o *mm1Options) bool { return o.source == "dc1" && o.target == "dc2" }, ""},

		{"no consumer config", []string{"--producer.config", "p", "--whitelist", "t"}, nil, "--consumer.config FILE is required"},
		{"no producer config", []string{"--consumer.config", "c", "--whitelist", "t"}, nil, "--producer.config FILE is required"},
		{"no topics", base, nil, "--include or --whitelist REGEX is required"},
		{"empty topics", append(base, "--whitelist", "''"), nil, "--whitelist: the topic regex is empty"},
		{"bad regex", append(base, "--include", "a("), nil, "--include: regex"},
		{"message handler", append(base, "--whitelist", "t", "--message.handler", "com.example.H"), nil, "--message.handler is not supported"},
		{"handler args", append(base, "--whitelist", "t", "--message.handler.args=x"), nil, "--message.handler.args is not supported"},
		{"rebalance listener", append(base, "--whitelist", "t", "--consumer.rebalance.listener", "L"), nil, "--consumer.rebalance.listener is not supported"},
		{"blacklist", append(base, "--blacklist", "t"), nil, "--blacklist was removed"},
		{"num streams", append(base, "--whitelist", "t", "--num.streams", "zero"), nil, "--num.streams \"zero\""},
		{"commit interval", append(base, "--whitelist", "t", "--offset.commit.interval.ms", "0"), nil, "--offset.commit.interval.ms \"0\""},
		{"abort value", append(base, "--whitelist", "t", "--abort.on.send.failure", "maybe"), nil, "--abort.on.send.failure \"maybe\""},
		{"rf zero", append(base, "--whitelist", "t", "--replication.factor", "0"), nil, "--replication.factor \"0\""},
		{"same aliases", append(base, "--whitelist", "t", "--source-alias", "x", "--target-alias", "x"), nil, "both \"x\""},
		{"bad alias", append(base, "--whitelist", "t", "--source-alias", "a.b"), nil, "--source-alias \"a.b\""},
		{"positional", append(base, "--whitelist", "t", "extra"), nil, "unexpected argument \"extra\""},
		{"unknown flag", append(base, "--whitelist", "t", "--queue.size", "5"), nil, "queue.size"},
		{"missing value", append(base, "--whitelist"), nil, "needs an argument"},
		{"help", []string{"--help"}, nil, errHelp.Error()},
		{"version", []string{"--version"}, nil, errVersion.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseMM1Args(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("unexpected options %+v", o)
			}
		})
	}
}

func TestCleanTopicRegex(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a.*", "a.*"},
		{"a, b ,c", "a|b|c"},
		{`"a|b"`, "a|b"},
		{`'topic.*'`, "topic.*"},
		{" * ", ".*"},
		{"'x'\"", "x"},
	}
	for _, tt := range tests {
		if got := cleanTopicRegex(tt.in); got != tt.want {
			t.Errorf("cleanTopicRegex(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// translated parses the MM2 file generated for args and the two client
// files, and returns its flow and the translation.
func translated(t *testing.T, consumer, producer string, args ...string) (*config.Config, *mm1Translation, *mm1Options) {
	t.Helper()
	c, p := mm1Files(t, consumer, producer)
	o, err := parseMM1Args(append([]string{"--consumer.config", c, "--producer.config", p}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := readClientFile("consumer.config", c)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := readClientFile("producer.config", p)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := translateMM1(o, cons, prod)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("generated", tr.properties(false), nil)
	if err != nil {
		t.Fatalf("generated file does not parse: %v\n%s", err, tr.properties(false))
	}
	return cfg, tr, o
}

func TestTranslateMM1(t *testing.T) {
	consumer := `bootstrap.servers=src1:9092,src2:9092
group.id=mirror-group
auto.offset.reset=latest
key.deserializer=org.apache.kafka.common.serialization.ByteArrayDeserializer
max.poll.records=500
security.protocol=SSL
ssl.truststore.location=/etc/ca.pem
ssl.truststore.type=PEM
`
	producer := `bootstrap.servers = dst:9093
security.protocol = SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p\\w";
linger.ms = 10
value.serializer = org.apache.kafka.common.serialization.ByteArraySerializer
`
	cfg, tr, _ := translated(t, consumer, producer, "--whitelist", "orders.*, payments",
		"--offset.commit.interval.ms", "5000", "--replication.factor", "1")
	if len(cfg.Flows) != 1 || cfg.Flows[0].Name() != "source->target" {
		t.Fatalf("flows %v, want only source->target", cfg.Flows)
	}
	f := cfg.Flows[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"topics", strings.Join(f.Topics, ","), "orders.*|payments"},
		{"policy", f.PolicyClass, identityPolicy},
		{"checkpoints", f.EmitCheckpointsEnabled, false},
		{"heartbeats", f.EmitHeartbeatsEnabled, false},
		{"acl sync", f.SyncTopicACLsEnabled, false},
		{"config sync", f.SyncTopicConfigsEnabled, false},
		{"replication factor", f.ReplicationFactor, int16(1)},
		{"offsets topic rf", f.OffsetStorageReplicationFactor, int16(1)},
		{"offset syncs rf", f.OffsetSyncsTopicReplicationFactor, int16(1)},
		{"flush interval", f.Worker["offset.flush.interval.ms"], "5000"},
		{"offsets topic", f.OffsetStorageTopic, "mm2-offsets.source.internal"},
		{"source bootstrap", f.SourceConsumer["bootstrap.servers"], "src1:9092,src2:9092"},
		{"source admin tls", f.SourceAdmin["ssl.truststore.location"], "/etc/ca.pem"},
		{"consumer key", f.SourceConsumer["max.poll.records"], "500"},
		{"auto.offset.reset", f.SourceConsumer["auto.offset.reset"], "latest"},
		{"group.id dropped", f.SourceConsumer["group.id"], ""},
		{"group.id is where partitions start", f.Settings["kmirror.start.from.group"], "mirror-group"},
		{"no heartbeat topics", fmt.Sprint(f.HeartbeatsReplicationEnabled), "false"},
		{"deserializer dropped", f.SourceConsumer["key.deserializer"], ""},
		{"target bootstrap", f.TargetProducer["bootstrap.servers"], "dst:9093"},
		{"target admin sasl", f.TargetAdmin["sasl.mechanism"], "SCRAM-SHA-512"},
		{"jaas backslash kept", f.TargetProducer["sasl.jaas.config"], `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p\w";`},
		{"producer key", f.TargetProducer["linger.ms"], "10"},
		{"serializer dropped", f.TargetProducer["value.serializer"], ""},
		{"producer keys stay off the source", f.SourceConsumer["linger.ms"], ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	back, err := cfg.Pair("target", "source")
	if err != nil {
		t.Fatal(err)
	}
	if back.EmitHeartbeatsEnabled {
		t.Error("target->source emits heartbeats into the source cluster")
	}
	if len(tr.notes) != 3 || !strings.Contains(tr.notes[0], "group.id mirror-group") {
		t.Errorf("notes %q, want the group.id start and one per file naming the dropped keys", tr.notes)
	}
	if redacted := string(tr.properties(true)); strings.Contains(redacted, `password=\"p`) || strings.Contains(redacted, "p\\\\w") ||
		!strings.Contains(redacted, "target.sasl.jaas.config = [hidden]") {
		t.Errorf("redacted file shows the secret:\n%s", redacted)
	}
}

func TestTranslateMM1Defaults(t *testing.T) {
	cfg, _, _ := translated(t, "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\n", "--whitelist", "t",
		"--source-alias", "dc1", "--target-alias", "dc2")
	f := cfg.Flows[0]
	if f.Name() != "dc1->dc2" || f.OffsetStorageTopic != "mm2-offsets.dc1.internal" {
		t.Errorf("flow %s with offsets topic %s", f.Name(), f.OffsetStorageTopic)
	}
	if f.ReplicationFactor != config.DefaultReplicationFactor || f.OffsetStorageReplicationFactor != config.DefaultOffsetStorageRF {
		t.Errorf("replication factors %d, %d changed without --replication.factor", f.ReplicationFactor, f.OffsetStorageReplicationFactor)
	}
	if _, ok := f.Worker["offset.flush.interval.ms"]; ok {
		t.Error("offset.flush.interval.ms set without --offset.commit.interval.ms")
	}
	if f.SourceConsumer["auto.offset.reset"] != "earliest" {
		t.Errorf("auto.offset.reset %q, want kmirror's earliest", f.SourceConsumer["auto.offset.reset"])
	}
}

// Config providers in either client file move to the top level, so that
// ${file:...} references resolve.
func TestTranslateMM1Providers(t *testing.T) {
	secrets := filepath.Join(t.TempDir(), "secrets.properties")
	if err := os.WriteFile(secrets, []byte("pw=s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prov := "config.providers=file\nconfig.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
	cfg, _, _ := translated(t, "bootstrap.servers=a:1\n"+prov,
		"bootstrap.servers=b:1\n"+prov+"ssl.key.password=${file:"+secrets+":pw}\n", "--whitelist", "t")
	if got := cfg.Flows[0].TargetProducer["ssl.key.password"]; got != "s3cret" {
		t.Errorf("ssl.key.password = %q, want the resolved secret", got)
	}
}

func TestEscapeRoundTrip(t *testing.T) {
	values := []string{`C:\path\to`, "  leading", "trailing  ", "a=b:c#d!e", "line\nbreak\ttab\r\f", "日本語", `\u0041`, "x\x01y", ""}
	keys := []string{"k", "key with space", "a=b", "c:d", "#hash", "!bang"}
	var b bytes.Buffer
	for i, v := range values {
		k := keys[i%len(keys)] + string(rune('a'+i))
		b.WriteString(escapeKey(k) + " = " + escapeValue(v) + "\n")
	}
	p, err := config.ParseProperties("t", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		k := keys[i%len(keys)] + string(rune('a'+i))
		if got, ok := p.Get(k); !ok || got != v {
			t.Errorf("key %q: read back %q (present %v), want %q\nfile:\n%s", k, got, ok, v, b.String())
		}
	}
}

// Errors name the user's file and line, not the generated file.
func TestMM1ErrorsNamePosition(t *testing.T) {
	tests := []struct {
		name, consumer, producer string
		want                     string
	}{
		{"consumer value", "bootstrap.servers=a:1\nauto.offset.reset=sometimes\n", "bootstrap.servers=b:1\n",
			"c.properties:2: auto.offset.reset"},
		{"producer value", "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\n# comment\nacks=most\n",
			"p.properties:3: acks"},
		{"bad bootstrap", "bootstrap.servers=nohost\n", "bootstrap.servers=b:1\n",
			"c.properties:1: bootstrap.servers"},
		{"provider", "bootstrap.servers=a:1\n",
			"bootstrap.servers=b:1\nsasl.jaas.config=${file:/nonexistent/x.properties:pw}\n",
			"p.properties:2: sasl.jaas.config: cannot resolve"},
		{"no bootstrap", "group.id=g\n", "bootstrap.servers=b:1\n", "c.properties: bootstrap.servers is missing"},
		{"syntax", "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\nbad\\u12=x\n", "p.properties:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := mm1Files(t, tt.consumer, tt.producer)
			var out, errb bytes.Buffer
			code := run([]string{"mm1", "--consumer.config", c, "--producer.config", p, "--whitelist", "t", "--print-config"}, &out, &errb)
			if code != 1 || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errb.String(), tt.want)
			}
			if strings.Contains(errb.String(), "generated") {
				t.Errorf("error names the generated file: %s", errb.String())
			}
		})
	}
}

func TestMM1Command(t *testing.T) {
	c, p := mm1Files(t, "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\nsasl.mechanism=PLAIN\nsecurity.protocol=SASL_PLAINTEXT\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"topsecret\";\n")
	tests := []struct {
		args     []string
		code     int
		contains string
		lacks    string
	}{
		{[]string{"mm1", "--help"}, 0, "--consumer.config FILE", ""},
		{[]string{"mm1", "--version"}, 0, "kmirror ", ""},
		{[]string{"mm1"}, 2, "--consumer.config FILE is required", ""},
		{[]string{"mm1", "--consumer.config", filepath.Join(t.TempDir(), "missing"), "--producer.config", p, "--whitelist", "t"}, 1,
			"--consumer.config: open", ""},
		{[]string{"mm1", "--consumer.config", c, "--producer.config", p, "--whitelist", "t", "--print-config"}, 0,
			"target.sasl.jaas.config = [hidden]", "topsecret"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, &out, &errb)
		got := out.String() + errb.String()
		if code != tt.code || !strings.Contains(got, tt.contains) || (tt.lacks != "" && strings.Contains(got, tt.lacks)) {
			t.Errorf("%v: exit %d, output %q; want exit %d with %q", tt.args, code, got, tt.code, tt.contains)
		}
	}
}

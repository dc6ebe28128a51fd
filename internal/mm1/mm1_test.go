package mm1

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
)

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
		if got := CleanTopicRegex(tt.in); got != tt.want {
			t.Errorf("CleanTopicRegex(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// translated writes the two client files, translates them with o and
// parses the generated MM2 file.
func translated(t *testing.T, consumer, producer string, o Options) (*config.Config, *Translation) {
	t.Helper()
	cons, prod := clientFiles(t, t.TempDir(), consumer, producer, &o)
	tr, err := Translate(&o, cons, prod)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("generated", tr.Properties(false), nil)
	if err != nil {
		t.Fatalf("generated file does not parse: %v\n%s", err, tr.Properties(false))
	}
	return cfg, tr
}

// clientFiles writes the consumer and producer files in dir, points o at
// them and reads them back.
func clientFiles(t *testing.T, dir, consumer, producer string, o *Options) (cons, prod *config.Properties) {
	t.Helper()
	o.ConsumerConfig, o.ProducerConfig = filepath.Join(dir, "c.properties"), filepath.Join(dir, "p.properties")
	for path, body := range map[string]string{o.ConsumerConfig: consumer, o.ProducerConfig: producer} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := ReadClientFile("consumer.config", o.ConsumerConfig)
	if err != nil {
		t.Fatal(err)
	}
	prod, err = ReadClientFile("producer.config", o.ProducerConfig)
	if err != nil {
		t.Fatal(err)
	}
	return cons, prod
}

// whitelist is the options of "--whitelist topics" with the default aliases.
func whitelist(topics string) Options {
	return Options{Topics: CleanTopicRegex(topics), TopicsFlag: "--whitelist", Source: "source", Target: "target"}
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
	o := whitelist("orders.*, payments")
	o.CommitIntervalMs, o.ReplicationFactor = "5000", "1"
	cfg, tr := translated(t, consumer, producer, o)
	if len(cfg.Flows) != 1 || cfg.Flows[0].Name() != "source->target" {
		t.Fatalf("flows %v, want only source->target", cfg.Flows)
	}
	f := cfg.Flows[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"topics", strings.Join(f.Topics, ","), "orders.*|payments"},
		{"policy", f.PolicyClass, IdentityPolicy},
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
	if len(tr.Notes) != 3 || !strings.Contains(tr.Notes[0], "group.id mirror-group") {
		t.Errorf("notes %q, want the group.id start and one per file naming the dropped keys", tr.Notes)
	}
	if redacted := string(tr.Properties(true)); strings.Contains(redacted, `password=\"p`) || strings.Contains(redacted, "p\\\\w") ||
		!strings.Contains(redacted, "target.sasl.jaas.config = [hidden]") {
		t.Errorf("redacted file shows the secret:\n%s", redacted)
	}
}

func TestTranslateMM1Defaults(t *testing.T) {
	o := whitelist("t")
	o.Source, o.Target = "dc1", "dc2"
	cfg, _ := translated(t, "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\n", o)
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
	cfg, _ := translated(t, "bootstrap.servers=a:1\n"+prov,
		"bootstrap.servers=b:1\n"+prov+"ssl.key.password=${file:"+secrets+":pw}\n", whitelist("t"))
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

// --blacklist becomes topics.exclude with MM2's default exclusions kept;
// a note after a value is warned about with the user's file and line.
func TestTranslateMM1BlacklistAndNotes(t *testing.T) {
	o := whitelist(".*")
	o.Exclude = "tmp.*|scratch"
	cfg, tr := translated(t, "bootstrap.servers=a:1\ngroup.id=g # 需要根据实际情况修改\n", "bootstrap.servers=b:1\n", o)
	f := cfg.Flows[0]
	for topic, want := range map[string]bool{"orders": true, "tmp1": false, "scratch": false, "mm2-offsets.x.internal": false, "__consumer_offsets": false} {
		if got := f.TopicFilter.Match(topic); got != want {
			t.Errorf("topic %s mirrored %v, want %v", topic, got, want)
		}
	}
	if _, err := tr.Check(&o); err != nil {
		t.Fatal(err)
	}
	// Said once, by the check of the generated file, at the user's line.
	if len(tr.Warnings) != 0 || len(tr.ConfigWarnings) != 1 || !strings.Contains(tr.ConfigWarnings[0], `c.properties:2: "group.id": the value ends in "# 需要根据实际情况修改"`) {
		t.Errorf("warnings %q, config warnings %q", tr.Warnings, tr.ConfigWarnings)
	}
}

func TestReadClientFileZooKeeper(t *testing.T) {
	p := filepath.Join(t.TempDir(), "consumer.properties")
	if err := os.WriteFile(p, []byte("zookeeper.connect=zk:2181\ngroup.id=g\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadClientFile("consumer.config", p)
	if err == nil || !strings.Contains(err.Error(), p+":1: zookeeper.connect is the old consumer's setting") {
		t.Errorf("error %v", err)
	}
}

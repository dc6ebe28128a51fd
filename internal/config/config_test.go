package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func noEnv(string) (string, bool) { return "", false }

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse("mm2.properties", []byte(text), noEnv)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return c
}

func flow(t *testing.T, c *Config, name string) *Flow {
	t.Helper()
	for _, f := range c.Flows {
		if f.Name() == name {
			return f
		}
	}
	t.Fatalf("flow %s not found", name)
	return nil
}

func hasWarning(c *Config, sub string) bool {
	for _, w := range c.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func TestSeedUSWest(t *testing.T) {
	c, err := Load("testdata/seed-us-west.properties", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Clusters, ",") != "us-west,us-east" || len(c.Flows) != 1 {
		t.Fatalf("clusters %v flows %v", c.Clusters, c.Flows)
	}
	f := c.Flows[0]
	if f.Name() != "us-west->us-east" || f.EmitHeartbeatsEnabled || f.EmitCheckpointsInterval != 10*time.Second {
		t.Errorf("flow %+v", f)
	}
	if f.OffsetStorageTopic != "mm2-offsets.us-west.internal" || f.OffsetSyncsTopicLocation != "target" {
		t.Errorf("offset storage %q location %q", f.OffsetStorageTopic, f.OffsetSyncsTopicLocation)
	}
	if c.ClusterProps["us-west"]["offset.storage.topic"] != "mm2-offsets" {
		t.Errorf("cluster props %v", c.ClusterProps["us-west"])
	}
	// The reverse herder targets us-west, whose worker takes us-west.offset.storage.topic.
	rev, err := c.Pair("us-east", "us-west")
	if err != nil || rev.Enabled || rev.OffsetStorageTopic != "mm2-offsets" || !rev.EmitHeartbeatsEnabled {
		t.Errorf("reverse pair %+v %v", rev, err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	if s := c.Flows[0].TopicFilter; !s.Match("orders") || s.Match("x.internal") {
		t.Error("topic filter")
	}
}

func TestSeedShSz(t *testing.T) {
	c, err := Load("testdata/seed-sh-sz.properties", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Flows) != 2 {
		t.Fatalf("flows: %v", c.Flows)
	}
	shsz, szsh := flow(t, c, "sh->sz"), flow(t, c, "sz->sh")
	if shsz.RefreshTopicsInterval != 30*time.Second || shsz.TasksMax != 4 || !shsz.SyncGroupOffsetsEnabled ||
		shsz.RefreshGroupsInterval != time.Minute || shsz.HeartbeatsTopicReplicationFactor != 2 {
		t.Errorf("sh->sz %+v", shsz)
	}
	if szsh.RefreshGroupsInterval != 10*time.Minute {
		t.Errorf("sz->sh refresh groups %v", szsh.RefreshGroupsInterval)
	}
	tf := shsz.TopicFilter
	for name, want := range map[string]bool{"orders.created": true, "payments": true, "orders-internal": false, "orders_test": false, "audit": false} {
		if tf.Match(name) != want {
			t.Errorf("sh->sz topic %q: %v", name, !want)
		}
	}
	gf := szsh.GroupFilter
	if !gf.Match("order-service") || !gf.Match("x-consumer") || gf.Match("console-consumer-1") || gf.Match("other") {
		t.Error("group filter")
	}
	// Top-level offset.storage.topic is copied into every worker (and wins).
	if shsz.OffsetStorageTopic != "mm2-offsets" || shsz.Worker["group.id"] != "sh-mm2" {
		t.Errorf("worker %v", shsz.Worker)
	}
	jaas := shsz.SourceConsumer["sasl.jaas.config"]
	if !strings.HasPrefix(jaas, "org.apache.kafka.common.security.scram.ScramLoginModule required username=") ||
		shsz.SourceConsumer["security.protocol"] != "SASL_SSL" || !strings.Contains(shsz.TargetProducer["sasl.jaas.config"], "mm2-secret-sz") {
		t.Errorf("client props %v / %v", shsz.SourceConsumer, shsz.TargetProducer)
	}
	if !hasWarning(c, `seed-sh-sz.properties:6: "group.id" has no effect at top level`) {
		t.Errorf("warnings: %q", c.Warnings)
	}
}

func TestLoopbackExample(t *testing.T) {
	c, err := Load("testdata/loopback.properties", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	f := flow(t, c, "A->B")
	if f.ReplicationFactor != 1 || f.CheckpointsTopicReplicationFactor != 1 || f.OffsetSyncsTopicReplicationFactor != 1 ||
		f.OffsetStorageReplicationFactor != 1 || f.SyncGroupOffsetsInterval != time.Second || !f.SyncGroupOffsetsEnabled ||
		f.Worker["offset.flush.interval.ms"] != "1000" || f.OffsetStoragePartitions != 25 {
		t.Errorf("%+v", f)
	}
	rev, err := c.Pair("B", "A")
	if err != nil || rev.EmitHeartbeatsEnabled {
		t.Errorf("B->A heartbeats: %v %v", rev.EmitHeartbeatsEnabled, err)
	}
	// MM2 needs these for one-node clusters; kmirror has no use for them.
	if len(c.Warnings) != 2 || !hasWarning(c, `:12: "status.storage.replication.factor" has no effect`) ||
		!hasWarning(c, `:13: "config.storage.replication.factor" has no effect`) {
		t.Errorf("warnings: %q", c.Warnings)
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, "clusters=A,B\nA.bootstrap.servers=a:1\nB.bootstrap.servers=b:1\nA->B.enabled=true\n")
	f := c.Flows[0]
	want := Flow{
		Source: "A", Target: "B", Enabled: true,
		PolicyClass: "org.apache.kafka.connect.mirror.DefaultReplicationPolicy", Separator: ".", InternalSeparatorEnabled: true,
		ReplicationFactor:    2,
		RefreshTopicsEnabled: true, RefreshTopicsInterval: 600 * time.Second,
		SyncTopicConfigsEnabled: true, SyncTopicConfigsInterval: 600 * time.Second,
		SyncTopicACLsEnabled: true, SyncTopicACLsInterval: 600 * time.Second,
		EmitOffsetSyncsEnabled: true, OffsetSyncsTopicLocation: "target", OffsetLagMax: 100,
		OffsetSyncsTopicReplicationFactor: 3, CheckpointsTopicReplicationFactor: 3, HeartbeatsTopicReplicationFactor: 3,
		EmitHeartbeatsEnabled: true, EmitHeartbeatsInterval: time.Second, HeartbeatsReplicationEnabled: true,
		EmitCheckpointsEnabled: true, EmitCheckpointsInterval: time.Minute,
		RefreshGroupsEnabled: true, RefreshGroupsInterval: 600 * time.Second,
		SyncGroupOffsetsEnabled: false, SyncGroupOffsetsInterval: time.Minute,
		TasksMax: 1, AdminTimeout: time.Minute, ConsumerPollTimeout: time.Second,
		OffsetStorageTopic: "mm2-offsets.A.internal", OffsetStoragePartitions: 25, OffsetStorageReplicationFactor: 3,
		WorkersGroupID: "kmirror-A->B", Slots: DefaultSlots, OffsetFlushInterval: time.Second, StallTimeout: DefaultStallTimeout, LagThreshold: DefaultLagThreshold,
	}
	got := *f
	got.Settings, got.Worker, got.settings, got.cfg = nil, nil, nil, nil
	got.SourceConsumer, got.SourceAdmin, got.TargetProducer, got.TargetAdmin, got.TargetConsumer = nil, nil, nil, nil, nil
	got.Topics, got.TopicsExclude, got.Groups, got.GroupsExclude, got.ConfigPropertiesExclude = nil, nil, nil, nil, nil
	if f.Policy == nil || f.TopicFilter == nil || f.GroupFilter == nil || f.ConfigExclude == nil {
		t.Errorf("policy and filters not built: %+v", f)
	}
	got.Policy, got.TopicFilter, got.GroupFilter, got.ConfigExclude = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if strings.Join(f.TopicsExclude, ",") != `.*[\-\.]internal,.*\.replica,__.*` || strings.Join(f.GroupsExclude, ",") != "console-consumer-.*,connect-.*,__.*" ||
		len(f.ConfigPropertiesExclude) != 6 || f.Topics[0] != ".*" || f.Groups[0] != ".*" {
		t.Errorf("default lists %q %q %q", f.TopicsExclude, f.GroupsExclude, f.ConfigPropertiesExclude)
	}
	if name := f.OffsetSyncsTopic(); name != "mm2-offset-syncs.A.internal" {
		t.Errorf("offset syncs topic %q", name)
	}
	if f.Worker["client.id"] != "A->B" || f.Worker["status.storage.topic"] != "mm2-status.A.internal" || f.Worker["bootstrap.servers"] != "b:1" {
		t.Errorf("worker %v", f.Worker)
	}
}

func TestPrecedence(t *testing.T) {
	c := mustParse(t, `clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
security.protocol = SSL
A.security.protocol = SASL_SSL
A.consumer.security.protocol = SASL_PLAINTEXT
A->B.enabled = true
A->B.consumer.max.poll.records = 100
A->B.consumer.fetch.min.bytes = 1
A.consumer.max.poll.records = 500
A.consumer.auto.offset.reset = latest
A.consumer.enable.auto.commit = true
B.producer.linger.ms = 5
B.producer.acks = 1
A->B.producer.override.acks = all
A->B.producer.batch.size = 1000
tasks.max = 2
A->B.tasks.max = 8
topics = a.*
offset-syncs.topic.location = source
A->B.offset-syncs.topic.location = target
B.offset.storage.topic = from-cluster
offset.storage.topic = from-top
A->B.admin.request.timeout.ms = 1000
B.admin.request.timeout.ms = 2000
`)
	f := c.Flows[0]
	tests := []struct {
		name      string
		got, want string
	}{
		{"cluster consumer beats flow consumer", f.SourceConsumer["max.poll.records"], "500"},
		{"flow consumer used", f.SourceConsumer["fetch.min.bytes"], "1"},
		{"auto.offset.reset honoured", f.SourceConsumer["auto.offset.reset"], "latest"},
		{"auto commit forced off", f.SourceConsumer["enable.auto.commit"], "false"},
		{"source consumer bootstrap", f.SourceConsumer["bootstrap.servers"], "a:9092"},
		{"client-specific security wins", f.SourceConsumer["security.protocol"], "SASL_PLAINTEXT"},
		{"cluster security beats top level", f.SourceAdmin["security.protocol"], "SASL_SSL"},
		{"top level fills in", f.TargetAdmin["security.protocol"], "SSL"},
		{"target admin: cluster beats flow", f.TargetAdmin["request.timeout.ms"], "2000"},
		{"source admin: flow", f.SourceAdmin["request.timeout.ms"], "1000"},
		{"target producer cluster key", f.TargetProducer["linger.ms"], "5"},
		{"producer.override wins", f.TargetProducer["acks"], "all"},
		{"flow producer key", f.TargetProducer["batch.size"], "1000"},
		{"target producer bootstrap", f.TargetProducer["bootstrap.servers"], "b:9092"},
		{"target consumer defaults", f.TargetConsumer["auto.offset.reset"], "earliest"},
		{"flow beats top-level", f.Settings["tasks.max"], "8"},
		{"top level reaches flow", f.Settings["topics"], "a.*"},
		{"flow location beats top-level", f.OffsetSyncsTopicLocation, "target"},
		{"top-level storage prefix beats cluster", f.OffsetStorageTopic, "from-top"},
		{"settings source.consumer", f.Settings["source.consumer.max.poll.records"], "500"},
		{"settings source.cluster", f.Settings["source.cluster.bootstrap.servers"], "a:9092"},
		{"settings aliases", f.Settings["source.cluster.alias"] + ">" + f.Settings["target.cluster.alias"], "A>B"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if f.TasksMax != 8 {
		t.Errorf("TasksMax %d", f.TasksMax)
	}
	if _, ok := f.TargetProducer["override.acks"]; ok {
		t.Error("override prefix leaked")
	}
	if key, line := f.Position("tasks.max"); key != "A->B.tasks.max" || line != 18 {
		t.Errorf("Position = %s %d", key, line)
	}
	if f.TargetAdmin["bootstrap.servers"] != "b:9092" {
		t.Errorf("target admin %v", f.TargetAdmin)
	}
}

func TestLegacyAliases(t *testing.T) {
	c := mustParse(t, `clusters = A, B
A.bootstrap.servers = a:1
B.bootstrap.servers = b:1
A->B.enabled = true
B->A.enabled = true
topics.blacklist = x.*
groups.blacklist = g.*
config.properties.blacklist = retention\\.ms
topics.whitelist = t.*
groups.whitelist = h.*
A->B.topics.exclude = y.*
B->A.topics.blacklist = z.*
A->B.groups.blacklist = q.*
A->B.groups.exclude = r.*
`)
	ab, ba := flow(t, c, "A->B"), flow(t, c, "B->A")
	tests := []struct{ got, want []string }{
		{ab.TopicsExclude, []string{"y.*"}},
		{ba.TopicsExclude, []string{"z.*"}},
		{ba.GroupsExclude, []string{"g.*"}},
		{ab.GroupsExclude, []string{"r.*"}}, // the new name wins at the same level
		{ab.ConfigPropertiesExclude, []string{`retention\.ms`}},
		{ab.Topics, []string{"t.*"}},
		{ab.Groups, []string{"h.*"}},
	}
	for i, tt := range tests {
		if strings.Join(tt.got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%d: got %q, want %q", i, tt.got, tt.want)
		}
	}
	for _, w := range []string{
		`mm2.properties:6: "topics.blacklist" is deprecated (removed in Kafka 4.0); use "topics.exclude"`,
		`mm2.properties:10: "groups.whitelist" is deprecated`,
		`mm2.properties:12: "B->A.topics.blacklist" is deprecated (removed in Kafka 4.0); use "B->A.topics.exclude"`,
	} {
		if !hasWarning(c, w) {
			t.Errorf("missing warning %q in %q", w, c.Warnings)
		}
	}
}

func TestPolicySettings(t *testing.T) {
	c := mustParse(t, `clusters = A, B
A.bootstrap.servers = a:1
B.bootstrap.servers = b:1
A->B.enabled = true
replication.policy.separator = _
A->B.replication.policy.internal.topic.separator.enabled = false
B->A.enabled = true
B->A.replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
offset-syncs.topic.location = source
`)
	ab, ba := flow(t, c, "A->B"), flow(t, c, "B->A")
	p := ab.Policy
	if p.FormatRemoteTopic("A", "t") != "A_t" || p.CheckpointsTopic("A") != "A.checkpoints.internal" {
		t.Errorf("A->B policy: %s %s", p.FormatRemoteTopic("A", "t"), p.CheckpointsTopic("A"))
	}
	if n := ab.OffsetSyncsTopic(); n != "mm2-offset-syncs.B.internal" {
		t.Errorf("location=source names the target: %s", n)
	}
	p = ba.Policy
	if p.FormatRemoteTopic("B", "t") != "t" || p.CheckpointsTopic("B") != "B_checkpoints_internal" {
		t.Errorf("B->A identity policy: %s %s", p.FormatRemoteTopic("B", "t"), p.CheckpointsTopic("B"))
	}
	if src, _ := p.TopicSource("t"); src != "B" {
		t.Errorf("identity source alias %q", src)
	}
}

func TestFlowsTargeting(t *testing.T) {
	c := mustParse(t, "clusters=A,B,C\nA.bootstrap.servers=a\nB.bootstrap.servers=b\nC.bootstrap.servers=c\nA->B.enabled=true\nC->B.enabled=true\nB->C.enabled=true\n")
	fs, err := c.FlowsTargeting([]string{"B"})
	if err != nil || len(fs) != 2 || fs[0].Name() != "A->B" || fs[1].Name() != "C->B" {
		t.Errorf("FlowsTargeting(B) = %v, %v", fs, err)
	}
	if _, err := c.FlowsTargeting([]string{"D"}); err == nil || !strings.Contains(err.Error(), `unknown cluster alias "D"`) {
		t.Errorf("unknown alias error %v", err)
	}
	if _, err := c.Pair("A", "A"); err == nil {
		t.Error("Pair(A, A)")
	}
}

func TestWarnings(t *testing.T) {
	c := mustParse(t, `clusters = A, B
A.bootstrap.servers = a:1
B.bootstrap.servers = b:1
A->B.enabled = true
foo.bar = 1
C.bootstrap.servers = c:1
A->B.topics.excludes = x
kmirror.provenance.header.enabled = true
A->B.kmirror.provenance.header.enabled = true
consumer.max.poll.records = 5
offset.flush.interval.ms = 100
use.incremental.alter.configs = never
A->C.topics = x
enabled = true
A->A.enabled = true
A.anything.goes = 1
listeners = http://:8083
ssl.truststore.location = /x
exactly.once.support = required
B->A.key.converter = org.apache.kafka.connect.json.JsonConverter
B->A.enabled = true
`)
	want := []string{
		`mm2.properties:5: unknown key "foo.bar"`,
		`mm2.properties:6: key "C.bootstrap.servers" refers to cluster alias "C", which is not declared in clusters`,
		`mm2.properties:7: unknown key "A->B.topics.excludes"`,
		`mm2.properties:10: "consumer.max.poll.records" has no effect at top level`,
		`mm2.properties:11: "offset.flush.interval.ms" has no effect at top level in MirrorMaker 2; set it per target cluster as ALIAS.offset.flush.interval.ms`,
		`mm2.properties:12: "use.incremental.alter.configs" was removed in Kafka 4.0 and is ignored`,
		`mm2.properties:13: "A->C.topics": unknown cluster alias "C"`,
		`mm2.properties:14: top-level "enabled" is ignored`,
		`mm2.properties:15: "A->A.enabled": a flow from a cluster to itself is ignored`,
		`mm2.properties:16: unknown key "A.anything.goes"`,
		`mm2.properties:17: "listeners" has no effect: MM2's REST server does not exist in kmirror`,
		`mm2.properties:18: "ssl.truststore.location" has no effect: not used with security.protocol PLAINTEXT`,
		`mm2.properties:19: "exactly.once.support" has no effect at top level`,
		`mm2.properties:20: B->A.key.converter is ignored: kmirror always copies raw bytes`,
	}
	for _, w := range want {
		if !hasWarning(c, w) {
			t.Errorf("missing warning %q", w)
		}
	}
	if len(c.Warnings) != len(want) {
		t.Errorf("got %d warnings, want %d:\n%s", len(c.Warnings), len(want), strings.Join(c.Warnings, "\n"))
	}
	if len(c.Flows) != 2 {
		t.Errorf("top-level enabled must not enable flows: %v", c.Flows)
	}
}

func TestValidationErrors(t *testing.T) {
	base := "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
	tests := []struct {
		name, text string
		want       []string
	}{
		{"missing clusters", "A.bootstrap.servers = a\n", []string{"mm2.properties: clusters: required key is missing"}},
		{"empty clusters", "clusters =\n", []string{"mm2.properties:1: clusters: must name at least one cluster alias"}},
		{"empty alias", "clusters = A,,B\n", []string{`mm2.properties:1: clusters: empty cluster alias in "A,,B"`}},
		{"undeclared flow alias", "clusters = A\nA.bootstrap.servers=a\nA->X.enabled = true\n",
			[]string{`mm2.properties:3: A->X.enabled: unknown cluster alias "X" (clusters = A)`}},
		{"undeclared both", "clusters = A\nX->Y.enabled = TRUE\n",
			[]string{`mm2.properties:2: X->Y.enabled: unknown cluster alias "X", "Y" (clusters = A)`}},
		{"missing bootstrap", "clusters = A, B\nA.bootstrap.servers = a:1\nA->B.enabled = true\n",
			[]string{`mm2.properties:3: B.bootstrap.servers: missing: cluster "B" is used by flow A->B but has no bootstrap servers`}},
		{"empty bootstrap", "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers =\nA->B.enabled = true\n",
			[]string{`mm2.properties:3: B.bootstrap.servers: is empty`}},
		{"bad enabled", "clusters = A, B\nA->B.enabled = yes\n",
			[]string{`mm2.properties:2: A->B.enabled: invalid boolean "yes" (expected true or false)`}},
		{"eol comment", base + "A->B.sync.group.offsets.enabled = true  # yes\n",
			[]string{`mm2.properties:5: A->B.sync.group.offsets.enabled: invalid boolean "true  # yes" (expected true or false) (.properties files have no end-of-line comments)`}},
		{"non-numeric interval", base + "A->B.refresh.topics.interval.seconds = 30s\n",
			[]string{`mm2.properties:5: A->B.refresh.topics.interval.seconds: invalid number "30s"`}},
		{"zero interval", base + "emit.checkpoints.interval.seconds = 0\n",
			[]string{`mm2.properties:5: emit.checkpoints.interval.seconds: must be positive (a negative value disables the task)`}},
		{"huge interval", base + "refresh.groups.interval.seconds = 9223372036854775807\n",
			[]string{`mm2.properties:5: refresh.groups.interval.seconds: 9223372036854775807 is out of range: must be at most 9223372036 seconds`}},
		{"replication factor zero", base + "replication.factor = 0\n",
			[]string{`mm2.properties:5: replication.factor: 0 is out of range: must be -1 (broker default) or between 1 and 32767`}},
		{"replication factor negative", base + "A->B.checkpoints.topic.replication.factor = -2\n",
			[]string{`mm2.properties:5: A->B.checkpoints.topic.replication.factor: -2 is out of range`}},
		{"replication factor too big", base + "heartbeats.topic.replication.factor = 40000\n",
			[]string{`mm2.properties:5: heartbeats.topic.replication.factor: 40000 is out of range`}},
		{"offset lag", base + "offset.lag.max = -1\n",
			[]string{`mm2.properties:5: offset.lag.max: -1 is out of range: must not be negative`}},
		{"offset lag text", base + "offset.lag.max = lots\n",
			[]string{`mm2.properties:5: offset.lag.max: invalid number "lots"`}},
		{"tasks max", base + "A->B.tasks.max = 0\n",
			[]string{`mm2.properties:5: A->B.tasks.max: 0 is out of range: must be at least 1`}},
		{"bad regex", base + "A->B.topics = foo(?=bar), ok\n",
			[]string{`mm2.properties:5: A->B.topics: regex "foo(?=bar)": look-ahead (?=...) is not supported by Go regexp`}},
		{"regex syntax", base + "groups.exclude = [a-\n",
			[]string{`mm2.properties:5: groups.exclude: regex "[a-": unclosed character class`}},
		{"comma in regex", base + "topics = a{1,3}\n",
			[]string{`mm2.properties:5: topics: regex "a{1": '{' at offset 1 does not start a repetition`}},
		{"policy class", base + "replication.policy.class = com.acme.Policy\n",
			[]string{`mm2.properties:5: replication.policy.class: unsupported replication policy class "com.acme.Policy"`}},
		{"location", base + "A->B.offset-syncs.topic.location = both\n",
			[]string{`mm2.properties:5: A->B.offset-syncs.topic.location: invalid value "both" (expected one of: source, target)`}},
		{"location case", base + "offset-syncs.topic.location = Source\n",
			[]string{`mm2.properties:5: offset-syncs.topic.location: invalid value "Source"`}},
		{"storage partitions", base + "offset.storage.partitions = 0\n",
			[]string{`mm2.properties:5: offset.storage.partitions: 0 is out of range`}},
		{"worker rf via alias", base + "B.offset.storage.replication.factor = x\n",
			[]string{`mm2.properties:5: B.offset.storage.replication.factor: invalid number "x"`}},
		{"separator flag", base + "replication.policy.internal.topic.separator.enabled = 1\n",
			[]string{`mm2.properties:5: replication.policy.internal.topic.separator.enabled: invalid boolean "1"`}},
		{"custom filter", base + "A->B.topic.filter.class = com.acme.Filter\n",
			[]string{`mm2.properties:5: A->B.topic.filter.class: class "com.acme.Filter" is not supported by kmirror`}},
		{"transforms", base + "A->B.transforms = x\n",
			[]string{`mm2.properties:5: A->B.transforms: single message transforms are not supported by kmirror`}},
		{"offset syncs off with keys", base + "offset-syncs.topic.replication.factor = 1\nA->B.emit.offset-syncs.enabled = false\n",
			[]string{`mm2.properties:6: A->B.emit.offset-syncs.enabled: cannot be false while offset-syncs.topic.replication.factor is set (line 5)`}},
		{"eos required", base + "A->B.exactly.once.support = required\n",
			[]string{`mm2.properties:5: A->B.exactly.once.support: required needs the source consumer's isolation.level = read_committed`}},
		{"transaction boundary", base + "A->B.transaction.boundary = connector\n",
			[]string{`mm2.properties:5: A->B.transaction.boundary: "connector" is not supported`}},
		{"provider undeclared", base + "A.sasl.jaas.config = ${vault:secret/x:jaas}\n",
			[]string{`mm2.properties:5: A.sasl.jaas.config: cannot resolve ${vault:secret/x:jaas}: config provider "vault" is not declared in config.providers`}},
		{"several errors", base + "tasks.max = x\nreplication.factor = y\n", []string{
			`mm2.properties:5: tasks.max: invalid number "x"`,
			`mm2.properties:6: replication.factor: invalid number "y"`}},
	}
	for _, tt := range tests {
		_, err := Parse("mm2.properties", []byte(tt.text), noEnv)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tt.want) {
			t.Errorf("%s: got %d errors:\n%v", tt.name, len(lines), err)
		}
		for i, w := range tt.want {
			if i < len(lines) && !strings.HasPrefix(lines[i], w) {
				t.Errorf("%s:\n got %s\nwant %s", tt.name, lines[i], w)
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.File != "mm2.properties" || e.Key == "" {
			t.Errorf("%s: not a *Error: %#v", tt.name, err)
		}
	}
}

func TestNegativeIntervalDisables(t *testing.T) {
	c := mustParse(t, "clusters=A,B\nA.bootstrap.servers=a\nB.bootstrap.servers=b\nA->B.enabled=true\nrefresh.topics.interval.seconds=-1\nsync.topic.acls.interval.seconds = 0\nsync.topic.acls.enabled = FALSE\nA->B.emit.offset-syncs.enabled = false\nsync.group.offsets.enabled = true\n")
	f := c.Flows[0]
	if f.RefreshTopicsEnabled || f.SyncTopicACLsEnabled || f.EmitCheckpointsEnabled || f.SyncGroupOffsetsEnabled {
		t.Errorf("%+v", f)
	}
	if !hasWarning(c, "sync.group.offsets.enabled has no effect because emit.offset-syncs.enabled is false") {
		t.Errorf("warnings %q", c.Warnings)
	}
}

func TestProviders(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.properties")
	if err := os.WriteFile(secrets, []byte("jaas = org.example.Login required password=\"file-secret\";\nrf=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("dir-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"A_SERVERS": "a:9092", "SECRET_PW": "env-secret", "BAD_BOOL": "env-secret-bool", "RE": "env-secret(?=x)", "BIG": "99999"}[k]
		return v, ok
	}
	text := `clusters = A, B
config.providers = env, file, dir
config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider
config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider
config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider
A.bootstrap.servers = ${env:A_SERVERS}
B.bootstrap.servers = b:9092
A.sasl.jaas.config = ${file:` + secrets + `:jaas}
A.ssl.truststore.password = ${dir:` + dir + `:pw}
B.ssl.keystore.password = ${env:SECRET_PW}
replication.factor = ${file:` + secrets + `:rf}
A->B.enabled = true
`
	c, err := Parse("mm2.properties", []byte(text), env)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Flows[0]
	if f.SourceConsumer["bootstrap.servers"] != "a:9092" || !strings.Contains(f.SourceAdmin["sasl.jaas.config"], "file-secret") ||
		f.SourceConsumer["ssl.truststore.password"] != "dir-secret" || f.TargetProducer["ssl.keystore.password"] != "env-secret" ||
		f.ReplicationFactor != 1 {
		t.Errorf("resolved: %v %v %d", f.SourceConsumer, f.TargetProducer, f.ReplicationFactor)
	}
	if !c.Props.Resolved("A.sasl.jaas.config") || c.Props.Display("A.bootstrap.servers") != "${env:A_SERVERS}" {
		t.Error("Resolved/Display")
	}
	if s := c.Props.String(); strings.Contains(s, "secret") && !strings.Contains(s, "${") {
		t.Errorf("String leaks: %s", s)
	}
	for _, secret := range []string{"file-secret", "dir-secret", "env-secret"} {
		if strings.Contains(c.Props.String(), secret) {
			t.Errorf("Props.String() leaks %s", secret)
		}
	}

	bad := []struct{ line, want string }{
		{"A.ssl.key.password = ${env:MISSING}", "mm2.properties:13: A.ssl.key.password: cannot resolve ${env:MISSING}: environment variable MISSING is not set"},
		{"A.sasl.jaas.config = x${file:" + secrets + ":nokey}", `mm2.properties:13: A.sasl.jaas.config: cannot resolve ${file:` + secrets + `:nokey}: key "nokey" not found in ` + secrets},
		{"A.sasl.jaas.config = ${file:" + dir + "/none.properties:jaas}", "no such file or directory"},
		{"A.ssl.key.password = ${dir:" + dir + ":nofile}", "cannot resolve ${dir:"},
		{"A->B.emit.heartbeats.enabled = ${env:BAD_BOOL}", `mm2.properties:13: A->B.emit.heartbeats.enabled: invalid boolean "${env:BAD_BOOL}"`},
		{"A->B.tasks.max = ${file:" + secrets + ":jaas}", `A->B.tasks.max: invalid number "${file:`},
		{"A.sasl.jaas.config = ${env:x:SECRET_PW}", "the env provider takes no path"},
		{"A->B.topics = ${env:RE}", `A->B.topics: regex list "${env:RE}" does not compile`},
		{"A->B.topic.filter.class = ${env:SECRET_PW}", `A->B.topic.filter.class: class "${env:SECRET_PW}" is not supported`},
		{"A->B.replication.policy.class = ${env:SECRET_PW}", `unsupported replication policy class "${env:SECRET_PW}"`},
		{"A->B.replication.factor = ${env:BIG}", `A->B.replication.factor: "${env:BIG}" is out of range`},
	}
	for _, b := range bad {
		_, err := Parse("mm2.properties", []byte(text+b.line+"\n"), env)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %v, want %q", b.line, err, b.want)
			continue
		}
		for _, secret := range []string{"file-secret", "dir-secret", "env-secret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: error leaks %s: %v", b.line, secret, err)
			}
		}
	}
}

func TestProviderConfigErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{"clusters=A\nconfig.providers = env\n", "mm2.properties:2: config.providers.env.class: config provider \"env\" is listed in config.providers but has no class"},
		{"clusters=A\nconfig.providers = v\nconfig.providers.v.class = com.hashicorp.Vault\n", "mm2.properties:3: config.providers.v.class: unsupported config provider class \"com.hashicorp.Vault\""},
		{"clusters=A\nconfig.providers = e\nconfig.providers.e.class = EnvVarConfigProvider\nconfig.providers.e.param.allowlist.pattern = KAFKA_.*\nA.bootstrap.servers = ${e:HOME}\n",
			"mm2.properties:5: A.bootstrap.servers: cannot resolve ${e:HOME}: environment variable HOME is not allowed by allowlist.pattern"},
		{"clusters=A\nconfig.providers = f\nconfig.providers.f.class = FileConfigProvider\nconfig.providers.f.param.allowed.paths = /nonexistent-dir\nA.bootstrap.servers = ${f:/etc/hosts:x}\n",
			"mm2.properties:4: config.providers.f.param.allowed.paths: /nonexistent-dir: no such file or directory (each allowed path must be absolute and exist)"},
	}
	for _, tt := range tests {
		_, err := Parse("mm2.properties", []byte(tt.text), func(string) (string, bool) { return "v", true })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want %q", err, tt.want)
		}
	}
}

func TestSensitive(t *testing.T) {
	for k, want := range map[string]bool{
		"sasl.jaas.config": true, "A.consumer.sasl.jaas.config": true, "ssl.key.password": true,
		"ssl.keystore.password": true, "ssl.truststore.password": true, "ssl.keystore.key": true,
		"B.basic.auth.user.info": true, "client.secret": true, "kmirror.rest.token": true,
		"bootstrap.servers": false, "ssl.keystore.location": false, "sasl.mechanism": false, "topics": false,
	} {
		if IsSensitive(k) != want {
			t.Errorf("IsSensitive(%q) = %v", k, !want)
		}
	}
	if Redact("A.ssl.key.password", "pw") != "[hidden]" || Redact("topics", ".*") != ".*" {
		t.Error("Redact")
	}
}

func TestErrorFormat(t *testing.T) {
	if s := (&Error{File: "f", Line: 3, Key: "k", Msg: "m"}).Error(); s != "f:3: k: m" {
		t.Error(s)
	}
	if s := (&Error{File: "f", Key: "k", Msg: "m"}).Error(); s != "f: k: m" {
		t.Error(s)
	}
}

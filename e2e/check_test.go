package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestCheck runs `kmirror check` on a file for real brokers: without
// --connect it validates and says what the flow will do; with --connect it
// reaches both clusters, names their brokers and lists the topics it would
// create; a bad file and an unreachable cluster exit non-zero.
func TestCheck(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	src, dst := alias(t, "a"), alias(t, "b")
	topic := testkafka.Topic(t, "check")
	a.CreateTopic(t, topic, 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic,
		dst+".exactly.once.source.support = Enabled"))

	out, code := runKmirror(t, 30*time.Second, "check", cfg)
	for _, want := range []string{
		"flow " + src + "->" + dst + ":",
		"data path: batch engine, source batches forwarded as they are",
		"topics: " + topic,
		"a source topic t becomes " + src + ".t",
		"exactly-once: on",
		"batches and progress in target transactions",
		"workers: single",
		"checkpoints: every 1m0s",
		"progress: saved every 1s into mm2-offsets." + src + ".internal",
		"configuration OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check lacks %q", want)
		}
	}
	if code != 0 || strings.Contains(out, "PROBLEM") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}

	out, code = runKmirror(t, 60*time.Second, "check", "--connect", cfg)
	for _, want := range []string{
		"cluster " + src + " (source admin settings) reached: broker ",
		"cluster " + dst + " (target admin settings) reached: broker ",
		"describe and read " + topic + " on " + src + " (3 partitions)",
		"would create " + src + "." + topic + " on " + dst + ": 3 partitions, replication factor 1, configs retention.ms=3600000",
		"would create mm2-offsets." + src + ".internal on " + dst + ": 25 partitions, replication factor 1, configs cleanup.policy=compact",
		"configuration and clusters OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check --connect lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("check --connect: exit %d:\n%s", code, out)
	}
	if hasTopic(t, b, src+"."+topic) {
		t.Error("check --connect created the remote topic")
	}

	bad := writeFile(t, "bad.properties", mm2Config(src, dst, a, b, "refresh.topics.interval.seconds = soon"))
	if out, code := runKmirror(t, 30*time.Second, "check", bad); code == 0 || !strings.Contains(out, "bad.properties:15: refresh.topics.interval.seconds") {
		t.Errorf("bad file: exit %d:\n%s", code, out)
	}
	down := writeFile(t, "down.properties", "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\nA->B.enabled = true\n")
	if out, code := runKmirror(t, 60*time.Second, "check", "--connect", "--timeout", "15s", down); code == 0 || !strings.Contains(out, "PROBLEM: cluster A is unreachable") {
		t.Errorf("unreachable cluster: exit %d:\n%s", code, out)
	}
	t.Logf("check --connect:\n%s", out)
}

// TestCheckSecure: on a cluster with ACLs, a user who may read the source
// topic but not create topics gets each missing permission reported and a
// non-zero exit; once granted, the check passes.
func TestCheckSecure(t *testing.T) {
	t.Parallel()
	sec := testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1, Secure: true})[0]
	info := sec.Info()
	topic := testkafka.Topic(t, "secure")
	sec.CreateTopic(t, topic, 2, nil)
	grant := func(acls ...*kadm.ACLBuilder) {
		for _, acl := range acls {
			sec.Grant(t, acl)
		}
	}
	grant(kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpDescribe, kadm.OpRead, kadm.OpDescribeConfigs).Allow("User:alice"))

	// Both aliases are the same cluster: remote topics get the prefix "up.".
	lines := []string{"clusters = up, down"}
	for _, a := range []string{"up", "down"} {
		lines = append(lines,
			a+".bootstrap.servers = "+strings.Join(info.SecureBootstrap, ","),
			a+".security.protocol = SASL_SSL",
			a+".sasl.mechanism = SCRAM-SHA-512",
			a+`.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="`+sec.Users["alice"]+`";`,
			a+".ssl.truststore.type = PEM",
			a+".ssl.truststore.location = "+info.CAFile)
	}
	lines = append(lines, "up->down.enabled = true", "up->down.topics = "+topic, "down->up.emit.heartbeats.enabled = false",
		"replication.factor = 1", "offset-syncs.topic.replication.factor = 1", "offset.storage.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1", "checkpoints.topic.replication.factor = 1")
	cfg := writeFile(t, "mm2.properties", strings.Join(lines, "\n")+"\n")

	out, code := runKmirror(t, 90*time.Second, "check", "--connect", cfg)
	for _, want := range []string{
		"ok: describe and read " + topic + " on up (2 partitions)",
		"PROBLEM: cannot create topic up." + topic + " on down: the user lacks CREATE",
		"PROBLEM: cannot create topic mm2-offsets.up.internal on down: the user lacks CREATE",
		"PROBLEM: cannot create topic heartbeats on down: the user lacks CREATE",
		"PROBLEM: cannot create topic up.checkpoints.internal on down: the user lacks CREATE",
		"PROBLEM: cannot create topic mm2-offset-syncs.up.internal on down: the user lacks CREATE",
		"problem(s) found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check --connect lacks %q", want)
		}
	}
	if code == 0 {
		t.Errorf("exit 0 with missing permissions")
	}
	if strings.Contains(out, sec.Users["alice"]) {
		t.Error("output shows alice's password")
	}
	t.Logf("without CREATE:\n%s", out)

	// An existing internal topic alice may not write is reported as such.
	sec.CreateTopic(t, "mm2-offsets.up.internal", 1, nil)
	grant(kadm.NewACLs().Clusters().Operations(kadm.OpCreate, kadm.OpDescribe).Allow("User:alice"),
		kadm.NewACLs().Topics("mm2-offsets.up.internal").ResourcePatternType(kadm.ACLPatternLiteral).
			Operations(kadm.OpDescribe, kadm.OpRead).Allow("User:alice"))
	out, code = runKmirror(t, 90*time.Second, "check", "--connect", cfg)
	if code == 0 || !strings.Contains(out, "PROBLEM: cannot write topic mm2-offsets.up.internal on down: the user lacks WRITE") ||
		strings.Contains(out, "cannot create topic") {
		t.Errorf("with CREATE but no WRITE on the offsets topic: exit %d:\n%s", code, out)
	}

	grant(kadm.NewACLs().Topics("mm2-offsets.up.internal").ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpWrite).Allow("User:alice"),
		kadm.NewACLs().Groups("*").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe, kadm.OpRead).Allow("User:alice"))
	out, code = runKmirror(t, 90*time.Second, "check", "--connect", cfg)
	if code != 0 || !strings.Contains(out, "configuration and clusters OK") {
		t.Errorf("with every permission: exit %d:\n%s", code, out)
	}
}

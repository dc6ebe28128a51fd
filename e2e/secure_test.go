package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestSecureTarget replicates into a cluster that takes only SASL_SSL, with
// SCRAM-SHA-512 and with PLAIN, configured with MM2's property names; the password comes
// from a file through MM2's FileConfigProvider. A wrong password fails
// loudly without printing it.
func TestSecureTarget(t *testing.T) {
	a := testkafka.Shared(t, 1)[0]
	sec := testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1, Secure: true})[0]
	info := sec.Info()
	topic := testkafka.Topic(t, "secure")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 50, "s")

	secrets := writeFile(t, "secrets.properties", "admin.password = "+info.Password("admin")+"\nwrong.password = not-the-password-42\n")
	config := func(mechanism, passwordKey string) string {
		src, dst := alias(t, "src"), "secure"
		module := "org.apache.kafka.common.security.scram.ScramLoginModule"
		if mechanism == "PLAIN" {
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		}
		return strings.Join([]string{
			"config.providers = file",
			"config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
			"clusters = " + src + ", " + dst,
			src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
			dst + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
			dst + ".security.protocol = SASL_SSL",
			dst + ".sasl.mechanism = " + mechanism,
			dst + ".sasl.jaas.config = " + module + ` required username="admin" password="${file:` + secrets + `:` + passwordKey + `}";`,
			dst + ".ssl.truststore.type = PEM",
			dst + ".ssl.truststore.location = " + info.CAFile,
			src + "->" + dst + ".enabled = true",
			src + "->" + dst + ".topics = " + topic,
			dst + "->" + src + ".emit.heartbeats.enabled = false",
			"replication.factor = 1",
			"offset-syncs.topic.replication.factor = 1",
			"offset.storage.replication.factor = 1",
			"heartbeats.topic.replication.factor = 1",
			"checkpoints.topic.replication.factor = 1",
		}, "\n") + "\n"
	}

	for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
		cfg := writeFile(t, "mm2.properties", config(mech, "admin.password"))
		copies := func() int {
			n := 0
			for name := range topicNames(t, sec) {
				if strings.HasSuffix(name, "."+topic) && countAll(t, sec, name) == 50 {
					n++
				}
			}
			return n
		}
		before := copies()
		p := startKmirror(t, cfg)
		waitFor(t, 60*time.Second, "records on the secure cluster over "+mech, func() bool { return copies() == before+1 })
		p.stop()
		if log := p.log.String(); strings.Contains(log, info.Password("admin")) {
			t.Errorf("kmirror's log shows the password (%s)", mech)
		}
	}

	bad := writeFile(t, "bad.properties", config("SCRAM-SHA-512", "wrong.password"))
	out, code := runKmirror(t, 60*time.Second, "run", bad)
	if code == 0 || !strings.Contains(out, "cluster secure is unreachable or refuses kmirror") {
		t.Errorf("wrong password: exit %d, output:\n%s", code, out)
	}
	if strings.Contains(out, "not-the-password-42") {
		t.Errorf("output shows the wrong password:\n%s", out)
	}
	t.Log("replicated 50 records over SASL_SSL with SCRAM-SHA-512 and with PLAIN")
}

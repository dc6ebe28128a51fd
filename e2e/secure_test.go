package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestSecureTarget replicates into a cluster that takes only SASL_SSL with
// SCRAM-SHA-512, configured with MM2's property names; the password comes
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
	config := func(passwordKey string) string {
		src, dst := alias(t, "src"), "secure"
		return strings.Join([]string{
			"config.providers = file",
			"config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
			"clusters = " + src + ", " + dst,
			src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
			dst + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
			dst + ".security.protocol = SASL_SSL",
			dst + ".sasl.mechanism = SCRAM-SHA-512",
			dst + `.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="${file:` + secrets + `:` + passwordKey + `}";`,
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

	cfg := writeFile(t, "mm2.properties", config("admin.password"))
	p := startKmirror(t, cfg)
	var remote string
	waitFor(t, 60*time.Second, "records on the secure cluster", func() bool {
		for name := range topicNames(t, sec) {
			if strings.HasSuffix(name, "."+topic) {
				remote = name
				return countAll(t, sec, name) == 50
			}
		}
		return false
	})
	p.stop()
	if log := p.log.String(); strings.Contains(log, info.Password("admin")) {
		t.Errorf("kmirror's log shows the password")
	}

	bad := writeFile(t, "bad.properties", config("wrong.password"))
	out, code := runKmirror(t, 60*time.Second, "run", bad)
	if code == 0 || !strings.Contains(out, "cluster secure is unreachable or refuses kmirror") {
		t.Errorf("wrong password: exit %d, output:\n%s", code, out)
	}
	if strings.Contains(out, "not-the-password-42") {
		t.Errorf("output shows the wrong password:\n%s", out)
	}
	t.Logf("replicated 50 records into %s over SASL_SSL/SCRAM-SHA-512", remote)
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestSecureTarget replicates into a cluster that takes only SASL_SSL, with
// SCRAM-SHA-512, with PLAIN and with OAUTHBEARER (the brokers' unsecured
// test mode), configured with MM2's property names; the password comes
// from a file through MM2's FileConfigProvider. A wrong password fails
// loudly without printing it. Then kmirror mm1 copies the topic with a
// MirrorMaker 1 producer file that uses a JKS trust store. The secure
// cluster is one of testkafka.SharedSecure; kmirror logs in as its super
// user admin, so no ACL is granted.
func TestSecureTarget(t *testing.T) {
	t.Parallel()
	a := testkafka.Shared(t, 1)[0]
	sec := testkafka.SharedSecure(t)[0] // SASL_SSL: SCRAM-SHA-512, PLAIN, OAUTHBEARER
	info := sec.Info()
	topic := testkafka.Topic(t, "secure")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 50, "s")

	secrets := writeFile(t, "secrets.properties", "admin.password = "+info.Password("admin")+"\nwrong.password = not-the-password-42\n")
	config := func(mechanism, passwordKey string) string {
		src, dst := alias(t, "src"), "secure"
		module := "org.apache.kafka.common.security.scram.ScramLoginModule"
		creds := ` username="admin" password="${file:` + secrets + `:` + passwordKey + `}";`
		switch mechanism {
		case "PLAIN":
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		case "OAUTHBEARER":
			module, creds = testkafka.OAuthModule, ` unsecuredLoginStringClaim_sub="admin";`
		}
		return strings.Join([]string{
			"config.providers = file",
			"config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
			"clusters = " + src + ", " + dst,
			src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
			dst + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
			dst + ".security.protocol = SASL_SSL",
			dst + ".sasl.mechanism = " + mechanism,
			dst + ".sasl.jaas.config = " + module + " required" + creds,
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

	for _, mech := range []string{"SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"} {
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
	t.Log("replicated 50 records over SASL_SSL with SCRAM-SHA-512, PLAIN and OAUTHBEARER")

	// A MirrorMaker 1 producer file as cloud providers hand them out: PLAIN
	// over SASL_SSL, a JKS trust store made by keytool, no host name check.
	trust := testkafka.TrustStore(t, t.TempDir(), "kafka.client.truststore.jks", "JKS", "KafkaTrustStorePass", info.CAFile)
	consumer := writeFile(t, "consumer.properties", "bootstrap.servers="+strings.Join(a.Bootstrap, ",")+"\ngroup.id="+topic+"-mm1\n")
	producer := writeFile(t, "producer.properties", strings.Join([]string{
		"bootstrap.servers=" + strings.Join(info.SecureBootstrap, ","),
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="` + info.Password("admin") + `";`,
		"sasl.mechanism=PLAIN",
		"security.protocol=SASL_SSL",
		"ssl.truststore.location=" + trust,
		"ssl.truststore.password=KafkaTrustStorePass",
		"ssl.endpoint.identification.algorithm=",
	}, "\n")+"\n")
	p := startMM1(t, t.TempDir(), "--consumer.config", consumer, "--producer.config", producer,
		"--whitelist", topic, "--replication.factor", "1")
	waitFor(t, 90*time.Second, "MM1's copy on the secure cluster", func() bool { return countOrZero(t, sec, topic) == 50 })
	p.stop()
	sameRecords(t, a.ReadAll(t, topic), sec.ReadAll(t, topic), "")
	if log := p.log.String(); strings.Contains(log, "KafkaTrustStorePass") || strings.Contains(log, info.Password("admin")) {
		t.Error("kmirror mm1's log shows a password")
	}
}

package e2e

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// startClientAuth starts a secure cluster whose SASL_SSL listener requires
// client certificates signed by testkafka.ClientCA(t, dir); extra is added
// to the broker settings.
func startClientAuth(t *testing.T, dir string, extra map[string]string) *testkafka.Cluster {
	cfg := map[string]string{
		"listener.name.sasl_ssl.ssl.client.auth":         "required",
		"listener.name.sasl_ssl.ssl.truststore.type":     "PEM",
		"listener.name.sasl_ssl.ssl.truststore.location": testkafka.ClientCA(t, dir),
	}
	maps.Copy(cfg, extra)
	return testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1, Secure: true, Config: cfg})[0]
}

// TestTLSStores replicates from and to a SASL_SSL listener that also
// requires a client certificate (ssl.client.auth=required), with trust and
// key stores made by keytool: JKS stores (key password apart from the store
// password) on the source side, PKCS12 stores on the target side. Without
// a key store the broker refuses kmirror. No store password is logged.
func TestTLSStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sec := startClientAuth(t, dir, nil)
	plain := testkafka.Shared(t, 1)[0]
	info := sec.Info()

	const storePw, keyPw, p12Pw = "jks-store-secret", "jks-key-secret", "p12-store-secret"
	trustJKS := testkafka.TrustStore(t, dir, "trust.jks", "JKS", storePw, info.CAFile)
	keyJKS := testkafka.ClientStore(t, dir, "client.jks", "JKS", storePw, keyPw, "kmirror")
	trustP12 := testkafka.TrustStore(t, dir, "trust.p12", "PKCS12", p12Pw, info.CAFile)
	keyP12 := testkafka.ClientStore(t, dir, "client.p12", "PKCS12", p12Pw, p12Pw, "kmirror")
	secrets := []string{storePw, keyPw, p12Pw, info.Password("admin")}

	saslSSL := func(alias, mechanism string) []string {
		module := "org.apache.kafka.common.security.scram.ScramLoginModule"
		if mechanism == "PLAIN" {
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		}
		return []string{
			alias + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
			alias + ".security.protocol = SASL_SSL",
			alias + ".sasl.mechanism = " + mechanism,
			alias + ".sasl.jaas.config = " + module + ` required username="admin" password="` + info.Password("admin") + `";`,
		}
	}
	jks := func(alias string) []string {
		return []string{ // no ssl.*.type: JKS is Java's default
			alias + ".ssl.truststore.location = " + trustJKS,
			alias + ".ssl.truststore.password = " + storePw,
			alias + ".ssl.keystore.location = " + keyJKS,
			alias + ".ssl.keystore.password = " + storePw,
			alias + ".ssl.key.password = " + keyPw,
		}
	}
	p12 := func(alias string) []string {
		return []string{
			alias + ".ssl.truststore.type = PKCS12",
			alias + ".ssl.truststore.location = " + trustP12,
			alias + ".ssl.truststore.password = " + p12Pw,
			alias + ".ssl.keystore.type = PKCS12",
			alias + ".ssl.keystore.location = " + keyP12,
			alias + ".ssl.keystore.password = " + p12Pw,
		}
	}

	for _, tc := range []struct {
		name      string
		secureSrc bool // the secure cluster is the source, else the target
		mechanism string
		stores    func(string) []string
	}{
		{"source side, JKS stores, SCRAM", true, "SCRAM-SHA-512", jks},
		{"target side, PKCS12 stores, PLAIN", false, "PLAIN", p12},
		{"source side, PKCS12 stores, PLAIN", true, "PLAIN", p12},
		{"target side, JKS stores, SCRAM", false, "SCRAM-SHA-512", jks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := alias(t, "src"), alias(t, "dst")
			from, to := plain, sec
			secAlias := dst
			if tc.secureSrc {
				from, to, secAlias = sec, plain, src
			}
			topic := testkafka.Topic(t, "stores")
			from.CreateTopic(t, topic, 2, nil)
			produceN(t, from, topic, 2, 40, "tls")
			extra := append(saslSSL(secAlias, tc.mechanism), tc.stores(secAlias)...)
			extra = append(extra, src+"->"+dst+".topics = "+topic)
			cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, from, to, extra...))
			p := startKmirror(t, cfg)
			remote := src + "." + topic
			waitFor(t, 90*time.Second, "40 records in "+remote, func() bool {
				return hasTopic(t, to, remote) && countAll(t, to, remote) == 40
			})
			p.stop()
			sameRecords(t, from.ReadAll(t, topic), to.ReadAll(t, remote), "")
			log := p.log.String()
			for _, s := range secrets {
				if strings.Contains(log, s) {
					t.Errorf("kmirror's log shows a secret")
				}
			}
		})
	}

	t.Run("no key store", func(t *testing.T) {
		src, dst := alias(t, "src"), alias(t, "dst")
		extra := append(saslSSL(dst, "SCRAM-SHA-512"),
			dst+".ssl.truststore.location = "+trustJKS, dst+".ssl.truststore.password = "+storePw)
		cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, plain, sec, extra...))
		out, code := runKmirror(t, 60*time.Second, "run", cfg)
		if code == 0 || !strings.Contains(out, "cluster "+dst+" is unreachable or refuses kmirror") || !strings.Contains(out, "certificate") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("output shows a secret:\n%s", out)
			}
		}
	})
}

// TestMTLS replicates from a listener that speaks SSL only and requires
// client certificates: the broker knows kmirror by its certificate
// (User:CN=kmirror), which comes from a PKCS12 key store made by keytool.
// A self-signed certificate with the same name is refused.
func TestMTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sec := startClientAuth(t, dir, map[string]string{
		// The SASL_SSL listener is turned into an SSL one.
		"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SSL",
		"super.users":                    "User:ANONYMOUS;User:CN=kmirror",
	})
	plain := testkafka.Shared(t, 1)[0]
	info := sec.Info()
	const pw = "mtls-store-secret"
	trust := testkafka.TrustStore(t, dir, "trust.p12", "PKCS12", pw, info.CAFile)
	keys := testkafka.ClientStore(t, dir, "client.p12", "PKCS12", pw, pw, "kmirror")
	// A self-signed certificate, which the broker does not trust.
	testkafka.Keytool(t, dir, "-genkeypair", "-alias", "self", "-keyalg", "EC", "-groupname", "secp256r1",
		"-dname", "CN=kmirror", "-validity", "2", "-keystore", "self.p12", "-storetype", "PKCS12", "-storepass", pw)
	selfSigned := filepath.Join(dir, "self.p12")

	for _, tc := range []struct {
		name     string
		keystore string
		ok       bool
	}{
		{"known certificate", keys, true},
		{"untrusted certificate", selfSigned, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := alias(t, "src"), alias(t, "dst")
			topic := testkafka.Topic(t, "mtls")
			sec.CreateTopic(t, topic, 2, nil)
			produceN(t, sec, topic, 2, 30, "mtls")
			cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, sec, plain,
				src+".bootstrap.servers = "+strings.Join(info.SecureBootstrap, ","),
				src+".security.protocol = SSL",
				src+".ssl.truststore.type = PKCS12",
				src+".ssl.truststore.location = "+trust,
				src+".ssl.truststore.password = "+pw,
				src+".ssl.keystore.type = PKCS12",
				src+".ssl.keystore.location = "+tc.keystore,
				src+".ssl.keystore.password = "+pw,
				src+"->"+dst+".topics = "+topic))
			if !tc.ok {
				out, code := runKmirror(t, 60*time.Second, "run", cfg)
				if code == 0 || !strings.Contains(out, "cluster "+src+" is unreachable or refuses kmirror") {
					t.Errorf("exit %d, output:\n%s", code, out)
				}
				return
			}
			p := startKmirror(t, cfg)
			remote := src + "." + topic
			waitFor(t, 90*time.Second, "30 records in "+remote, func() bool {
				return hasTopic(t, plain, remote) && countAll(t, plain, remote) == 30
			})
			p.stop()
			sameRecords(t, sec.ReadAll(t, topic), plain.ReadAll(t, remote), "")
			if strings.Contains(p.log.String(), pw) {
				t.Error("kmirror's log shows the store password")
			}
		})
	}
}

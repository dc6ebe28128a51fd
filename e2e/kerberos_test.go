package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

const realm = "KMIRROR.TEST"

// kdc is an MIT Kerberos KDC on 127.0.0.1 that lives in a test's folder;
// nothing outside it is configured.
type kdc struct {
	dir, krb5conf string
	env           []string
}

// sbin finds an MIT tool, which Debian puts in /usr/sbin.
func sbin(t *testing.T, name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found: run scripts/setup (Debian packages krb5-kdc, krb5-admin-server, krb5-user)", name)
	}
	return p
}

// startKDC creates a realm database and starts krb5kdc on a free port; it
// is killed at cleanup.
func startKDC(t *testing.T) *kdc {
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	enctypes := "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"
	k := &kdc{dir: dir, krb5conf: filepath.Join(dir, "krb5.conf")}
	writeIn := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	writeIn("krb5.conf", fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 dns_canonicalize_hostname = false
 udp_preference_limit = 1
 default_tkt_enctypes = %[3]s
 default_tgs_enctypes = %[3]s
 permitted_enctypes = %[3]s
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]s
 }
`, realm, port, enctypes))
	kdcConf := writeIn("kdc.conf", fmt.Sprintf(`[kdcdefaults]
 kdc_listen = 127.0.0.1:%[2]s
 kdc_tcp_listen = 127.0.0.1:%[2]s
[realms]
 %[1]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  max_life = 1h
 }
[logging]
 kdc = FILE:%[3]s/kdc.log
`, realm, port, dir))
	writeIn("kadm5.acl", "")
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.krb5conf, "KRB5_KDC_PROFILE="+kdcConf)
	k.run(t, sbin(t, "kdb5_util"), "create", "-s", "-r", realm, "-P", "kdc-master-"+strconv.Itoa(os.Getpid()))
	cmd := exec.Command(sbin(t, "krb5kdc"), "-n", "-r", realm)
	cmd.Env = k.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, 30*time.Second, "the KDC on port "+port, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return k
}

func (k *kdc) run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = k.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// keytab adds principal with a random key and writes its key tab.
func (k *kdc) keytab(t *testing.T, principal string) string {
	path := filepath.Join(k.dir, strings.NewReplacer("/", "_", "@", "_").Replace(principal)+".keytab")
	k.run(t, sbin(t, "kadmin.local"), "-r", realm, "-q", "addprinc -randkey "+principal)
	k.run(t, sbin(t, "kadmin.local"), "-r", realm, "-q", "ktadd -k "+path+" "+principal)
	return path
}

// TestKerberos replicates from and to a broker whose SASL_SSL listener
// takes GSSAPI, against a real MIT KDC, with MM2's keys: the
// Krb5LoginModule with a key tab on the source side, with a ticket cache
// made by kinit on the target side, and sasl.kerberos.service.name.
func TestKerberos(t *testing.T) {
	t.Parallel()
	k := startKDC(t)
	brokerKeytab := k.keytab(t, "kafka/127.0.0.1@"+realm)
	clientKeytab := k.keytab(t, "kmirror@"+realm)
	cache := filepath.Join(k.dir, "kmirror.ccache")
	k.run(t, "kinit", "-k", "-t", clientKeytab, "-c", cache, "kmirror@"+realm)

	sec := testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1, Secure: true,
		JVMFlags: []string{"-Djava.security.krb5.conf=" + k.krb5conf},
		Config: map[string]string{
			"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN,GSSAPI",
			"listener.name.sasl_ssl.gssapi.sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="` +
				brokerKeytab + `" principal="kafka/127.0.0.1@` + realm + `";`,
			"sasl.kerberos.service.name": "kafka",
			"super.users":                "User:ANONYMOUS;User:admin;User:kmirror",
		}})[0]
	plain := testkafka.Shared(t, 1)[0]
	info := sec.Info()

	gssapi := func(alias, jaas string) []string {
		return []string{
			alias + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
			alias + ".security.protocol = SASL_SSL",
			alias + ".sasl.mechanism = GSSAPI",
			alias + ".sasl.kerberos.service.name = kafka",
			alias + ".sasl.jaas.config = " + jaas,
			alias + ".ssl.truststore.type = PEM",
			alias + ".ssl.truststore.location = " + info.CAFile,
		}
	}
	for _, tc := range []struct {
		name      string
		secureSrc bool
		jaas      string
	}{
		{"source side, key tab", true, `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="` +
			clientKeytab + `" principal="kmirror@` + realm + `";`},
		{"target side, ticket cache", false, `com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true ticketCache="` + cache + `";`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := alias(t, "src"), alias(t, "dst")
			from, to, secAlias := plain, sec, dst
			if tc.secureSrc {
				from, to, secAlias = sec, plain, src
			}
			topic := testkafka.Topic(t, "krb")
			from.CreateTopic(t, topic, 2, nil)
			produceN(t, from, topic, 2, 30, "krb")
			extra := append(gssapi(secAlias, tc.jaas), src+"->"+dst+".topics = "+topic)
			cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, from, to, extra...))
			cmd := exec.Command(kmirrorBin(t), "run", cfg)
			cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.krb5conf)
			p := startProc(t, "kmirror", cmd)
			remote := src + "." + topic
			waitFor(t, 90*time.Second, "30 records in "+remote, func() bool {
				return hasTopic(t, to, remote) && countAll(t, to, remote) == 30
			})
			p.stop()
			sameRecords(t, from.ReadAll(t, topic), to.ReadAll(t, remote), "")
		})
	}
	// The KDC issued kmirror tickets for the brokers' service.
	kdcLog, err := os.ReadFile(filepath.Join(k.dir, "kdc.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kdcLog), "kmirror@"+realm+" for kafka/127.0.0.1@"+realm) {
		t.Errorf("the KDC log shows no service ticket for kmirror:\n%s", kdcLog)
	}

	t.Run("unknown service", func(t *testing.T) {
		src, dst := alias(t, "src"), alias(t, "dst")
		extra := gssapi(dst, `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="`+
			clientKeytab+`" principal="kmirror";`)
		extra = append(extra, dst+".sasl.kerberos.service.name = nokafka")
		cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, plain, sec, extra...))
		cmd := exec.Command(kmirrorBin(t), "run", cfg)
		cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.krb5conf)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), "cluster "+dst+" is unreachable or refuses kmirror") {
			t.Errorf("exit %d, output:\n%s", cmd.ProcessState.ExitCode(), out)
		}
	})
}

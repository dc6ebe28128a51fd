package e2e

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// seed004Producer writes seed 004's producer.properties (the fixture, one
// key a line) with the replacements given as old, new pairs.
func seed004Producer(t *testing.T, pairs ...string) string {
	t.Helper()
	s := readSeed(t, "004-2-producer.properties")
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("seed 004 has no %q", pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return writeFile(t, "producer.properties", s)
}

const seed004Bootstrap = "SASL接入点（公网） # 需要根据实际情况修改"

// Issue 19 item 14: a running kmirror mm1 names the user's file and line in
// its warnings, at start and after a reload (SIGHUP), never its generated
// temporary file. Seed 004's producer file is pointed at a PLAINTEXT
// listener, so its SASL and TLS keys have no effect.
func TestMM1WarningsNameUserFiles(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "mm1pos")
	a.CreateTopic(t, topic, 1, nil)
	produceN(t, a, topic, 1, 10, "pos")
	consumer := writeFile(t, "consumer.properties", "bootstrap.servers="+strings.Join(a.Bootstrap, ",")+"\n")
	producer := seed004Producer(t, seed004Bootstrap, strings.Join(b.Bootstrap, ","),
		"security.protocol=SASL_SSL", "security.protocol=PLAINTEXT")
	tmp := t.TempDir()
	p := startMM1(t, tmp, "--consumer.config", consumer, "--producer.config", producer,
		"--whitelist", topic, "--replication.factor", "1", "--source-alias", alias(t, "s"))
	waitFor(t, 90*time.Second, "the records on the target", func() bool { return countOrZero(t, b, topic) == 10 })

	// The text handler quotes the message: its quotes are escaped.
	want := []string{
		producer + `:2: \"target.sasl.jaas.config\" has no effect: not used with security.protocol PLAINTEXT`,
		producer + `:3: \"target.sasl.mechanism\" has no effect`,
		producer + `:5: \"ssl.truststore.location\": the value ends in \"#根据实际情况替换证书路径\"`,
		producer + `:6: \"target.ssl.truststore.password\" has no effect`,
		producer + `:7: \"target.ssl.endpoint.identification.algorithm\" has no effect`,
	}
	for _, w := range want {
		if n := strings.Count(p.log.String(), w); n != 1 {
			t.Errorf("the log holds %q %d times, want once", w, n)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the warnings of the reload", func() bool { return strings.Count(p.log.String(), want[0]) == 2 })
	p.stop()
	// Only the INFO line "reloading configuration" says which file is
	// reloaded: the generated one (docs/mm1.md, Reloading).
	for _, l := range strings.Split(p.log.String(), "\n") {
		if (strings.Contains(l, "kmirror-mm1-") || strings.Contains(l, tmp)) && !strings.Contains(l, `msg="reloading configuration"`) {
			t.Errorf("a log line names the generated file: %s", l)
		}
	}
}

// Issue 19 item 14: seed 004's producer file as the article prints it,
// "sasl.mechanism=PLAIN security.protocol=SASL_SSL" and
// "ssl.truststore.password=KafkaTrustStorePass ssl.endpoint.identification.algorithm="
// on single lines: kmirror mm1
// refuses the file at once, naming both lines, instead of connecting with
// PLAINTEXT and failing on a TLS alert.
func TestMM1SeedTwoKeysOnOneLine(t *testing.T) {
	t.Parallel()
	// Both clusters are a listener that counts connections: the file is
	// refused before kmirror connects anywhere.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	consumer := writeFile(t, "consumer.properties", "bootstrap.servers="+addr+"\ngroup.id=test-consumer-group\n")
	producer := seed004Producer(t, seed004Bootstrap, addr,
		"sasl.mechanism=PLAIN\nsecurity.protocol=SASL_SSL", "sasl.mechanism=PLAIN security.protocol=SASL_SSL",
		"ssl.truststore.password=KafkaTrustStorePass\nssl.endpoint.identification.algorithm=",
		"ssl.truststore.password=KafkaTrustStorePass ssl.endpoint.identification.algorithm=")
	out, code := runWithEnv(t, []string{"TMPDIR=" + t.TempDir()}, "mm1", "--consumer.config", consumer, "--producer.config", producer,
		"--whitelist", "testTopic", "--replication.factor", "1", "--source-alias", alias(t, "s"))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, w := range []string{
		producer + `:3: sasl.mechanism: two keys on one line: the value holds "security.protocol=", which a properties file reads as part of sasl.mechanism's value, so security.protocol is not set; put security.protocol on a line of its own`,
		producer + `:5: ssl.truststore.password: two keys on one line: the value holds "ssl.endpoint.identification.algorithm="`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	for _, l := range []string{"PLAINTEXT", "mirroring as MirrorMaker 1 would", "KafkaTrustStorePass", "kmirror-mm1-"} {
		if strings.Contains(out, l) {
			t.Errorf("output holds %q", l)
		}
	}
	if n := conns.Load(); n > 0 {
		t.Errorf("%d connections to the clusters before the file was refused, want none", n)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// Issue 19 item 15: when the target has fewer brokers than the replication
// factor of a topic kmirror mm1 creates, the error names
// --replication.factor, the flag an MM1 user has, not only an MM2 key.
func TestMM1ReplicationFactorErrorNamesFlag(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	brokers, err := b.Admin(t).ListBrokers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	n := len(brokers)
	consumer := writeFile(t, "consumer.properties", "bootstrap.servers="+strings.Join(a.Bootstrap, ",")+"\n")
	producer := writeFile(t, "producer.properties", "bootstrap.servers="+strings.Join(b.Bootstrap, ",")+"\n")
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		// MM2's default for internal topics is 3.
		{"not given", nil, "(MM2 key offset.storage.replication.factor at its default, as --replication.factor is not given; " +
			"give --replication.factor N with N at most the number of brokers of the target, or -1 for the broker default): INVALID_REPLICATION_FACTOR"},
		{"too high", []string{"--replication.factor", fmt.Sprint(n + 1)},
			fmt.Sprintf("(--replication.factor %d, MM2 key offset.storage.replication.factor): INVALID_REPLICATION_FACTOR", n+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.flags == nil && n >= 3 {
				t.Skipf("the target has %d brokers: MM2's default replication factor 3 fits", n)
			}
			src := alias(t, "s")
			args := append([]string{"mm1", "--consumer.config", consumer, "--producer.config", producer,
				"--whitelist", testkafka.Topic(t, "mm1rf"), "--source-alias", src}, tt.flags...)
			out, code := runWithEnv(t, []string{"TMPDIR=" + t.TempDir()}, args...)
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, want 1 and output with %q:\n%s", code, tt.want, out)
			}
			if strings.Contains(out, "(key offset.storage.replication.factor)") {
				t.Errorf("output names only the MM2 key:\n%s", out)
			}
			if hasTopic(t, b, "mm2-offsets."+src+".internal") {
				t.Errorf("the progress topic was created")
			}
		})
	}
}

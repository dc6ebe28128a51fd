package kafkalocal

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPomPinsKafkaVersion(t *testing.T) {
	pom, err := os.ReadFile(filepath.Join("..", "..", PomPath))
	if err != nil {
		t.Fatal(err)
	}
	if got := pomVersion(pom); got != KafkaVersion {
		t.Fatalf("%s pins %q, KafkaVersion is %q", PomPath, got, KafkaVersion)
	}
}

func testCluster(nodes int, secure bool) *Cluster {
	c := &Cluster{Name: "A", Secure: secure}
	for i := range nodes {
		c.Nodes = append(c.Nodes, &Node{ID: int32(i + 1), Port: 9000 + 10*i, ControllerPort: 9001 + 10*i, SecurePort: 9002 + 10*i, Dir: "/r/A/node-" + string(rune('1'+i))})
	}
	if secure {
		c.Users = []User{{Name: "admin", Password: "pw1", Super: true}, {Name: "alice", Password: "pw2"}}
	}
	return c
}

func parseProps(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

func TestServerProperties(t *testing.T) {
	tests := []struct {
		nodes             int
		secure            bool
		extra             map[string]string
		want              map[string]string
		absent            []string
		listenersContains string
	}{
		{
			nodes: 1,
			want: map[string]string{
				"node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9001",
				"offsets.topic.replication.factor": "1", "transaction.state.log.min.isr": "1",
				"group.initial.rebalance.delay.ms": "0", "process.roles": "broker,controller",
				"log.dirs": "/r/A/node-1/data",
			},
			absent: []string{"authorizer.class.name", "sasl.enabled.mechanisms"},
		},
		{
			nodes: 3,
			want: map[string]string{
				"controller.quorum.voters":         "1@127.0.0.1:9001,2@127.0.0.1:9011,3@127.0.0.1:9021",
				"offsets.topic.replication.factor": "3", "default.replication.factor": "3",
				"transaction.state.log.min.isr": "2",
			},
		},
		{
			nodes: 2, extra: map[string]string{"auto.create.topics.enable": "false", "num.partitions": "4"},
			want: map[string]string{"offsets.topic.replication.factor": "2", "transaction.state.log.min.isr": "2",
				"auto.create.topics.enable": "false", "num.partitions": "4"},
		},
		{
			nodes: 1, secure: true,
			want: map[string]string{
				"super.users":                                   "User:ANONYMOUS;User:admin",
				"allow.everyone.if.no.acl.found":                "false",
				"listener.security.protocol.map":                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
				"listener.name.sasl_ssl.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="pw1" user_alice="pw2";`,
				"listener.name.sasl_ssl.ssl.keystore.location":  "/r/tls/server.pem",
			},
			listenersContains: "SASL_SSL://127.0.0.1:9002",
		},
	}
	for _, tt := range tests {
		c := testCluster(tt.nodes, tt.secure)
		p := parseProps(serverProperties(c, c.Nodes[0], tt.extra, "/r/tls/server.pem"))
		for k, v := range tt.want {
			if p[k] != v {
				t.Errorf("nodes=%d secure=%t: %s = %q, want %q", tt.nodes, tt.secure, k, p[k], v)
			}
		}
		for _, k := range tt.absent {
			if _, ok := p[k]; ok {
				t.Errorf("nodes=%d secure=%t: unexpected %s", tt.nodes, tt.secure, k)
			}
		}
		if !strings.Contains(p["listeners"], tt.listenersContains) || !strings.Contains(p["advertised.listeners"], tt.listenersContains) {
			t.Errorf("nodes=%d secure=%t: listeners %q / advertised %q lack %q", tt.nodes, tt.secure, p["listeners"], p["advertised.listeners"], tt.listenersContains)
		}
	}
}

func TestNewClusterID(t *testing.T) {
	for range 200 {
		id := newClusterID()
		b, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(b) != 16 || strings.HasPrefix(id, "-") {
			t.Fatalf("bad cluster id %q: %v", id, err)
		}
	}
}

func TestWriteTLS(t *testing.T) {
	dir := t.TempDir()
	ca, ks := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tls", "server.pem")
	if err := writeTLS(ca, ks); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(ca)
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	rest, _ := os.ReadFile(ks)
	var types []string
	var leaf *x509.Certificate
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		types = append(types, b.Type)
		if b.Type == "CERTIFICATE" && leaf == nil {
			leaf, _ = x509.ParseCertificate(b.Bytes)
		}
	}
	if strings.Join(types, ",") != "PRIVATE KEY,CERTIFICATE,CERTIFICATE" {
		t.Fatalf("key store blocks %v", types)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
}

func TestRunSaveLoad(t *testing.T) {
	dir := t.TempDir()
	r := &Run{KafkaVersion: KafkaVersion, Libs: "/libs", Dir: dir, Clusters: []*Cluster{testCluster(1, true)}}
	r.Clusters[0].Bootstrap = []string{"127.0.0.1:9000"}
	r.Clusters[0].SecureBootstrap = []string{"127.0.0.1:9002"}
	r.Clusters[0].Users[1].Password = "it's"
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster("a") == nil || got.Cluster("A").Password("alice") != "it's" || got.Cluster("A").Node(1) == nil {
		t.Fatalf("loaded %+v", got)
	}
	env, _ := os.ReadFile(filepath.Join(dir, EnvFile))
	for _, want := range []string{
		"export KAFKA_A_BOOTSTRAP='127.0.0.1:9000'\n",
		"export KAFKA_A_SECURE_BOOTSTRAP='127.0.0.1:9002'\n",
		`export KAFKA_A_ALICE_PASSWORD='it'\''s'` + "\n",
		"export KMIRROR_TEST_CLUSTERS='" + filepath.Join(dir, StateFile) + "'\n",
	} {
		if !strings.Contains(string(env), want) {
			t.Errorf("%s lacks %q:\n%s", EnvFile, want, env)
		}
	}
}

func TestDownWithNothingRunning(t *testing.T) {
	dir := t.TempDir()
	nodeDir := filepath.Join(dir, "A", "node-1")
	os.MkdirAll(nodeDir, 0o755)
	os.WriteFile(propsPath(nodeDir), nil, 0o644)
	// Our own pid: alive, but its command line does not name the config,
	// so Down must leave it alone.
	os.WriteFile(filepath.Join(nodeDir, "pid"), []byte("1\n"), 0o644)
	for range 2 {
		n, err := Down(dir, time.Second)
		if err != nil || n != 0 {
			t.Fatalf("Down = %d, %v", n, err)
		}
	}
	if n, err := Down(filepath.Join(dir, "missing"), time.Second); err != nil || n != 0 {
		t.Fatalf("Down(missing) = %d, %v", n, err)
	}
}

func TestPrepareDirRefusesForeignFolders(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o644)
	if _, err := prepareDir(dir); err == nil {
		t.Fatal("prepareDir wiped a folder that is not a run folder")
	}
	run := filepath.Join(t.TempDir(), "run")
	if _, err := prepareDir(run); err != nil { // a fresh folder
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(run, "old.log"), nil, 0o644)
	if _, err := prepareDir(run); err != nil { // a previous run folder
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, "old.log")); !os.IsNotExist(err) {
		t.Fatalf("previous run folder not wiped: %v", err)
	}
}

// TestServerPropertiesProxied: a node of a proxied cluster binds its
// PROXIED listener on ProxiedPort and advertises the proxy's port.
func TestServerPropertiesProxied(t *testing.T) {
	c := testCluster(3, false)
	n := c.Nodes[1]
	n.ProxiedPort, n.ProxyPort = 9105, 9106
	p := parseProps(serverProperties(c, n, nil, ""))
	want := map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:9010,CONTROLLER://127.0.0.1:9011,PROXIED://127.0.0.1:9105",
		"advertised.listeners":           "PLAINTEXT://127.0.0.1:9010,PROXIED://127.0.0.1:9106",
		"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT",
		"inter.broker.listener.name":     "PLAINTEXT",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	if p := parseProps(serverProperties(c, c.Nodes[0], nil, "")); strings.Contains(p["listeners"], "PROXIED") {
		t.Errorf("a node without ProxiedPort got a PROXIED listener: %q", p["listeners"])
	}
}

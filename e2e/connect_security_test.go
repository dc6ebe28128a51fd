package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestConnectConfigProviders drives kmirror connect over HTTP (CVE-2024-31141):
// a connector config that declares config providers is refused with 400
// naming the key (create, update; validate reports it) and reads nothing;
// ${...} references resolve only through the providers of the worker file,
// within their allowed.paths: outside them a 400, inside them the value
// reaches the flow (here the replication policy's separator, seen in the
// remote topic's name).
func TestConnectConfigProviders(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	sh, sz := cs[0], cs[1]
	src, dst := alias(t, "sh"), alias(t, "sz")
	topic := testkafka.Topic(t, "prov")
	sh.CreateTopic(t, topic, 1, nil)
	produceN(t, sh, topic, 1, 5, "p")

	dir := t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	if err := os.Mkdir(allowed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(allowed, "policy.properties"), []byte("sep = _x_\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("TOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	group := testkafka.Topic(t, "connect")
	port := freePort(t)
	worker := connectWorker(t, sz, group, port)
	f, err := os.OpenFile(worker, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "config.providers = file, dir\nconfig.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"+
		"config.providers.file.param.allowed.paths = %s\nconfig.providers.dir.class = DirectoryConfigProvider\nconfig.providers.dir.param.allowed.paths = %s\n", allowed, allowed)
	f.Close()
	w := startConnect(t, worker, port)

	conn := func(extra string) string {
		return fmt.Sprintf(`{"connector.class":"MirrorSourceConnector","source.cluster.alias":%q,"target.cluster.alias":%q,`+
			`"source.cluster.bootstrap.servers":%q,"topics":%q,"replication.factor":"1","offset-syncs.topic.replication.factor":"1"%s}`,
			src, dst, strings.Join(sh.Bootstrap, ","), topic, extra)
	}
	own := `,"config.providers":"mine","config.providers.mine.class":"DirectoryConfigProvider","replication.policy.separator":"${mine:` + dir + `:secret.txt}"`
	steps := []struct {
		what, method, path, body string
		code                     int
		want                     string
	}{
		{"create declaring its own provider", "POST", "/connectors", `{"name":"own","config":` + conn(own) + `}`, 400,
			"config.providers: config providers are declared by the operator only"},
		{"update declaring its own provider", "PUT", "/connectors/own/config", conn(`,"config.providers.file.class":"FileConfigProvider"`), 400,
			"config.providers.file.class: config providers are declared by the operator only"},
		{"validate declaring its own provider", "PUT", "/connector-plugins/MirrorSourceConnector/config/validate", conn(own), 200,
			"declared by the operator only"},
		{"nothing was created", "GET", "/connectors/own", "", 404, "Connector own not found"},
		{"worker's provider outside allowed.paths", "PUT", "/connectors/out/config", conn(`,"replication.policy.separator":"${dir:` + dir + `:secret.txt}"`), 400,
			"path " + dir + "/secret.txt is not within allowed.paths"},
		{"validate a device through the worker's provider", "PUT", "/connector-plugins/MirrorSourceConnector/config/validate", conn(`,"replication.policy.separator":"${dir:/dev:zero}"`), 200,
			"/dev/zero is not within allowed.paths"},
		{"worker's provider within allowed.paths", "PUT", "/connectors/in/config", conn(`,"replication.policy.separator":"${file:` + allowed + `/policy.properties:sep}"`), 201,
			`"replication.policy.separator":"${file:` + allowed + `/policy.properties:sep}"`},
	}
	for _, s := range steps {
		code, body := rest(t, s.method, port, s.path, s.body)
		if code != s.code || !strings.Contains(body, s.want) {
			t.Fatalf("%s: %d %s; want %d with %q", s.what, code, body, s.code, s.want)
		}
		if strings.Contains(body, "TOPSECRET") {
			t.Fatalf("%s: the answer shows the file: %s", s.what, body)
		}
	}
	remote := src + "_x_" + topic
	waitFor(t, 60*time.Second, "records in "+remote, func() bool { return hasTopic(t, sz, remote) && countAll(t, sz, remote) == 5 })
	if strings.Contains(w.log.String(), "TOPSECRET") {
		t.Error("the log shows the file's content")
	}
}

// TestRESTDNSRebinding: with kmirror.rest.auth = none, kmirror run's and
// kmirror connect's APIs refuse a request whose Host and Origin are an
// outside name, though the browser calls it same-origin (DNS rebinding),
// and serve localhost, IP addresses and kmirror.rest.allowed.hosts; a
// Connect worker without a token and without listeners binds 127.0.0.1.
func TestRESTDNSRebinding(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	call := func(method, url, host, origin string) (int, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(`{"name":"rebound","config":{"connector.class":"MirrorHeartbeatConnector","source.cluster.alias":"x","target.cluster.alias":"y","source.cluster.bootstrap.servers":"x:9092"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	type step struct {
		method, path, host, origin string
		code                       int
	}
	check := func(base string, steps []step) {
		t.Helper()
		for _, s := range steps {
			if code, body := call(s.method, base+s.path, s.host, s.origin); code != s.code {
				t.Errorf("%s %s Host %s Origin %q: %d %s, want %d", s.method, s.path, s.host, s.origin, code, body, s.code)
			}
		}
	}

	t.Run("run", func(t *testing.T) {
		port := freePort(t)
		src, dst := alias(t, "src"), alias(t, "dst")
		cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+testkafka.Topic(t, "none"),
			"kmirror.rest.listener = 127.0.0.1:"+port, "kmirror.rest.auth = none", "kmirror.rest.allowed.hosts = kmirror.test"))
		startKmirror(t, cfg)
		base := "http://127.0.0.1:" + port
		waitFor(t, 30*time.Second, "the REST API", func() bool { code, _ := call("GET", base+"/health", "127.0.0.1", ""); return code == 200 })
		flow := "/flows/" + src + "->" + dst + "/pause"
		check(base, []step{
			{"POST", flow, "evil.example:" + port, "http://evil.example:" + port, 421},
			{"GET", "/status", "evil.example:" + port, "", 421},
			{"POST", flow, "localhost:" + port, "http://evil.example:" + port, 403},
			{"GET", "/health", "evil.example:" + port, "", 200},
			{"GET", "/status", "kmirror.test:" + port, "", 200},
			{"GET", "/status", "localhost:" + port, "", 200},
		})
	})

	t.Run("connect", func(t *testing.T) {
		port := freePort(t)
		group := testkafka.Topic(t, "connect")
		worker := connectWorker(t, b, group, port)
		data, err := os.ReadFile(worker)
		if err != nil {
			t.Fatal(err)
		}
		// No listeners line: Connect's default interface, which without a
		// token becomes loopback.
		text := strings.Replace(string(data), "listeners=http://127.0.0.1:"+port+"\n", "rest.port="+port+"\nkmirror.rest.allowed.hosts=mm2.test\n", 1)
		if err := os.WriteFile(worker, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, "kmirror connect", exec.Command(kmirrorBin(t), "connect", worker))
		base := "http://127.0.0.1:" + port
		waitFor(t, 30*time.Second, "the Connect REST API", func() bool { code, _ := call("GET", base+"/", "127.0.0.1", ""); return code == 200 })
		if !strings.Contains(p.log.String(), "addr=127.0.0.1:"+port) {
			t.Errorf("the API without a token did not bind loopback:\n%s", p.log.String())
		}
		check(base, []step{
			{"POST", "/connectors", "evil.example:" + port, "http://evil.example:" + port, 421},
			{"GET", "/connectors/rebound", "127.0.0.1:" + port, "", 404},
			{"GET", "/connectors", "evil.example:" + port, "", 421},
			{"GET", "/connectors", "mm2.test:" + port, "", 200},
			{"POST", "/connectors", "localhost:" + port, "http://localhost:" + port, 201},
		})
	})
}

package connect

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectorProvidersRefused: a connector config may not declare config
// providers (CVE-2024-31141): create, update and validate answer 400 (or a
// validate error) naming the key, and no file is read. ${...} references
// resolve only through the worker file's providers, within its
// allowed.paths.
func TestConnectorProvidersRefused(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	if err := os.Mkdir(allowed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(allowed, "sep"), []byte("_"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("TOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := ParseWorker("worker.properties", []byte("bootstrap.servers = sz:9092\ngroup.id = g\nconfig.storage.topic = c\n"+
		"config.providers = d\nconfig.providers.d.class = DirectoryConfigProvider\nconfig.providers.d.param.allowed.paths = "+allowed+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	w.WorkerID = "w1:8083"
	srv, _ := newTestAPIWorker(t, "", w)
	conn := func(extra string) string {
		return `{"connector.class":"MirrorSourceConnector","source.cluster.alias":"a","target.cluster.alias":"b",` +
			`"source.cluster.bootstrap.servers":"a:9092"` + extra + `}`
	}
	declare := `,"config.providers":"x","config.providers.x.class":"DirectoryConfigProvider","replication.policy.separator":"${x:` + dir + `:secret.txt}"`
	tests := []struct {
		name, method, path, body string
		code                     int
		want                     []string
	}{
		{"create declaring a provider", "POST", "/connectors", `{"name":"c1","config":` + conn(declare) + `}`, 400,
			[]string{"config.providers: config providers are declared by the operator only", "config.providers.x.class: config providers are declared"}},
		{"update declaring a provider", "PUT", "/connectors/c2/config", conn(`,"config.providers.file.class":"FileConfigProvider"`), 400,
			[]string{"config.providers.file.class: config providers are declared by the operator only"}},
		{"validate declaring a provider", "PUT", "/connector-plugins/MirrorSourceConnector/config/validate", conn(declare), 200,
			[]string{`"name":"config.providers"`, "declared by the operator only"}},
		{"worker's provider outside allowed.paths", "PUT", "/connectors/c3/config", conn(`,"replication.policy.separator":"${d:` + dir + `:secret.txt}"`), 400,
			[]string{"replication.policy.separator: cannot resolve ${d:" + dir + ":secret.txt}: path " + dir + "/secret.txt is not within allowed.paths"}},
		{"validate through the worker's provider outside allowed.paths", "PUT", "/connector-plugins/MirrorSourceConnector/config/validate",
			conn(`,"replication.policy.separator":"${d:/dev:zero}"`), 200, []string{"/dev/zero is not within allowed.paths"}},
		{"worker's provider within allowed.paths", "PUT", "/connectors/c4/config", conn(`,"replication.policy.separator":"${d:` + allowed + `:sep}"`), 201,
			[]string{`"replication.policy.separator":"${d:` + allowed + `:sep}"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tt.code)
			}
			for _, want := range tt.want {
				if !strings.Contains(string(body), want) {
					t.Errorf("body %s lacks %q", body, want)
				}
			}
			if strings.Contains(string(body), "TOPSECRET") {
				t.Errorf("body shows the file: %s", body)
			}
		})
	}
	// The connector that resolved through the worker's provider runs with
	// the file's value.
	spec, err := Translate("c4", map[string]string{"connector.class": SourceClass, "source.cluster.alias": "a", "target.cluster.alias": "b",
		"source.cluster.bootstrap.servers": "a:9092", "replication.policy.separator": "${d:" + allowed + ":sep}"}, w)
	if err != nil || spec.Flow.Separator != "_" {
		t.Errorf("resolved flow: %v", err)
	}
}

// TestConnectorNames: names Connect refuses (empty, ISO control
// characters) and names that would break a path ('/', '\', "..") get 400,
// through POST and PUT, without repeating the name.
func TestConnectorNames(t *testing.T) {
	srv, _ := newTestAPI(t, "")
	cfg := `{"connector.class":"MirrorSourceConnector","source.cluster.alias":"a","target.cluster.alias":"b","source.cluster.bootstrap.servers":"a:9092"}`
	tests := []struct {
		name string
		code int
	}{
		{"ok-name.1", 201},
		{"", 400},
		{"   ", 400},
		{"a\nb", 400},
		{"tab\there", 400},
		{"nul\x00x", 400},
		{"del\x7fx", 400},
		{"c1\u0085", 400},
		{"..", 400},
		{"a..b", 400},
		{"../etc", 400},
		{"a/b", 400},
		{`a\b`, 400},
		{strings.Repeat("n", 250), 400},
	}
	for _, tt := range tests {
		body, _ := json.Marshal(map[string]any{"name": tt.name, "config": json.RawMessage(cfg)})
		resp, err := http.Post(srv.URL+"/connectors", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("POST name %q: %d %s, want %d", tt.name, resp.StatusCode, b, tt.code)
		}
		if tt.code == 400 && !strings.Contains(string(b), "Connector name must be non-empty, at most 249 bytes, without ISO control characters") {
			t.Errorf("POST name %q: %s", tt.name, b)
		}
	}
	// PUT takes the name from the path (escaped as a client would).
	for _, name := range []string{"a\nb", "x..y", "c\x01"} {
		req, _ := http.NewRequest("PUT", srv.URL+"/connectors/"+url.PathEscape(name)+"/config", strings.NewReader(cfg))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("PUT name %q: %d, want 400", name, resp.StatusCode)
		}
	}
}

// TestWorkerREST: the worker file's kmirror.rest.allowed.hosts, whether it
// names the REST interface (else an API without a token binds loopback),
// and its config providers.
func TestWorkerREST(t *testing.T) {
	base := "bootstrap.servers = sz:9092\ngroup.id = g\nconfig.storage.topic = c\n"
	tests := []struct {
		name, text string
		set        bool
		listener   string
		hosts      []string
		err        string
	}{
		{"Connect's default", "", false, "127.0.0.1:8083", nil, ""},
		{"port only", "rest.port = 9000\n", false, "127.0.0.1:9000", nil, ""},
		{"listeners", "listeners = http://0.0.0.0:8083\n", true, "0.0.0.0:8083", nil, ""},
		{"rest.host.name", "rest.host.name = 10.0.0.1\n", true, "10.0.0.1:8083", nil, ""},
		{"allowed hosts", "kmirror.rest.allowed.hosts = mm2.internal, Worker1\n", false, "127.0.0.1:8083", []string{"mm2.internal", "worker1"}, ""},
		{"allowed host with scheme", "kmirror.rest.allowed.hosts = http://x\n", false, "", nil, "worker.properties:4: kmirror.rest.allowed.hosts: want host names"},
		{"provider outside allowed paths in the file itself", "config.providers = d\nconfig.providers.d.class = DirectoryConfigProvider\nconfig.providers.d.param.allowed.paths = /proc/self\nkmirror.rest.token = ${d:/etc:hostname}\n",
			false, "", nil, "worker.properties:7: kmirror.rest.token: cannot resolve ${d:/etc:hostname}: path /etc/hostname is not within allowed.paths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ParseWorker("worker.properties", []byte(base+tt.text))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := w.Listener
			if !w.ListenerSet {
				l = LoopbackListener(l)
			}
			if w.ListenerSet != tt.set || l != tt.listener || strings.Join(w.REST.AllowedHosts, ",") != strings.Join(tt.hosts, ",") {
				t.Errorf("set %v listener %s hosts %q", w.ListenerSet, l, w.REST.AllowedHosts)
			}
		})
	}
}

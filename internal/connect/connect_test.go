package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/runner"
)

// The seeds' connector configs, as printed (bootstrap servers added where
// the seed has none).
const (
	seedUSWest = `{"name": "us-west-source", "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
  "source.cluster.alias": "us-west", "target.cluster.alias": "us-east",
  "source.cluster.bootstrap.servers": "us-west-host1:9091", "topics": ".*"}`
	seedSHSZ = `{"name": "mm2-sh-to-sz", "config": {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
  "source.cluster.alias": "sh", "target.cluster.alias": "sz", "topics": "orders.*", "tasks.max": 4,
  "source.cluster.bootstrap.servers": "sh-kafka1:9092"}}`
)

func testWorker() *Worker {
	return &Worker{Path: "worker.properties", Bootstrap: "sz-kafka1:9092", Client: map[string]string{"bootstrap.servers": "sz-kafka1:9092"},
		GroupID: "mm2-cluster", ConfigTopic: "mm2-configs", WorkerID: "w1:8083", Offsets: map[string]string{}}
}

func TestTranslate(t *testing.T) {
	var seed struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(seedSHSZ), &seed); err != nil {
		t.Fatal(err)
	}
	// json.Unmarshal reads 4 as float64; the API reads numbers as json.Number.
	seed.Config["tasks.max"] = json.Number("4")
	shsz, err := props(seed.Config)
	if err != nil {
		t.Fatal(err)
	}
	var uswest map[string]string
	if err := json.Unmarshal([]byte(seedUSWest), &uswest); err != nil {
		t.Fatal(err)
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	tests := []struct {
		name, conn string
		props      map[string]string
		pair       string
		source     string      // source bootstrap
		target     string      // target bootstrap
		kind       runner.Kind // "": replication
		check      func(t *testing.T, f *config.Flow)
		warn       string // a warning names this
		errKeys    []string
	}{
		{name: "seed us-west", conn: "us-west-source", props: uswest, pair: "us-west->us-east", source: "us-west-host1:9091", target: "sz-kafka1:9092"},
		{name: "seed sh-sz", conn: "mm2-sh-to-sz", props: shsz, pair: "sh->sz", source: "sh-kafka1:9092", target: "sz-kafka1:9092"},
		{name: "target bootstrap given", conn: "mm2-sh-to-sz", props: with(shsz, "target.cluster.bootstrap.servers", "sz2:9092"), pair: "sh->sz", source: "sh-kafka1:9092", target: "sz2:9092"},
		{name: "simple class name", conn: "mm2-sh-to-sz", props: with(shsz, "connector.class", "MirrorSource"), pair: "sh->sz", source: "sh-kafka1:9092", target: "sz-kafka1:9092"},
		{name: "heartbeat connector", conn: "hb", props: map[string]string{"connector.class": HeartbeatClass, "source.cluster.alias": "sh", "target.cluster.alias": "sz", "source.cluster.bootstrap.servers": "sh:9092"}, pair: "sh->sz", source: "sh:9092", target: "sz-kafka1:9092", kind: runner.Heartbeats},
		{name: "no aliases", conn: "x", props: with(shsz, "source.cluster.alias", "", "target.cluster.alias", ""), errKeys: []string{"source.cluster.alias", "target.cluster.alias"}},
		{name: "same aliases", conn: "x", props: with(shsz, "target.cluster.alias", "sh"), errKeys: []string{"target.cluster.alias"}},
		{name: "no source bootstrap", conn: "x", props: with(shsz, "source.cluster.bootstrap.servers", ""), errKeys: []string{"source.cluster.bootstrap.servers"}},
		{name: "unknown class", conn: "x", props: with(shsz, "connector.class", "FileStreamSource"), errKeys: []string{"connector.class"}},
		{name: "checkpoint connector", conn: "cp", props: map[string]string{"connector.class": CheckpointClass, "source.cluster.alias": "sh", "target.cluster.alias": "sz",
			"source.cluster.bootstrap.servers": "sh:9092", "target.cluster.bootstrap.servers": "sz:9092", "groups": "orders-.*", "groups.exclude": "orders-test",
			"emit.checkpoints.interval.seconds": "5", "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "7",
			"refresh.groups.interval.seconds": "9", "checkpoints.topic.replication.factor": "1"},
			pair: "sh->sz", source: "sh:9092", target: "sz:9092", kind: runner.Checkpoints, check: func(t *testing.T, f *config.Flow) {
				if !f.EmitCheckpointsEnabled || f.EmitHeartbeatsEnabled || !f.SyncGroupOffsetsEnabled {
					t.Errorf("checkpoints %v heartbeats %v group sync %v, want true false true", f.EmitCheckpointsEnabled, f.EmitHeartbeatsEnabled, f.SyncGroupOffsetsEnabled)
				}
				if f.EmitCheckpointsInterval != 5*time.Second || f.SyncGroupOffsetsInterval != 7*time.Second || f.RefreshGroupsInterval != 9*time.Second || f.CheckpointsTopicReplicationFactor != 1 {
					t.Errorf("intervals %v %v %v, replication factor %d", f.EmitCheckpointsInterval, f.SyncGroupOffsetsInterval, f.RefreshGroupsInterval, f.CheckpointsTopicReplicationFactor)
				}
				if !f.GroupFilter.Match("orders-eu") || f.GroupFilter.Match("orders-test") || f.GroupFilter.Match("billing") {
					t.Error("groups and groups.exclude not applied")
				}
			}},
		{name: "checkpoint simple name", conn: "cp", props: with(shsz, "connector.class", "MirrorCheckpoint"), pair: "sh->sz", source: "sh-kafka1:9092", target: "sz-kafka1:9092", kind: runner.Checkpoints,
			check: func(t *testing.T, f *config.Flow) {
				if !f.EmitCheckpointsEnabled || f.EmitHeartbeatsEnabled || f.SyncGroupOffsetsEnabled {
					t.Errorf("checkpoints %v heartbeats %v group sync %v, want MM2's defaults true false false", f.EmitCheckpointsEnabled, f.EmitHeartbeatsEnabled, f.SyncGroupOffsetsEnabled)
				}
			}},
		{name: "checkpoint bad interval", conn: "x", props: with(shsz, "connector.class", CheckpointClass, "emit.checkpoints.interval.seconds", "soon"), errKeys: []string{"emit.checkpoints.interval.seconds"}},
		{name: "name differs", conn: "other", props: with(shsz, "name", "mm2-sh-to-sz"), errKeys: []string{"name"}},
		{name: "unknown key warns", conn: "mm2-sh-to-sz", props: with(shsz, "topicz", "a"), pair: "sh->sz", source: "sh-kafka1:9092", target: "sz-kafka1:9092", warn: "topicz"},
		{name: "bad number", conn: "x", props: with(shsz, "replication.factor", "three"), errKeys: []string{"replication.factor"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Translate(tc.conn, tc.props, testWorker())
			if len(tc.errKeys) > 0 {
				es, ok := err.(Errors)
				if !ok {
					t.Fatalf("want Errors for %v, got %v", tc.errKeys, err)
				}
				got := map[string]bool{}
				for _, e := range es {
					got[e.Key] = true
				}
				for _, k := range tc.errKeys {
					if !got[k] {
						t.Errorf("no error for %s in %v", k, es)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := spec.Flow
			if tc.warn != "" && !strings.Contains(strings.Join(spec.Warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q lack %s", spec.Warnings, tc.warn)
			}
			want := tc.kind
			if want == "" {
				want = runner.Replication
			}
			if f.Name() != tc.pair || spec.Kind() != want {
				t.Fatalf("flow %s kind %v, want %s %v", f.Name(), spec.Kind(), tc.pair, want)
			}
			if got := f.SourceConsumer["bootstrap.servers"]; got != tc.source {
				t.Errorf("source bootstrap %q, want %q", got, tc.source)
			}
			if got := f.TargetProducer["bootstrap.servers"]; got != tc.target {
				t.Errorf("target bootstrap %q, want %q", got, tc.target)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
			if want != runner.Heartbeats {
				if f.Workers != config.Group || f.WorkersGroupID != "kmirror-connect-mm2-cluster-"+tc.conn {
					t.Errorf("workers %v group %q", f.Workers, f.WorkersGroupID)
				}
				if want == runner.Replication && (f.EmitCheckpointsEnabled || f.EmitHeartbeatsEnabled) {
					t.Errorf("a source connector's flow emits checkpoints %v heartbeats %v", f.EmitCheckpointsEnabled, f.EmitHeartbeatsEnabled)
				}
			}
		})
	}
}

func TestErrorsHideSecrets(t *testing.T) {
	p := map[string]string{"connector.class": SourceClass, "source.cluster.alias": "a", "target.cluster.alias": "b",
		"source.cluster.bootstrap.servers": "a:9092", "source.cluster.sasl.jaas.config": "s3cr3t-jaas", "source.cluster.ssl.key.password": "s3cr3t-pw",
		"replication.factor": "x"}
	_, err := Translate("c", p, testWorker())
	if err == nil {
		t.Fatal("want an error for replication.factor x")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error shows a secret: %v", err)
	}
}

// TestConfigProvider: a secret kept in a file through a provider the
// worker file declares reaches the flow, while the connector config holds
// only the reference.
func TestConfigProvider(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/secrets.properties"
	if err := os.WriteFile(path, []byte("jaas=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"s3cr3t\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := ParseWorker("worker.properties", []byte("bootstrap.servers = sz:9092\ngroup.id = g\nconfig.storage.topic = c\n"+
		"config.providers = file\nconfig.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"+
		"config.providers.file.param.allowed.paths = "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]string{"connector.class": SourceClass, "source.cluster.alias": "a", "target.cluster.alias": "b",
		"source.cluster.bootstrap.servers": "a:9092", "source.cluster.security.protocol": "SASL_PLAINTEXT",
		"source.cluster.sasl.mechanism": "PLAIN", "source.cluster.sasl.jaas.config": "${file:" + path + ":jaas}"}
	spec, err := Translate("c", p, w)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Flow.SourceConsumer["sasl.jaas.config"]; !strings.Contains(got, `password="s3cr3t"`) {
		t.Errorf("source consumer sasl.jaas.config = %q, want the file's value", got)
	}
}

func TestEscape(t *testing.T) {
	for _, v := range []string{"a b", " lead", "x=y:z", `back\slash`, "line\nbreak", "#hash", "!bang", "tab\there"} {
		var b propsText
		b.put("k", v)
		b.put("key with=odd:chars", v)
		p, err := config.ParseProperties("t", b.bytes())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k", "key with=odd:chars"} {
			if got, _ := p.Get(k); got != v {
				t.Errorf("%q: read back %q", v, got)
			}
		}
	}
}

// fakeFlows records what the herder asks of the runner.
type fakeFlows struct {
	mu       sync.Mutex
	flows    map[string]string // name -> runner state
	kinds    map[string]runner.Kind
	fail     map[string]string
	restarts map[string]int
}

func (f *fakeFlows) Add(name string, _ *config.Flow, kind runner.Kind) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flows[name] = "running"
	if f.kinds == nil {
		f.kinds = map[string]runner.Kind{}
	}
	f.kinds[name] = kind
	return nil
}
func (f *fakeFlows) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.flows, name)
	return nil
}
func (f *fakeFlows) set(name, st string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flows[name] = st
	return nil
}
func (f *fakeFlows) Pause(name string) error  { return f.set(name, "paused") }
func (f *fakeFlows) Resume(name string) error { return f.set(name, "running") }
func (f *fakeFlows) Restart(name string) error {
	f.mu.Lock()
	if f.restarts == nil {
		f.restarts = map[string]int{}
	}
	f.restarts[name]++
	f.mu.Unlock()
	return f.set(name, "running")
}

func (f *fakeFlows) restarted(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restarts[name]
}
func (f *fakeFlows) Status() []runner.FlowStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runner.FlowStatus
	for n, s := range f.flows {
		out = append(out, runner.FlowStatus{Name: n, State: s, Error: f.fail[n]})
	}
	return out
}

func newTestAPI(t *testing.T, token string) (*httptest.Server, *fakeFlows) {
	t.Helper()
	return newTestAPIWorker(t, token, testWorker())
}

func newTestAPIWorker(t *testing.T, token string, w *Worker) (*httptest.Server, *fakeFlows) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w.Client["bootstrap.servers"] = c.ListenAddrs()[0]
	w.ConfigRF = 1
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := OpenStore(context.Background(), w, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	ff := &fakeFlows{flows: map[string]string{}, fail: map[string]string{}}
	h := NewHerder(w, store, ff, log)
	mux := http.NewServeMux()
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
				rw.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(rw, r)
		})
	}
	api := NewAPI(h, "cid").Handler(guard)
	for _, p := range Patterns {
		mux.Handle(p, api)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, ff
}

func TestAPI(t *testing.T) {
	srv, ff := newTestAPI(t, "")
	steps := []struct {
		method, path, body string
		code               int
		want               []string // substrings of the response body
	}{
		{"GET", "/", "", 200, []string{`"kafka_cluster_id":"cid"`, `"version"`}},
		{"GET", "/connectors", "", 200, []string{`[]`}},
		{"POST", "/connectors", seedSHSZ, 201, []string{`"name":"mm2-sh-to-sz"`, `"type":"source"`, `"tasks":[{"connector":"mm2-sh-to-sz","task":0}]`, `"tasks.max":"4"`}},
		{"POST", "/connectors", seedSHSZ, 409, []string{`{"error_code":409,"message":"Connector mm2-sh-to-sz already exists"}`}},
		{"POST", "/connectors", `{"name":"bad","config":{"connector.class":"MirrorSourceConnector"}}`, 400, []string{`"error_code":400`, "source.cluster.alias: missing"}},
		{"POST", "/connectors", `{"name":`, 400, []string{`"error_code":400`}},
		{"GET", "/connectors/mm2-sh-to-sz/status", "", 200, []string{`{"name":"mm2-sh-to-sz","connector":{"state":"RUNNING","worker_id":"w1:8083"},"tasks":[{"id":0,"state":"RUNNING","worker_id":"w1:8083"}],"type":"source"}`}},
		{"GET", "/connectors/nope/status", "", 404, []string{`{"error_code":404,"message":"Connector nope not found"}`}},
		{"PUT", "/connectors/us-west-source/config", seedUSWest, 201, []string{`"name":"us-west-source"`}},
		{"PUT", "/connectors/us-west-source/config", seedUSWest, 200, []string{`"name":"us-west-source"`}},
		{"PUT", "/connectors/other/config", seedUSWest, 400, []string{"doesn't match"}},
		{"GET", "/connectors", "", 200, []string{`["mm2-sh-to-sz","us-west-source"]`}},
		{"GET", "/connectors?expand=status&expand=info", "", 200, []string{`"us-west-source":{"info":{`, `"status":{"name":"us-west-source"`}},
		{"GET", "/connectors/us-west-source/config", "", 200, []string{`"topics":".*"`, `"source.cluster.alias":"us-west"`}},
		{"GET", "/connectors/us-west-source/tasks", "", 200, []string{`[{"id":{"connector":"us-west-source","task":0},"config":{`}},
		{"GET", "/connectors/us-west-source/tasks/0/status", "", 200, []string{`{"id":0,"state":"RUNNING"`}},
		{"GET", "/connectors/us-west-source/tasks/3/status", "", 404, []string{`"error_code":404`}},
		{"PUT", "/connectors/us-west-source/pause", "", 202, nil},
		{"GET", "/connectors/us-west-source/status", "", 200, []string{`"connector":{"state":"PAUSED"`}},
		{"PUT", "/connectors/us-west-source/resume", "", 202, nil},
		{"GET", "/connectors/us-west-source/status", "", 200, []string{`"connector":{"state":"RUNNING"`}},
		{"POST", "/connectors/us-west-source/restart", "", 204, nil},
		{"POST", "/connectors/us-west-source/restart?includeTasks=true", "", 202, []string{`"state":"RUNNING"`}},
		{"PATCH", "/connectors/us-west-source/offsets", `{"offsets":[]}`, 400, []string{"STOPPED"}},
		{"PUT", "/connectors/us-west-source/stop", "", 204, nil},
		{"GET", "/connectors/us-west-source/status", "", 200, []string{`"connector":{"state":"STOPPED"`, `"tasks":[]`}},
		{"PATCH", "/connectors/us-west-source/offsets", `{"offsets":[{"partition":{"cluster":"elsewhere","topic":"t","partition":0},"offset":{"offset":5}}]}`, 400, []string{"source alias"}},
		{"DELETE", "/connectors/us-west-source", "", 204, nil},
		{"GET", "/connectors/us-west-source", "", 404, []string{"not found"}},
		{"GET", "/connectors", "", 200, []string{`["mm2-sh-to-sz"]`}},
		{"PUT", "/connectors/cp/config", `{"connector.class":"MirrorCheckpointConnector","source.cluster.alias":"sh","target.cluster.alias":"sz","source.cluster.bootstrap.servers":"sh-kafka1:9092","groups":".*","sync.group.offsets.enabled":"true"}`, 201, []string{`"name":"cp"`, `"type":"source"`}},
		{"GET", "/connectors/cp/status", "", 200, []string{`"connector":{"state":"RUNNING"`}},
		{"GET", "/connectors/cp/offsets", "", 200, []string{`{"offsets":[]}`}},
		{"PUT", "/connectors/cp/stop", "", 204, nil},
		{"PATCH", "/connectors/cp/offsets", `{"offsets":[{"partition":{"cluster":"sh","topic":"t","partition":0},"offset":{"offset":5}}]}`, 400, []string{"MirrorCheckpointConnector keeps no offsets"}},
		{"PUT", "/connectors/cp/resume", "", 202, nil},
		{"GET", "/connector-plugins", "", 200, []string{`{"class":"org.apache.kafka.connect.mirror.MirrorSourceConnector","type":"source"`, `{"class":"org.apache.kafka.connect.mirror.MirrorCheckpointConnector","type":"source"`}},
		{"PUT", "/connector-plugins/MirrorCheckpointConnector/config/validate", `{"connector.class":"MirrorCheckpointConnector","source.cluster.alias":"a","target.cluster.alias":"b","source.cluster.bootstrap.servers":"a:9092"}`, 200,
			[]string{`"name":"org.apache.kafka.connect.mirror.MirrorCheckpointConnector"`, `"error_count":0`}},
		{"PUT", "/connector-plugins/MirrorSourceConnector/config/validate", `{"connector.class":"MirrorSourceConnector","source.cluster.alias":"a","source.cluster.sasl.jaas.config":"s3cr3t"}`, 200,
			[]string{`"name":"org.apache.kafka.connect.mirror.MirrorSourceConnector"`, `"error_count":2`, `"value":"[hidden]"`, `"errors":["missing"]`}},
		{"PUT", "/connector-plugins/FileStreamSource/config/validate", `{}`, 404, []string{`"error_code":404`}},
		{"GET", "/connectors/x/nothing", "", 404, []string{`{"error_code":404,"message":"HTTP 404 Not Found"}`}},
	}
	for _, s := range steps {
		req, _ := http.NewRequest(s.method, srv.URL+s.path, strings.NewReader(s.body))
		if s.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.code {
			t.Errorf("%s %s: %d, want %d: %s", s.method, s.path, resp.StatusCode, s.code, b)
			continue
		}
		for _, w := range s.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s %s: %s lacks %s", s.method, s.path, b, w)
			}
		}
		if strings.Contains(string(b), "s3cr3t") {
			t.Errorf("%s %s: shows a secret: %s", s.method, s.path, b)
		}
	}
	ff.mu.Lock()
	_, running := ff.flows["mm2-sh-to-sz"]
	_, deleted := ff.flows["us-west-source"]
	kinds := map[string]runner.Kind{"mm2-sh-to-sz": ff.kinds["mm2-sh-to-sz"], "cp": ff.kinds["cp"]}
	ff.mu.Unlock()
	if !running || deleted {
		t.Errorf("flows %v: want mm2-sh-to-sz running and us-west-source removed", ff.flows)
	}
	if kinds["mm2-sh-to-sz"] != runner.Replication || kinds["cp"] != runner.Checkpoints {
		t.Errorf("kinds %v: want mm2-sh-to-sz replication and cp checkpoints", kinds)
	}
}

func TestFailedTrace(t *testing.T) {
	srv, ff := newTestAPI(t, "tok")
	req, _ := http.NewRequest("POST", srv.URL+"/connectors", strings.NewReader(seedSHSZ))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}
	req, _ = http.NewRequest("POST", srv.URL+"/connectors", strings.NewReader(seedSHSZ))
	req.Header.Set("Authorization", "Bearer tok")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	ff.mu.Lock()
	ff.flows["mm2-sh-to-sz"], ff.fail["mm2-sh-to-sz"] = "failed", "sh: cannot reach the cluster"
	ff.mu.Unlock()
	req, _ = http.NewRequest("GET", srv.URL+"/connectors/mm2-sh-to-sz/status", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st status
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Connector.State != "FAILED" || st.Tasks[0].State.State != "FAILED" || st.Tasks[0].Trace != "sh: cannot reach the cluster" {
		t.Errorf("status %+v", st)
	}
}

func TestParseWorker(t *testing.T) {
	tests := []struct {
		name, file string
		listener   string
		errs       []string
	}{
		{"seed", "bootstrap.servers=sz1:9092\ngroup.id=mm2-cluster\nconfig.storage.topic=mm2-configs\noffset.storage.topic=mm2-offsets\nstatus.storage.topic=mm2-status\nkey.converter=org.apache.kafka.connect.converters.ByteArrayConverter\n", ":8083", nil},
		{"listeners", "bootstrap.servers=b:1\ngroup.id=g\nconfig.storage.topic=c\nlisteners=http://127.0.0.1:9000\n", "127.0.0.1:9000", nil},
		{"missing", "bootstrap.servers=b:1\n", "", []string{"w.properties: group.id: missing", "config.storage.topic: missing"}},
		{"unknown key", "bootstrap.servers=b:1\ngroup.id=g\nconfig.storage.topic=c\ngroupid=x\n", "", []string{"w.properties:4: groupid: unknown key"}},
		{"https without cert", "bootstrap.servers=b:1\ngroup.id=g\nconfig.storage.topic=c\nlisteners=https://:8443\n", "", []string{"https needs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWorker("w.properties", []byte(tc.file))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatal("want an error")
				}
				for _, e := range tc.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error %q lacks %q", err, e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Listener != tc.listener {
				t.Errorf("listener %q, want %q", w.Listener, tc.listener)
			}
		})
	}
}

// TestTranslateErrors pins Translate's error text: which keys are checked,
// the messages, and their order.
func TestTranslateErrors(t *testing.T) {
	const alias = "an alias may not hold spaces, commas, '=', ':', '\\' or '>'"
	const provider = "config providers are declared by the operator only (config.providers* in the worker file), not in a connector config: a REST client could read the worker's files and environment with them (CVE-2024-31141)"
	base := func(kv ...string) map[string]string {
		m := map[string]string{"connector.class": SourceClass, "source.cluster.alias": "a", "target.cluster.alias": "b", "source.cluster.bootstrap.servers": "a:9092"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	tests := []struct {
		name, conn string
		props      map[string]string
		offsets    map[string]string // the worker's offset.storage.* keys
		want       string
	}{
		{"empty config", "c", map[string]string{}, nil,
			"connector.class: missing\nsource.cluster.alias: missing\nsource.cluster.bootstrap.servers: missing\ntarget.cluster.alias: missing"},
		{"bad aliases", "c", base("source.cluster.alias", "a b", "target.cluster.alias", "x->y"), nil,
			"source.cluster.alias: " + alias + "\ntarget.cluster.alias: " + alias},
		{"alias with colon", "c", base("target.cluster.alias", "a:b"), nil, "target.cluster.alias: " + alias},
		{"providers", "c", base("config.providers", "f", "config.providers.f.class", "FileConfigProvider"), nil,
			"config.providers: " + provider + "\nconfig.providers.f.class: " + provider},
		{"bad name and name differs", "a/b", base("name", "other"), nil,
			"name: Connector name must be non-empty, at most 249 bytes, without ISO control characters, '/', '\\' or '..'\nname: \"other\" differs from the connector's name \"a/b\""},
		{"unknown class, same trimmed aliases", "c", base("connector.class", "Nope", "target.cluster.alias", " a "), nil,
			"connector.class: \"Nope\" is not a connector kmirror runs (MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector)\ntarget.cluster.alias: equals source.cluster.alias"},
		{"flow key", "c", base("replication.factor", "x", "tasks.max", "z"), nil, "replication.factor: invalid number \"x\""},
		{"target cluster key", "c", base("target.cluster.offset.storage.partitions", "0"), nil,
			"target.cluster.offset.storage.partitions: 0 is out of range: must be -1 (broker default) or positive"},
		{"worker offsets key", "c", base(), map[string]string{"offset.storage.partitions": "0"},
			"b.offset.storage.partitions: 0 is out of range: must be -1 (broker default) or positive"},
		{"connector overrides worker offsets", "c", base("target.cluster.offset.storage.partitions", "3"), map[string]string{"offset.storage.partitions": "0"}, ""},
		{"not a key error", "c", base("connector.class", HeartbeatClass, "heartbeats.topic.replication.factor", "q"), nil,
			"config: connector c:3: a->b.heartbeats.topic.replication.factor: invalid number \"q\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testWorker()
			if tt.offsets != nil {
				w.Offsets = tt.offsets
			}
			_, err := Translate(tt.conn, tt.props, w)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("error\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestTranslateDefaults: the worker's offsets settings and the defaults a
// connector class sets yield to the connector's own keys.
func TestTranslateDefaults(t *testing.T) {
	base := map[string]string{"connector.class": SourceClass, "source.cluster.alias": "a", "target.cluster.alias": "b", "source.cluster.bootstrap.servers": "a:9092"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name         string
		props        map[string]string
		rf           int16
		heartbeats   bool
		checkpoints  bool
		workers      config.Workers
		workersGroup string
	}{
		{"worker offsets", base, 2, false, false, config.Group, "kmirror-connect-mm2-cluster-c"},
		{"connector offsets", with("target.cluster.offset.storage.replication.factor", "1"), 1, false, false, config.Group, "kmirror-connect-mm2-cluster-c"},
		{"source keeps given keys", with("emit.heartbeats.enabled", "true", "emit.checkpoints.enabled", "true", config.WorkersGroupIDKey, "mine"),
			2, true, true, config.Group, "mine"},
		{"checkpoint keeps given keys", with("connector.class", CheckpointClass, "emit.heartbeats.enabled", "true", config.WorkersKey, "single"),
			2, true, true, config.Single, "kmirror-connect-mm2-cluster-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testWorker()
			w.Offsets = map[string]string{"offset.storage.replication.factor": "2"}
			spec, err := Translate("c", tt.props, w)
			if err != nil {
				t.Fatal(err)
			}
			f := spec.Flow
			if f.OffsetStorageReplicationFactor != tt.rf || f.EmitHeartbeatsEnabled != tt.heartbeats || f.EmitCheckpointsEnabled != tt.checkpoints ||
				f.Workers != tt.workers || f.WorkersGroupID != tt.workersGroup {
				t.Errorf("rf %d heartbeats %v checkpoints %v workers %v %q, want %d %v %v %v %q", f.OffsetStorageReplicationFactor, f.EmitHeartbeatsEnabled,
					f.EmitCheckpointsEnabled, f.Workers, f.WorkersGroupID, tt.rf, tt.heartbeats, tt.checkpoints, tt.workers, tt.workersGroup)
			}
		})
	}
}

// TestParseWorkerKeys pins what ParseWorker makes of each key it reads, its
// defaults, its warnings, and its errors' text and order.
func TestParseWorkerKeys(t *testing.T) {
	const base = "bootstrap.servers=b:1\ngroup.id=g\nconfig.storage.topic=c\n"
	const missing = ": missing (a Connect distributed worker needs it)"
	host, _ := os.Hostname()
	tests := []struct {
		name, file string
		want       string // the worker's fields, as summarized below; HOST is os.Hostname
		err        string
	}{
		{"client, offsets, REST and advertised keys",
			base + "rest.port=9001\nrest.advertised.host.name=adv\nrest.advertised.port=9999\nsecurity.protocol=SSL\nssl.truststore.location=/t\n" +
				"offset.storage.replication.factor=2\noffset.storage.partitions=7\nkmirror.rest.token=tok\nkmirror.rest.auth=none\nstatus.storage.topic=s\nkey.converter=x\n",
			`bootstrap "b:1" client map["bootstrap.servers":"b:1" "security.protocol":"SSL" "ssl.truststore.location":"/t"] group "g" config "c" rf 3/3 ` +
				`status "s"/5 listener ":9001" set false token "tok" open true tls ""/"" offsets map[offset.storage.partitions:7 offset.storage.replication.factor:2] ` +
				`id "adv:9999" warnings ["w.properties:14: key.converter: accepted but has no effect in kmirror"]`, ""},
		{"https listener, first of a list",
			base + "listeners=https://h:8443, http://x:1\nkmirror.rest.tls.cert=/c\nkmirror.rest.tls.key=/k\nstatus.storage.topic=s\n",
			`bootstrap "b:1" client map["bootstrap.servers":"b:1"] group "g" config "c" rf 3/3 status "s"/5 listener "h:8443" set true token "" open false ` +
				`tls "/c"/"/k" offsets map[] id "h:8443" warnings []`, ""},
		{"advertised host from the OS",
			base + "rest.port=abc\n",
			`bootstrap "b:1" client map["bootstrap.servers":"b:1"] group "g" config "c" rf 3/3 status "g-status"/5 listener ":abc" set false token "" open false ` +
				`tls ""/"" offsets map[] id "HOST:abc" warnings ["w.properties: status.storage.topic: missing (a Connect worker needs it); using g-status"]`, ""},
		{"status RF follows the config topic's",
			base + "config.storage.replication.factor=-1\nrest.host.name=10.1.1.1\nstatus.storage.topic=s\nstatus.storage.partitions=2\n",
			`bootstrap "b:1" client map["bootstrap.servers":"b:1"] group "g" config "c" rf -1/-1 status "s"/2 listener "10.1.1.1:8083" set true token "" open false ` +
				`tls ""/"" offsets map[] id "10.1.1.1:8083" warnings []`, ""},
		{"bad values", base + "config.storage.replication.factor=x\nkmirror.rest.auth=maybe\nlisteners=ftp://h:1\nplugin.path=/p\n", "",
			"w.properties:4: config.storage.replication.factor: want a positive number or -1 (the broker default)\nw.properties:5: kmirror.rest.auth: want \"token\" or \"none\"\n" +
				"w.properties:6: listeners: want http://HOST:PORT or https://HOST:PORT"},
		{"listener without port", base + "listeners=http://noport\n", "", "w.properties: listeners: \"noport\" is not HOST:PORT"},
		{"status values", base + "status.storage.topic=s\nstatus.storage.partitions=x\nstatus.storage.replication.factor=99999\n", "",
			"w.properties:5: status.storage.partitions: want a positive number\nw.properties:6: status.storage.replication.factor: want a positive number or -1 (the broker default)"},
		{"unknown key before missing keys", "group.id=\nbogus=1\n", "",
			"w.properties:2: bogus: unknown key of a Connect worker file\nw.properties: bootstrap.servers" + missing + "\nw.properties: config.storage.topic" + missing},
		{"empty file", "", "", "w.properties: bootstrap.servers" + missing + "\nw.properties: group.id" + missing + "\nw.properties: config.storage.topic" + missing},
		{"undeclared provider", "a = ${env:NOPE}\n", "",
			"w.properties:1: a: cannot resolve ${env:NOPE}: config provider \"env\" is not declared in config.providers\nw.properties:1: a: unknown key of a Connect worker file\n" +
				"w.properties: bootstrap.servers" + missing + "\nw.properties: group.id" + missing + "\nw.properties: config.storage.topic" + missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ParseWorker("w.properties", []byte(tt.file))
			if tt.err != "" || err != nil {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			got := fmt.Sprintf("bootstrap %q client %q group %q config %q rf %d/%d status %q/%d listener %q set %v token %q open %v tls %q/%q offsets %v id %q warnings %q",
				w.Bootstrap, w.Client, w.GroupID, w.ConfigTopic, w.ConfigRF, w.StatusRF, w.StatusTopic, w.StatusPartitions, w.Listener, w.ListenerSet,
				w.REST.Token, w.REST.Open, w.REST.TLSCert, w.REST.TLSKey, w.Offsets, w.WorkerID, w.Warnings)
			if want := strings.ReplaceAll(tt.want, "HOST", host); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

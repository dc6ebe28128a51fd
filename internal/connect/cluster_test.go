package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testwait"
)

func strp(s string) *string { return &s }

// TestStatusRecord reads and writes status records as Apache Connect's
// KafkaStatusBackingStore does (its JsonConverter with schemas off): the
// bytes are those a Connect 4.x worker writes to status.storage.topic.
func TestStatusRecord(t *testing.T) {
	tests := []struct {
		name  string
		bytes string // as Connect writes it
		rec   StatusRecord
	}{
		{"running", `{"state":"RUNNING","trace":null,"worker_id":"10.0.0.5:8083","generation":7}`,
			StatusRecord{State: "RUNNING", WorkerID: "10.0.0.5:8083", Generation: 7}},
		{"failed with a trace", `{"state":"FAILED","trace":"org.apache.kafka.connect.errors.ConnectException: <boom>\n\tat X.y(X.java:1)\n","worker_id":"connect-1:8083","generation":2}`,
			StatusRecord{State: "FAILED", Trace: strp("org.apache.kafka.connect.errors.ConnectException: <boom>\n\tat X.y(X.java:1)\n"), WorkerID: "connect-1:8083", Generation: 2}},
		{"unassigned, first generation", `{"state":"UNASSIGNED","trace":null,"worker_id":"h:8083","generation":0}`,
			StatusRecord{State: "UNASSIGNED", WorkerID: "h:8083", Generation: 0}},
		{"stopped", `{"state":"STOPPED","trace":null,"worker_id":"h:8083","generation":12}`,
			StatusRecord{State: "STOPPED", WorkerID: "h:8083", Generation: 12}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(EncodeStatus(tc.rec)); got != tc.bytes {
				t.Errorf("encoded\n%s\nwant Connect's\n%s", got, tc.bytes)
			}
			got, err := DecodeStatus([]byte(tc.bytes))
			if err != nil || !sameStatus(got, tc.rec) {
				t.Errorf("decoded %+v (%v), want %+v", got, err, tc.rec)
			}
		})
	}
	bad := []struct{ name, bytes, err string }{
		{"no state", `{"trace":null,"worker_id":"h:1","generation":1}`, "state"},
		{"unknown state", `{"state":"SLEEPING","trace":null,"worker_id":"h:1","generation":1}`, "state"},
		{"no worker", `{"state":"RUNNING","trace":null,"generation":1}`, "worker_id"},
		{"generation too big", `{"state":"RUNNING","trace":null,"worker_id":"h:1","generation":4294967296}`, "generation"},
		{"generation not a number", `{"state":"RUNNING","trace":null,"worker_id":"h:1","generation":"1"}`, "generation"},
		{"no generation", `{"state":"RUNNING","trace":null,"worker_id":"h:1"}`, "generation"},
		{"not JSON", `RUNNING`, "status record"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeStatus([]byte(tc.bytes)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one about %s", err, tc.err)
			}
		})
	}
}

func TestParseStatusKey(t *testing.T) {
	tests := []struct {
		key  string
		name string
		task int
		ok   bool
	}{
		{"status-connector-mm2-sh-to-sz", "mm2-sh-to-sz", -1, true},
		{"status-task-mm2-sh-to-sz-12", "mm2-sh-to-sz", 12, true},
		{"status-task-a-0", "a", 0, true},
		{"status-topic-orders:connector-a", "", 0, false},
		{"status-task-a", "", 0, false},
		{"status-task--1", "", 0, false},
		{"status-task-a-x", "", 0, false},
		{"status-connector-", "", 0, false},
		{"connector-a", "", 0, false},
	}
	for _, tc := range tests {
		name, task, ok := ParseStatusKey(tc.key)
		if ok != tc.ok || ok && (name != tc.name || task != tc.task) {
			t.Errorf("%q: %q %d %v, want %q %d %v", tc.key, name, task, ok, tc.name, tc.task, tc.ok)
		}
		if ok && tc.task >= 0 && TaskStatusKey(name, task) != tc.key {
			t.Errorf("%q: written back as %q", tc.key, TaskStatusKey(name, task))
		}
	}
}

// TestPlan: the leader gives every member the same list of workers,
// sorted by worker ID, its own index in it, and itself as leader.
func TestPlan(t *testing.T) {
	meta := func(id, w string) kmsg.JoinGroupResponseMember {
		b, _ := json.Marshal(Member{ID: w, URL: "http://" + w})
		return kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: b}
	}
	leader := Member{ID: "b:8083", URL: "http://b:8083"}
	p, err := plan(leader, []kmsg.JoinGroupResponseMember{meta("m1", "c:8083"), meta("m2", "a:8083"), meta("m3", "b:8083")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"m2": 0, "m3": 1, "m1": 2}
	for id, idx := range want {
		var a assignment
		if err := json.Unmarshal(p[id], &a); err != nil {
			t.Fatal(err)
		}
		if a.Index != idx || a.Leader != leader || len(a.Workers) != 3 || a.Workers[0].ID != "a:8083" || a.Workers[2].ID != "c:8083" {
			t.Errorf("member %s: %+v, want index %d", id, a, idx)
		}
	}
	if _, err := plan(leader, []kmsg.JoinGroupResponseMember{{MemberID: "x", ProtocolMetadata: []byte{0, 1}}}); err == nil {
		t.Error("a member with a Java Connect worker's metadata: no error")
	}
	var a assignment
	_ = json.Unmarshal(p["m1"], &a)
	v := View{Leader: a.Leader, Workers: a.Workers, Self: a.Index}
	if o := v.ConnectorOwner("mm2-sh-to-sz"); o != 1 {
		t.Errorf("the connectors' owner: worker %d, want the leader, 1", o)
	}
}

type staticView struct{ v View }

func (s staticView) View() View { return s.v }

type testWorkerAPI struct {
	url string
	ff  *fakeFlows
	st  *StatusStore
}

// newTestCluster starts n workers on one fake Kafka cluster, sharing its
// config and status topics, in a fixed assignment (worker 0 leads).
func newTestCluster(t *testing.T, n int) []testWorkerAPI {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	lns := make([]net.Listener, n)
	members := make([]Member, n)
	for i := range lns {
		if lns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		members[i] = Member{ID: lns[i].Addr().String(), URL: "http://" + lns[i].Addr().String()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make([]testWorkerAPI, n)
	for i := range lns {
		w := testWorker()
		w.Client["bootstrap.servers"] = c.ListenAddrs()[0]
		w.WorkerID, w.ConfigRF = members[i].ID, 1
		w.StatusTopic, w.StatusRF, w.StatusPartitions = "mm2-status", 1, 5
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		store, err := OpenStore(ctx, w, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		st, err := OpenStatusStore(ctx, w, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		ff := &fakeFlows{flows: map[string]string{}, fail: map[string]string{}}
		h := NewHerder(w, store, ff, log)
		h.SetCluster(staticView{View{Generation: 3, Leader: members[0], Workers: members, Self: i}}, st)
		mux := http.NewServeMux()
		api := NewAPI(h, "cid").Handler(func(next http.Handler) http.Handler { return next })
		for _, p := range Patterns {
			mux.Handle(p, api)
		}
		srv := &httptest.Server{Listener: lns[i], Config: &http.Server{Handler: mux}}
		srv.Start()
		t.Cleanup(srv.Close)
		go h.Run(ctx)
		out[i] = testWorkerAPI{url: members[i].URL, ff: ff, st: st}
	}
	return out
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestClusterAPI: three workers answer as one Connect cluster. Two
// creates of one name through two workers at once: one 201, one 409.
// Every worker's status lists the three tasks with the worker running
// each. A task restart through another worker reaches the task's worker;
// pause through one worker pauses every worker's share; includeTasks
// TestAssignedBeforeClient: kgo joins the workers' group in the
// background, so the first assignment can come before kgo.NewClient has
// returned the client (a loaded e2e run: a nil pointer in assigned). It
// waits for the client, then notes the assignment.
func TestAssignedBeforeClient(t *testing.T) {
	self := Member{ID: "w1", URL: "http://127.0.0.1:1"}
	c := &Cluster{self: self, ready: make(chan struct{}), log: slog.New(slog.DiscardHandler), view: View{Self: -1}}
	raw, err := json.Marshal(assignment{Leader: self, Workers: []Member{self}, Index: 0})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := balancer{c}.ParseSyncAssignment(raw)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the assignment was taken before the client existed (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c.cl = cl
	close(c.ready)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := c.View(); v.Self != 0 || len(v.Workers) != 1 || v.Leader.ID != "w1" {
		t.Errorf("view %+v, want this worker as task 0 and leader", v)
	}
}

// restarts every share; delete leaves tombstones.
func TestClusterAPI(t *testing.T) {
	ws := newTestCluster(t, 3)
	codes := make(chan int, 2)
	var wg sync.WaitGroup
	for _, w := range ws[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := call(t, "POST", w.url+"/connectors", seedSHSZ)
			codes <- code
		}()
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[201] != 1 || got[409] != 1 {
		t.Fatalf("two creates at once through two workers: %v, want one 201 and one 409", got)
	}
	id := func(i int) string { return strings.TrimPrefix(ws[i].url, "http://") }
	// The leader wrote the connector's status before answering the create.
	if code, b := call(t, "GET", ws[2].url+"/connectors/mm2-sh-to-sz/status", ""); code != 200 || !strings.Contains(b, fmt.Sprintf(`"connector":{"state":"RUNNING","worker_id":%q}`, id(0))) {
		t.Errorf("status right after the create: %d %s", code, b)
	}
	want := fmt.Sprintf(`"tasks":[{"id":0,"state":"%%s","worker_id":%q},{"id":1,"state":"%%s","worker_id":%q},{"id":2,"state":"%%s","worker_id":%q}]`, id(0), id(1), id(2))
	for i := range ws {
		testwait.For(t, 15*time.Second, "worker "+id(i)+" to list every task RUNNING", func() bool {
			_, b := call(t, "GET", ws[i].url+"/connectors/mm2-sh-to-sz/status", "")
			return strings.Contains(b, fmt.Sprintf(want, "RUNNING", "RUNNING", "RUNNING")) && strings.Contains(b, `"connector":{"state":"RUNNING"`)
		})
		if code, b := call(t, "GET", ws[i].url+"/connectors/mm2-sh-to-sz/tasks/2/status", ""); code != 200 || b != fmt.Sprintf(`{"id":2,"state":"RUNNING","worker_id":%q}`+"\n", id(2)) {
			t.Errorf("task 2 through worker %d: %d %s", i, code, b)
		}
	}
	if code, _ := call(t, "GET", ws[0].url+"/connectors/mm2-sh-to-sz/tasks/3/status", ""); code != 404 {
		t.Errorf("task 3 of 3 workers: %d, want 404", code)
	}
	// A task left by a worker gone since: the leader removes it.
	if err := ws[1].st.Put(context.Background(), TaskStatusKey("mm2-sh-to-sz", 5), &StatusRecord{State: "RUNNING", WorkerID: "gone:8083", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the leader to remove task 5", func() bool {
		if err := ws[1].st.CatchUp(context.Background()); err != nil {
			return false
		}
		_, ok := ws[1].st.Task("mm2-sh-to-sz", 5)
		return !ok
	})

	// Task 2 restarts on worker 2, asked through worker 0.
	if code, b := call(t, "POST", ws[0].url+"/connectors/mm2-sh-to-sz/tasks/2/restart", ""); code != 204 {
		t.Fatalf("task restart: %d %s", code, b)
	}
	if r := [3]int{ws[0].ff.restarted("mm2-sh-to-sz"), ws[1].ff.restarted("mm2-sh-to-sz"), ws[2].ff.restarted("mm2-sh-to-sz")}; r != [3]int{0, 0, 1} {
		t.Fatalf("restarts per worker after restarting task 2: %v", r)
	}
	// The connector alone restarts on its owner (the leader, worker 0),
	// asked through another.
	owner, other := 0, 2
	before := ws[owner].ff.restarted("mm2-sh-to-sz")
	if code, b := call(t, "POST", ws[other].url+"/connectors/mm2-sh-to-sz/restart", ""); code != 204 {
		t.Fatalf("connector restart: %d %s", code, b)
	}
	if ws[owner].ff.restarted("mm2-sh-to-sz") != before+1 {
		t.Fatalf("the connector's restart did not reach its owner, worker %d", owner)
	}
	// includeTasks: every worker restarts its share.
	var counts [3]int
	for i := range ws {
		counts[i] = ws[i].ff.restarted("mm2-sh-to-sz")
	}
	if code, b := call(t, "POST", ws[1].url+"/connectors/mm2-sh-to-sz/restart?includeTasks=true", ""); code != 202 {
		t.Fatalf("restart with tasks: %d %s", code, b)
	}
	for i := range ws {
		testwait.For(t, 15*time.Second, fmt.Sprintf("worker %d to restart its share", i), func() bool { return ws[i].ff.restarted("mm2-sh-to-sz") == counts[i]+1 })
	}

	// Pause through worker 0: worker 2's share pauses, and worker 1 says so.
	if code, b := call(t, "PUT", ws[0].url+"/connectors/mm2-sh-to-sz/pause", ""); code != 202 {
		t.Fatalf("pause: %d %s", code, b)
	}
	testwait.For(t, 15*time.Second, "worker 1 to list every task PAUSED", func() bool {
		_, b := call(t, "GET", ws[1].url+"/connectors/mm2-sh-to-sz/status", "")
		return strings.Contains(b, fmt.Sprintf(want, "PAUSED", "PAUSED", "PAUSED"))
	})

	// Delete: every worker tombstones what it wrote.
	if code, b := call(t, "DELETE", ws[2].url+"/connectors/mm2-sh-to-sz", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	testwait.For(t, 15*time.Second, "the status records to go", func() bool {
		if err := ws[0].st.CatchUp(context.Background()); err != nil {
			return false
		}
		return len(ws[0].st.Names()) == 0
	})
}

// TestParseWorkerStatus: the status topic keys of a Connect worker file.
func TestParseWorkerStatus(t *testing.T) {
	const base = "bootstrap.servers=b:1\ngroup.id=g\nconfig.storage.topic=c\n"
	tests := []struct {
		name, file    string
		topic         string
		rf            int16
		partitions    int32
		err, warnings string
	}{
		{"as Connect's sample", base + "status.storage.topic=connect-status\nstatus.storage.replication.factor=1\nstatus.storage.partitions=3\n", "connect-status", 1, 3, "", ""},
		{"Connect's defaults", base + "status.storage.topic=st\n", "st", 3, 5, "", ""},
		{"broker default RF", base + "status.storage.topic=st\nstatus.storage.replication.factor=-1\n", "st", -1, 5, "", ""},
		{"missing topic", base, "g-status", 3, 5, "", "status.storage.topic: missing"},
		{"RF as the config topic's", base + "config.storage.replication.factor=1\nstatus.storage.topic=st\n", "st", 1, 5, "", ""},
		{"bad partitions", base + "status.storage.topic=st\nstatus.storage.partitions=0\n", "", 0, 0, "w.properties:5: status.storage.partitions: want a positive number", ""},
		{"bad RF", base + "status.storage.topic=st\nstatus.storage.replication.factor=0\n", "", 0, 0, "status.storage.replication.factor: want a positive number or -1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWorker("w.properties", []byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.StatusTopic != tc.topic || w.StatusRF != tc.rf || w.StatusPartitions != tc.partitions {
				t.Errorf("status topic %q rf %d partitions %d, want %q %d %d", w.StatusTopic, w.StatusRF, w.StatusPartitions, tc.topic, tc.rf, tc.partitions)
			}
			if got := strings.Join(w.Warnings, "\n"); tc.warnings != "" && !strings.Contains(got, tc.warnings) || tc.warnings == "" && strings.Contains(got, "status.storage") {
				t.Errorf("warnings %q, want %q", got, tc.warnings)
			}
		})
	}
}

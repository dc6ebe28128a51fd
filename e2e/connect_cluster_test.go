package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestConnectCluster runs three "kmirror connect" workers on one config
// and status topic and asks each, as Connect's REST API answers as one
// cluster: a connector created through one worker lists its three tasks,
// each with the worker running it, on every worker; a task restart
// through a worker that does not run the task reaches the one that does;
// a pause through one worker pauses every worker's share; two creates of
// one name through two workers at once give one 201 and one 409; and
// /ui/ on a worker shows the connector's flow.
func TestConnectCluster(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	sh, sz := cs[0], cs[1]
	topic := testkafka.Topic(t, "cc")
	sh.CreateTopic(t, topic, 3, nil)
	group := testkafka.Topic(t, "connect")
	ports := []string{freePort(t), freePort(t), freePort(t)}
	procs := make([]*proc, 3)
	for i, port := range ports {
		procs[i] = startProc(t, "kmirror connect "+port, exec.Command(kmirrorBin(t), "connect", connectWorker(t, sz, group, port)))
	}
	for _, port := range ports {
		waitFor(t, 30*time.Second, "the REST API on "+port, func() bool { code, _ := rest(t, "GET", port, "/", ""); return code == 200 })
	}
	src := alias(t, "cc")
	conn := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "config": {"connector.class": "MirrorSourceConnector", "source.cluster.alias": %q, "target.cluster.alias": "sz",
  "source.cluster.bootstrap.servers": %q, "topics": %q, "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
  "source.cluster.consumer.session.timeout.ms": "6000", "source.cluster.consumer.heartbeat.interval.ms": "1000"}}`, name, src, strings.Join(sh.Bootstrap, ","), topic)
	}
	if code, b := rest(t, "POST", ports[0], "/connectors", conn("cc")); code != 201 {
		t.Fatalf("POST /connectors: %d %s", code, b)
	}

	type taskState struct {
		ID       int    `json:"id"`
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
	}
	status := func(port string) (string, []taskState, string) {
		code, b := rest(t, "GET", port, "/connectors/cc/status", "")
		var st struct {
			Connector struct{ State string }
			Tasks     []taskState
		}
		if code != 200 || json.Unmarshal([]byte(b), &st) != nil {
			return "", nil, fmt.Sprintf("%d %s", code, b)
		}
		return st.Connector.State, st.Tasks, b
	}
	// every worker lists three tasks, on the three workers, all in state.
	everyWorker := func(state string) []taskState {
		t.Helper()
		var tasks []taskState
		for _, port := range ports {
			ok := func() bool {
				cst, ts, _ := status(port)
				seen := map[string]bool{}
				for i, task := range ts {
					if task.ID != i || task.State != state {
						return false
					}
					seen[task.WorkerID] = true
				}
				for _, p := range ports {
					if !seen["127.0.0.1:"+p] {
						return false
					}
				}
				tasks = ts
				return len(ts) == 3 && cst == state
			}
			for end := time.Now().Add(45 * time.Second); !ok(); time.Sleep(250 * time.Millisecond) {
				if time.Now().After(end) {
					_, _, last := status(port)
					t.Fatalf("worker %s does not list three %s tasks on the three workers: %s", port, state, last)
				}
			}
		}
		return tasks
	}
	tasks := everyWorker("RUNNING")
	produceN(t, sh, topic, 3, 30, "cc")
	waitFor(t, 45*time.Second, "30 records copied by the three workers", func() bool { return countOrZero(t, sz, src+"."+topic) == 30 })

	// Task restart through a worker that does not run the task.
	owner := tasks[1].WorkerID
	var via string
	own := map[string]*proc{}
	for i, p := range ports {
		own["127.0.0.1:"+p] = procs[i]
		if "127.0.0.1:"+p != owner && via == "" {
			via = p
		}
	}
	restarts := func(p *proc) int { return strings.Count(p.log.String(), `msg="restarting flow" flow=cc`) }
	before := map[*proc]int{}
	for _, p := range procs {
		before[p] = restarts(p)
	}
	if code, b := rest(t, "POST", via, "/connectors/cc/tasks/1/restart", ""); code != 204 {
		t.Fatalf("restart task 1 through %s: %d %s", via, code, b)
	}
	waitFor(t, 10*time.Second, "the restart on "+owner, func() bool { return restarts(own[owner]) == before[own[owner]]+1 })
	for _, p := range procs {
		if p != own[owner] && restarts(p) != before[p] {
			t.Errorf("a worker that does not run task 1 restarted its flow")
		}
	}

	// Pause through one worker: every worker's share pauses, and every
	// worker says so.
	if code, b := rest(t, "PUT", via, "/connectors/cc/pause", ""); code != 202 {
		t.Fatalf("pause: %d %s", code, b)
	}
	everyWorker("PAUSED")
	if code, b := rest(t, "PUT", ports[2], "/connectors/cc/resume", ""); code != 202 {
		t.Fatalf("resume: %d %s", code, b)
	}
	everyWorker("RUNNING")

	// Two creates of one name through two workers at once.
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i, port := range ports[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = rest(t, "POST", port, "/connectors", conn("twice"))
		}()
	}
	wg.Wait()
	if !(codes[0] == 201 && codes[1] == 409 || codes[0] == 409 && codes[1] == 201) {
		t.Fatalf("two creates of one name at once: %v, want one 201 and one 409", codes)
	}

	// The dashboard of a worker lists the connector's flow.
	if code, b := rest(t, "GET", ports[1], "/ui/", ""); code != 200 || !strings.Contains(b, "<html") {
		t.Fatalf("/ui/: %d %.200s", code, b)
	}
	waitFor(t, 15*time.Second, "the dashboard's snapshot to list the flow cc", func() bool {
		code, b := rest(t, "GET", ports[1], "/ui/api/snapshot", "")
		return code == 200 && strings.Contains(b, `"name":"cc"`)
	})
	for _, name := range []string{"cc", "twice"} {
		if code, b := rest(t, "DELETE", ports[0], "/connectors/"+name, ""); code != 204 {
			t.Errorf("DELETE %s: %d %s", name, code, b)
		}
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestConnectREST runs "kmirror connect" with a Connect worker file and
// drives it with the seeds' own requests (curl, JSON as the articles print
// it; bootstrap servers, and replication factor 1 for the single-node test
// clusters, substituted): records copied record by record, status, pause,
// resume, restart, offsets, kill -9 and restart from the config topic, two
// workers sharing the config topic, and DELETE stopping the flow.
func TestConnectREST(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	sh, sz := cs[0], cs[1]
	orders := testkafka.Topic(t, "orders")
	sh.CreateTopic(t, orders, 2, nil)
	west := testkafka.Topic(t, "west")
	sh.CreateTopic(t, west, 1, nil)
	group := testkafka.Topic(t, "connect")
	port1, port2 := freePort(t), freePort(t)
	start := func(port string) *proc { return startConnect(t, connectWorker(t, sz, group, port), port) }
	w1 := start(port1)

	// Seed 001 (POST /connectors), with the source's bootstrap servers.
	seed := fmt.Sprintf(`{ "name": "mm2-sh-to-sz", "config": { "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "source.cluster.alias": "sh", "target.cluster.alias": "sz", "topics": "orders.*", "tasks.max": 4,
  "source.cluster.bootstrap.servers": %q, "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
  "source.cluster.consumer.session.timeout.ms": "6000", "source.cluster.consumer.heartbeat.interval.ms": "1000" } }`, strings.Join(sh.Bootstrap, ","))
	out := curl(t, "-XPOST", "http://localhost:"+port1+"/connectors", "-H", "Content-Type: application/json", "-d", seed)
	if !strings.Contains(out, `"name":"mm2-sh-to-sz"`) || !strings.Contains(out, "\n201") {
		t.Fatalf("POST /connectors: %s", out)
	}
	remote := "sh." + orders
	var src []*kgo.Record
	produce := func(n int, tag string) {
		for i := 0; i < n; i++ {
			src = append(src, &kgo.Record{Topic: orders, Partition: int32(len(src) % 2), Key: []byte(fmt.Sprintf("%s-%d", tag, i)), Value: []byte(tag)})
		}
		cl := sh.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl.ProduceSync(ctx(t), src[len(src)-n:]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	produce(20, "first")
	waitFor(t, 60*time.Second, "20 records on sz", func() bool { return countOrZero(t, sz, remote) == 20 })
	sameRecords(t, src, sz.ReadAll(t, remote), "")
	state := func(port, name string) string {
		code, body := rest(t, "GET", port, "/connectors/"+name+"/status", "")
		var st struct {
			Connector struct{ State, Trace string }
			Tasks     []struct{ State string }
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			return fmt.Sprintf("http %d %s", code, body)
		}
		return st.Connector.State
	}
	// Seed 001's monitoring call.
	if out := curl(t, "http://localhost:"+port1+"/connectors/mm2-sh-to-sz/status"); !strings.Contains(out, `"state":"RUNNING"`) || strings.Contains(out, "FAILED") {
		t.Fatalf("status: %s", out)
	}

	expect := func(method, port, path, body string, code int) string {
		t.Helper()
		got, b := rest(t, method, port, path, body)
		if got != code {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, got, code, b)
		}
		return b
	}
	expect("PUT", port1, "/connectors/mm2-sh-to-sz/pause", "", 202)
	waitFor(t, 20*time.Second, "PAUSED", func() bool { return state(port1, "mm2-sh-to-sz") == "PAUSED" })
	produce(10, "paused")
	time.Sleep(3 * time.Second) // time for a copy that must not happen: nothing to wait for
	if n := countOrZero(t, sz, remote); n != 20 {
		t.Fatalf("a paused connector copied: %d records on sz, want 20", n)
	}
	expect("PUT", port1, "/connectors/mm2-sh-to-sz/resume", "", 202)
	waitFor(t, 30*time.Second, "30 records after resume", func() bool { return countOrZero(t, sz, remote) == 30 })
	if st := state(port1, "mm2-sh-to-sz"); st != "RUNNING" {
		t.Fatalf("after resume: %s", st)
	}
	expect("POST", port1, "/connectors/mm2-sh-to-sz/restart", "", 204)
	produce(4, "restarted")
	waitFor(t, 30*time.Second, "34 records after restart", func() bool { return countOrZero(t, sz, remote) == 34 })

	// Offsets (KIP-875): stop, read, rewind partition 0 by 5, resume.
	expect("PUT", port1, "/connectors/mm2-sh-to-sz/stop", "", 204)
	waitFor(t, 20*time.Second, "STOPPED", func() bool { return state(port1, "mm2-sh-to-sz") == "STOPPED" })
	offs := expect("GET", port1, "/connectors/mm2-sh-to-sz/offsets", "", 200)
	want := fmt.Sprintf(`{"offsets":[{"partition":{"cluster":"sh","partition":0,"topic":%q},"offset":{"offset":16}},{"partition":{"cluster":"sh","partition":1,"topic":%q},"offset":{"offset":16}}]}`, orders, orders)
	// The seed's topics = orders.* also matches other tests' topics on
	// these shared clusters (and heartbeats are always copied): compare
	// this test's topic only, in the shape Connect prints.
	if got := offsetsOf(t, offs, orders); got != want {
		t.Fatalf("offsets of %s:\n%s\nwant\n%s\n(all: %s)", orders, got, want, offs)
	}
	expect("PATCH", port1, "/connectors/mm2-sh-to-sz/offsets", fmt.Sprintf(`{"offsets":[{"partition":{"cluster":"sh","partition":0,"topic":%q},"offset":{"offset":11}}]}`, orders), 200)
	expect("PUT", port1, "/connectors/mm2-sh-to-sz/resume", "", 202)
	waitFor(t, 30*time.Second, "5 records copied again after the rewind", func() bool { return countOrZero(t, sz, remote) == 39 })

	// kill -9 and start again: the connector comes back from the config topic.
	w1.kill()
	w1 = start(port1)
	if b := expect("GET", port1, "/connectors", "", 200); strings.TrimSpace(b) != `["mm2-sh-to-sz"]` {
		t.Fatalf("after kill -9: connectors %s", b)
	}
	produce(6, "after-kill")
	waitFor(t, 60*time.Second, "the records after the restart", func() bool { return hasAllKeys(t, sz, remote, src) })
	if st := state(port1, "mm2-sh-to-sz"); st != "RUNNING" {
		t.Fatalf("after kill -9: %s", st)
	}

	// A second worker on the same config topic sees the connector, and one
	// created through it (seed 000, PUT .../config) reaches the first.
	start(port2)
	if b := expect("GET", port2, "/connectors", "", 200); strings.TrimSpace(b) != `["mm2-sh-to-sz"]` {
		t.Fatalf("second worker: connectors %s", b)
	}
	seed0 := fmt.Sprintf(`{
    "name": "us-west-source",
    "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "source.cluster.alias": "us-west",
    "target.cluster.alias": "us-east",
    "source.cluster.bootstrap.servers": %q,
    "topics": %q, "replication.factor": "1", "offset-syncs.topic.replication.factor": "1"
}`, strings.Join(sh.Bootstrap, ","), west) // topics: one topic, not ".*", on clusters other tests share
	if out := curl(t, "-XPUT", "http://localhost:"+port2+"/connectors/us-west-source/config", "-H", "Content-Type: application/json", "-d", seed0); !strings.Contains(out, "\n201") {
		t.Fatalf("PUT config: %s", out)
	}
	waitFor(t, 10*time.Second, "worker 1 to see us-west-source", func() bool {
		_, b := rest(t, "GET", port1, "/connectors", "")
		return strings.TrimSpace(b) == `["mm2-sh-to-sz","us-west-source"]`
	})
	produceN(t, sh, west, 1, 8, "west")
	waitFor(t, 60*time.Second, "us-west records on us-east", func() bool { return countOrZero(t, sz, "us-west."+west) >= 8 })

	// Both workers are in the workers' group: every connector has a task
	// on each.
	waitFor(t, 30*time.Second, "two tasks of us-west-source", func() bool {
		_, b := rest(t, "GET", port1, "/connectors/us-west-source/status", "")
		return strings.Contains(b, `"id":1,`)
	})
	// Kafka's own Connect REST client reads kmirror's answers into
	// Connect's entities, and starts a MirrorHeartbeatConnector.
	hbAlias := alias(t, "java")
	got := runConnectJava(t, "http://127.0.0.1:"+port1, strings.Join(sh.Bootstrap, ","), hbAlias)
	for _, line := range []string{"server true", "created 201 java-hb source", "status RUNNING 2", "offsets 1",
		"connectors java-hb,mm2-sh-to-sz,us-west-source", "expanded RUNNING", "plugins 3", "validate 1", "missing 404 Connector nope not found"} {
		if !strings.Contains(got, line+"\n") && !strings.HasSuffix(got, line) {
			t.Errorf("the Java Connect client printed\n%s\nwithout %q", got, line)
		}
	}
	waitFor(t, 30*time.Second, "heartbeats of the heartbeat connector", func() bool {
		if !hasTopic(t, sz, "heartbeats") {
			return false
		}
		for _, r := range sz.ReadAll(t, "heartbeats") {
			if strings.Contains(string(r.Key), hbAlias) {
				return true
			}
		}
		return false
	})
	expect("DELETE", port1, "/connectors/java-hb", "", 204)

	// DELETE through worker 2 stops the flow in both workers.
	expect("DELETE", port2, "/connectors/mm2-sh-to-sz", "", 204)
	for _, port := range []string{port1, port2} {
		waitFor(t, 10*time.Second, "the delete on "+port, func() bool {
			_, b := rest(t, "GET", port, "/connectors", "")
			return strings.TrimSpace(b) == `["us-west-source"]`
		})
	}
	before := countOrZero(t, sz, remote)
	produce(5, "deleted")
	time.Sleep(4 * time.Second) // time for a copy that must not happen: nothing to wait for
	if n := countOrZero(t, sz, remote); n != before {
		t.Fatalf("a deleted connector copied: %d records on sz, had %d", n, before)
	}
}

// connectWorker writes a Connect worker file for a kmirror connect on
// target, listening on port, without REST auth.
func connectWorker(t *testing.T, target *testkafka.Cluster, group, port string) string {
	return writeFile(t, "worker-"+port+".properties", strings.Join([]string{
		"bootstrap.servers=" + strings.Join(target.Bootstrap, ","),
		"group.id=" + group,
		"key.converter=org.apache.kafka.connect.converters.ByteArrayConverter",
		"value.converter=org.apache.kafka.connect.converters.ByteArrayConverter",
		"offset.storage.topic=" + group + "-offsets",
		"offset.storage.replication.factor=1",
		"config.storage.topic=" + group + "-configs",
		"config.storage.replication.factor=1",
		"status.storage.topic=" + group + "-status",
		"status.storage.replication.factor=1",
		"listeners=http://127.0.0.1:" + port,
		"kmirror.rest.auth=none",
	}, "\n")+"\n")
}

// startConnect runs kmirror connect with a worker file and waits for its
// REST API on port.
func startConnect(t *testing.T, file, port string) *proc {
	p := startProc(t, "kmirror connect "+port, exec.Command(kmirrorBin(t), "connect", file))
	waitFor(t, 30*time.Second, "the REST API on "+port, func() bool { code, _ := rest(t, "GET", port, "/", ""); return code == 200 })
	return p
}

func freePort(t *testing.T) string {
	_, port, _ := net.SplitHostPort(testkafka.FreeAddr(t))
	return port
}

// curl runs curl with args and returns its body and, on the last line,
// the status code.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func rest(t *testing.T, method, port, path, body string) (int, string) {
	req, _ := http.NewRequest(method, "http://127.0.0.1:"+port+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// offsetsOf keeps the entries of topic in a KIP-875 offsets answer and
// prints them back as Connect does.
func offsetsOf(t *testing.T, body, topic string) string {
	t.Helper()
	var all struct {
		Offsets []struct {
			Partition struct {
				Cluster   string `json:"cluster"`
				Partition int    `json:"partition"`
				Topic     string `json:"topic"`
			} `json:"partition"`
			Offset struct {
				Offset int64 `json:"offset"`
			} `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatalf("offsets %s: %v", body, err)
	}
	kept := all.Offsets[:0]
	for _, o := range all.Offsets {
		if o.Partition.Topic == topic {
			kept = append(kept, o)
		}
	}
	all.Offsets = kept
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// flowSince returns the since time of flow name in GET /status at addr.
func flowSince(t *testing.T, addr, name string) time.Time {
	t.Helper()
	_, body := httpGet("http://" + addr + "/status")
	var st struct {
		Flows []struct {
			Name  string    `json:"name"`
			Since time.Time `json:"since"`
		} `json:"flows"`
	}
	json.Unmarshal([]byte(body), &st)
	for _, f := range st.Flows {
		if f.Name == name {
			return f.Since
		}
	}
	t.Fatalf("flow %s not in /status: %s", name, body)
	return time.Time{}
}

// TestReloadUnreachable: a reload (SIGHUP) whose file makes one cluster
// unreachable does not stop kmirror: the flow from that cluster is failed
// in /status (with the reason) and in kmirror_flow_state, the other flow
// goes on copying untouched, and fixing the file and reloading again
// brings the failed flow back.
func TestReloadUnreachable(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	// Flows A->B and C->B: C is cluster a under another alias, so one
	// alias can be broken while the other flow reads the same cluster.
	srcA, srcC, dst := alias(t, "a"), alias(t, "c"), alias(t, "b")
	t1, t2 := testkafka.Topic(t, "reloadA"), testkafka.Topic(t, "reloadC")
	a.CreateTopic(t, t1, 1, nil)
	a.CreateTopic(t, t2, 1, nil)
	produce := func(topic string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
		}
		a.Produce(t, recs...)
	}
	rest, metrics := freeAddr(t), freeAddr(t)
	body := func(aBootstrap string) string {
		return strings.Join([]string{
			"clusters = " + srcA + ", " + srcC + ", " + dst,
			srcA + ".bootstrap.servers = " + aBootstrap,
			srcC + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
			dst + ".bootstrap.servers = " + strings.Join(b.Bootstrap, ","),
			srcA + "->" + dst + ".enabled = true",
			srcA + "->" + dst + ".topics = " + t1,
			srcC + "->" + dst + ".enabled = true",
			srcC + "->" + dst + ".topics = " + t2,
			"emit.heartbeats.enabled = false",
			"offset-syncs.topic.location = target",
			"replication.factor = 1",
			"checkpoints.topic.replication.factor = 1",
			"offset-syncs.topic.replication.factor = 1",
			"offset.storage.replication.factor = 1",
			"refresh.topics.interval.seconds = 2",
			"kmirror.rest.listener = " + rest,
			"kmirror.rest.auth = none",
		}, "\n") + "\n"
	}
	file := writeFile(t, "mm2.properties", body(strings.Join(a.Bootstrap, ",")))
	p := startKmirror(t, "--metrics-addr", metrics, file)
	bad, good := srcA+"->"+dst, srcC+"->"+dst
	remote1, remote2 := srcA+"."+t1, srcC+"."+t2
	copied := func(topic string, n int) {
		t.Helper()
		waitFor(t, 90*time.Second, fmt.Sprintf("%d records in %s", n, topic), func() bool {
			return hasTopic(t, b, topic) && countAll(t, b, topic) == n
		})
	}
	produce(t1, 10)
	produce(t2, 10)
	copied(remote1, 10)
	copied(remote2, 10)
	goodSince := flowSince(t, rest, good)
	state := func(name string) string {
		s, _, _ := flowState(rest, name)
		return s
	}
	failedMetric := func() float64 {
		return metricValue(metrics, "kmirror_flow_state",
			fmt.Sprintf(`kind="replication",source="%s",state="failed",target="%s"`, srcA, dst))
	}
	reload := func(aBootstrap string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body(aBootstrap)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	reload("127.0.0.1:1")
	waitFor(t, 90*time.Second, bad+" failed in /status", func() bool { return state(bad) == "failed" })
	if _, errText, _ := flowState(rest, bad); !strings.Contains(errText, "unreachable") {
		t.Errorf("%s's error in /status = %q, want the reason", bad, errText)
	}
	if v := failedMetric(); v != 1 {
		t.Errorf("kmirror_flow_state{%s, failed} = %v, want 1", bad, v)
	}
	select {
	case <-p.done:
		t.Fatalf("kmirror exited after the reload: %v", p.err)
	default:
	}
	// The other flow goes on, not restarted.
	produce(t2, 10)
	copied(remote2, 20)
	if st := state(good); st != "running" {
		t.Errorf("%s is %s after the reload, want running", good, st)
	}
	if since := flowSince(t, rest, good); !since.Equal(goodSince) {
		t.Errorf("%s restarted by the reload (since %v, was %v)", good, since, goodSince)
	}

	// The file fixed: the failed flow starts again and copies.
	reload(strings.Join(a.Bootstrap, ","))
	waitFor(t, 90*time.Second, bad+" running again", func() bool { return state(bad) == "running" })
	produce(t1, 5)
	copied(remote1, 15)
	if v := failedMetric(); v != 0 {
		t.Errorf("kmirror_flow_state{%s, failed} after the fix = %v, want 0", bad, v)
	}
	p.stop()
}

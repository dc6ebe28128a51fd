package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestConnectSecondSignal: kmirror connect, as kmirror run, exits at once
// on a second SIGTERM while its first stop waits for a target that is
// down, non-zero and saying so in the log.
func TestConnectSecondSignal(t *testing.T) {
	t.Parallel()
	a := testkafka.Shared(t, 1)[0]
	b := testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1})[0]
	src := alias(t, "sigsa")
	topic := testkafka.Topic(t, "sigs")
	a.CreateTopic(t, topic, 2, nil)
	remote := src + "." + topic
	port := freePort(t)
	// The worker's topics are on a, which stays up: only the connector's
	// target goes down.
	p := startConnect(t, connectWorker(t, a, testkafka.Topic(t, "sigsconnect"), port), port)
	config := fmt.Sprintf(`{"connector.class": "MirrorSourceConnector", "source.cluster.alias": %q, "target.cluster.alias": "sigsb",
  "source.cluster.bootstrap.servers": %q, "target.cluster.bootstrap.servers": %q, "topics": %q, "replication.factor": "1",
  "offset-syncs.topic.replication.factor": "1", "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1"}`,
		src, strings.Join(a.Bootstrap, ","), strings.Join(b.Bootstrap, ","), topic)
	if code, out := rest(t, "PUT", port, "/connectors/sigs/config", config); code != 201 {
		t.Fatalf("PUT sigs: %d %s", code, out)
	}
	produce := func() {
		var recs []*kgo.Record
		for i := range 50 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
		}
		a.Produce(t, recs...)
	}
	produce()
	waitFor(t, 90*time.Second, "50 records on the target", func() bool { return countOrZero(t, b, remote) == 50 })

	b.KillNode(t, b.Nodes()[0])
	produce() // records the target will never acknowledge
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the flow to show as stopping", func() bool {
		state, _, _ := flowState("127.0.0.1:"+port, "sigs")
		return state == "stopping"
	})
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("kmirror connect still runs 5s after a second SIGTERM")
	}
	t.Logf("exited %v after the second signal, code %d", time.Since(began), exitCode(p.err))
	if code := exitCode(p.err); code == 0 {
		t.Errorf("exit code %d after a second signal, want non-zero", code)
	}
	if !strings.Contains(p.log.String(), "second signal: exiting at once") {
		t.Errorf("log does not say the second signal cut the stop short:\n%s", p.log.String())
	}
}

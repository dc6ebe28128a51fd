package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestConnectClusterOutage: kmirror connect's own Kafka cluster (config
// topic and target) goes down. Reads keep answering from what was read; a
// write fails with Connect's 500 naming the config topic instead of
// hanging, and is not applied later; once the broker is back writes work
// again and the running connector copies what was produced meanwhile,
// record by record.
func TestConnectClusterOutage(t *testing.T) {
	t.Parallel()
	a := testkafka.Shared(t, 1)[0]
	b := testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1})[0]
	src := alias(t, "outa")
	topic := testkafka.Topic(t, "outorders")
	a.CreateTopic(t, topic, 2, nil)
	remote := src + "." + topic
	port := freePort(t)
	group := testkafka.Topic(t, "outconnect")
	startConnect(t, connectWorker(t, b, group, port), port)

	config := func(topics string) string {
		return fmt.Sprintf(`{"connector.class": "MirrorSourceConnector", "source.cluster.alias": %q, "target.cluster.alias": "outb",
  "source.cluster.bootstrap.servers": %q, "topics": %q, "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
  "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1"}`, src, strings.Join(a.Bootstrap, ","), topics)
	}
	if code, out := rest(t, "PUT", port, "/connectors/before/config", config(topic)); code != 201 {
		t.Fatalf("PUT before: %d %s", code, out)
	}
	var sent []*kgo.Record
	produce := func(n int, tag string) {
		t.Helper()
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprintf("%s-%d", tag, i)), Value: []byte(tag)})
		}
		cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		defer cl.Close()
		if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, recs...)
	}
	produce(20, "up")
	waitFor(t, 60*time.Second, "20 records on the target", func() bool { return countOrZero(t, b, remote) == 20 })

	b.StopNode(t, b.Nodes()[0])
	produce(20, "down")
	if code, out := rest(t, "GET", port, "/connectors", ""); code != 200 || strings.TrimSpace(out) != `["before"]` {
		t.Errorf("GET /connectors while the cluster is down: %d %s, want 200 [\"before\"]", code, out)
	}
	began := time.Now()
	code, out := rest(t, "PUT", port, "/connectors/during/config", config("nothing"))
	took := time.Since(began)
	if code != 500 || !strings.Contains(out, `"error_code":500`) || !strings.Contains(out, group+"-configs") {
		t.Errorf("PUT while the cluster is down: %d %s, want 500 naming the config topic %s-configs", code, out, group)
	}
	t.Logf("PUT while the cluster is down: %d in %v: %s", code, took.Round(time.Millisecond), out)
	if took > 45*time.Second {
		t.Errorf("PUT while the cluster is down took %v", took)
	}

	b.StartNode(t, b.Nodes()[0])
	waitFor(t, 60*time.Second, "PUT after the cluster is back", func() bool {
		code, _ := rest(t, "PUT", port, "/connectors/after/config", config("nothing"))
		return code == 201
	})
	waitFor(t, 90*time.Second, "40 records on the target", func() bool { return countOrZero(t, b, remote) >= 40 })
	sameRecords(t, sent, b.ReadAll(t, remote), "")
	time.Sleep(2 * time.Second) // a late write of "during" would be read by now
	if code, out := rest(t, "GET", port, "/connectors", ""); code != 200 || strings.TrimSpace(out) != `["after","before"]` {
		t.Errorf("GET /connectors after the outage: %d %s, want [\"after\",\"before\"]: the failed PUT must not be applied", code, out)
	}
	if code, out := rest(t, "GET", port, "/connectors/before/status", ""); code != 200 || !strings.Contains(out, `"state":"RUNNING"`) {
		t.Errorf("status of before: %d %s", code, out)
	}
}

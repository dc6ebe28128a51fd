package heartbeat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// TestRealBroker runs the emitter against Kafka and checks the topic it
// creates and the records it writes.
func TestRealBroker(t *testing.T) {
	c := testkafka.Shared(t, 1)[0]
	topic := testkafka.Topic(t, "heartbeats")
	conn := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...)}
	e, recs := runUntil(t, conn, topic, 1, 100*time.Millisecond, 10)
	checkSpacing(t, recs, 100*time.Millisecond)
	checkCounts(t, e, recs)
	checkHeartbeats(t, recs, "A", "B")

	adm := c.Admin(t)
	ctx := context.Background()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td[topic].Partitions); n != 1 {
		t.Errorf("%s has %d partitions, want 1", topic, n)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range cfg.Configs {
		if kv.Key == "cleanup.policy" {
			found = true
			if kv.MaybeValue() != "compact" {
				t.Errorf("cleanup.policy = %q, want compact", kv.MaybeValue())
			}
		}
	}
	if !found {
		t.Error("no cleanup.policy in the topic configs")
	}
}

func TestRealBrokerReplicationFactor(t *testing.T) {
	c := testkafka.Shared(t, 1)[0]
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := New(cl, kadm.NewClient(cl), testkafka.Topic(t, "heartbeats"), "A", "B", 3, time.Second, nil)
	err := e.Run(ctx)
	if !errors.Is(err, kerr.InvalidReplicationFactor) || !strings.Contains(err.Error(), RFKey) {
		t.Fatalf("Run with RF 3 on one broker: %v; want InvalidReplicationFactor naming %s", err, RFKey)
	}
}

package mirrorclient_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
	"github.com/kmirror/kmirror/mirrorclient"
)

func createTopics(t *testing.T, cl *kgo.Client, partitions int32, topics ...string) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopics(context.Background(), partitions, 1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func newClient(t *testing.T, c *kfake.Cluster, opts ...mirrorclient.Option) *mirrorclient.Client {
	t.Helper()
	mc, err := mirrorclient.New(append([]mirrorclient.Option{mirrorclient.WithSeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}

func TestClientTopology(t *testing.T) {
	c, cl := testkafka.Fake(t)
	createTopics(t, cl, 1, "heartbeats", "A.heartbeats", "B.A.heartbeats", "A.orders", "B.A.orders",
		"local", "A.checkpoints.internal", "mm2-offsets.A.internal")
	mc := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	lists := []struct {
		name string
		fn   func(context.Context) ([]string, error)
		want []string
	}{
		{"HeartbeatTopics", mc.HeartbeatTopics, []string{"A.heartbeats", "B.A.heartbeats", "heartbeats"}},
		{"CheckpointTopics", mc.CheckpointTopics, []string{"A.checkpoints.internal"}},
		{"UpstreamClusters", mc.UpstreamClusters, []string{"A", "B"}},
		{"RemoteTopics", mc.RemoteTopics, []string{"A.heartbeats", "A.orders", "B.A.heartbeats", "B.A.orders"}},
		{"RemoteTopicsFrom(B)", func(ctx context.Context) ([]string, error) { return mc.RemoteTopicsFrom(ctx, "B") },
			[]string{"B.A.heartbeats", "B.A.orders"}},
	}
	for _, l := range lists {
		got, err := l.fn(ctx)
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		if !slices.Equal(got, l.want) {
			t.Errorf("%s = %q, want %q", l.name, got, l.want)
		}
	}
	for alias, want := range map[string]int{"A": 1, "B": 1, "C": -1} {
		got, err := mc.ReplicationHops(ctx, alias)
		if err != nil || got != want {
			t.Errorf("ReplicationHops(%s) = %d, %v; want %d", alias, got, err, want)
		}
	}
}

func TestClientIdentityPolicy(t *testing.T) {
	c, cl := testkafka.Fake(t)
	createTopics(t, cl, 1, "heartbeats", "A.heartbeats", "orders")
	ctx := context.Background()
	tests := []struct {
		name string
		opts []mirrorclient.Option
		want []string
	}{
		{"with alias", []mirrorclient.Option{mirrorclient.WithIdentityPolicy("A")}, []string{"A.heartbeats", "orders"}},
		{"without alias", []mirrorclient.Option{mirrorclient.WithIdentityPolicy("")}, []string{"A.heartbeats"}},
		{"from properties", []mirrorclient.Option{mirrorclient.WithProperties(map[string]string{
			"bootstrap.servers":        strings.Join(c.ListenAddrs(), ","),
			"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
			"source.cluster.alias":     "A",
		})}, []string{"A.heartbeats", "orders"}},
		{"later option wins", []mirrorclient.Option{mirrorclient.WithIdentityPolicy("A"), mirrorclient.WithDefaultPolicy()}, []string{"A.heartbeats"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newClient(t, c, tt.opts...)
			got, err := mc.RemoteTopicsFrom(ctx, "A")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("RemoteTopicsFrom(A) = %q, want %q", got, tt.want)
			}
			if hops, _ := mc.ReplicationHops(ctx, "A"); hops != 1 {
				t.Errorf("ReplicationHops(A) = %d, want 1", hops)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		opts []mirrorclient.Option
	}{
		{"unknown policy", []mirrorclient.Option{mirrorclient.WithProperties(map[string]string{
			"bootstrap.servers": "127.0.0.1:1", "replication.policy.class": "com.example.MyPolicy"})}},
		{"bad boolean", []mirrorclient.Option{mirrorclient.WithProperties(map[string]string{
			"bootstrap.servers": "127.0.0.1:1", "replication.policy.internal.topic.separator.enabled": "yes"})}},
		{"no bootstrap", []mirrorclient.Option{mirrorclient.WithProperties(map[string]string{})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if mc, err := mirrorclient.New(tt.opts...); err == nil {
				mc.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

// produce writes raw records to partition p of topic.
func produce(t *testing.T, cl *kgo.Client, topic string, p int32, kvs ...[2][]byte) {
	t.Helper()
	for _, kv := range kvs {
		r := &kgo.Record{Topic: topic, Partition: p, Key: kv[0], Value: kv[1]}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func checkpoint(t *testing.T, group, topic string, p int32, up, down int64, meta string) [2][]byte {
	t.Helper()
	k, v, err := wire.Encode(wire.Checkpoint{Group: group, Topic: topic, Partition: p, UpstreamOffset: up, DownstreamOffset: down, Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	return [2][]byte{k, v}
}

func TestRemoteConsumerOffsets(t *testing.T) {
	c, cl := testkafka.Fake(t)
	topic := "A.checkpoints.internal"
	createTopics(t, cl, 2, topic)
	good := checkpoint(t, "g1", "A.t", 0, 10, 8, "")
	produce(t, cl, topic, 0,
		checkpoint(t, "g1", "A.t", 0, 5, 4, "old"),
		checkpoint(t, "g1", "A.t", 1, 7, 7, "m"),
		checkpoint(t, "g2", "A.t", 0, 99, 99, ""),
		[2][]byte{[]byte{0, 9, 'x'}, good[1]},              // key string runs past the end
		[2][]byte{good[0], good[1][:5]},                    // truncated value
		[2][]byte{nil, nil},                                // tombstone-like: nothing to decode
		checkpoint(t, "g1", "A.t", 0, 10, 8, ""),           // last for A.t-0 wins
		checkpoint(t, "g1", "B.A.u", 3, 1000, 900, "meta"), // two hops away
	)
	// Only partition 0 is read, as in MM2.
	produce(t, cl, topic, 1, checkpoint(t, "g1", "A.t", 0, 1, 1, ""))

	var logs bytes.Buffer
	mc := newClient(t, c, mirrorclient.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()
	got, err := mc.RemoteConsumerOffsets(ctx, "g1", "A", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[mirrorclient.TopicPartition]int64{{Topic: "A.t", Partition: 0}: 8, {Topic: "A.t", Partition: 1}: 7, {Topic: "B.A.u", Partition: 3}: 900}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for tp, off := range want {
		if got[tp] != off {
			t.Errorf("%s: offset %d, want %d", tp, got[tp], off)
		}
	}
	if n := mc.SkippedRecords(); n != 3 {
		t.Errorf("SkippedRecords = %d, want 3", n)
	}
	if n := strings.Count(logs.String(), "skipping checkpoint record"); n != 3 {
		t.Errorf("logged %d skipped records, want 3:\n%s", n, logs.String())
	}

	cps, err := mc.RemoteCheckpoints(ctx, "g1", "A", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantCp := mirrorclient.Checkpoint{Group: "g1", Topic: "B.A.u", Partition: 3, UpstreamOffset: 1000, DownstreamOffset: 900, Metadata: "meta"}
	if cp := cps[mirrorclient.TopicPartition{Topic: "B.A.u", Partition: 3}]; cp != wantCp {
		t.Errorf("checkpoint %+v, want %+v", cp, wantCp)
	}

	// An unknown group has no offsets.
	if got, err := mc.RemoteConsumerOffsets(ctx, "nope", "A", 10*time.Second); err != nil || len(got) != 0 {
		t.Errorf("unknown group: %v, %v", got, err)
	}

	// TranslateOffsets is the same read with Java client properties.
	props := map[string]string{"bootstrap.servers": strings.Join(c.ListenAddrs(), ",")}
	tr, err := mirrorclient.TranslateOffsets(ctx, props, "A", "g1", 10*time.Second)
	if err != nil || tr[mirrorclient.TopicPartition{Topic: "A.t", Partition: 0}] != 8 {
		t.Errorf("TranslateOffsets = %v, %v", tr, err)
	}
}

func TestRemoteConsumerOffsetsEmptyAndMissing(t *testing.T) {
	c, cl := testkafka.Fake(t)
	createTopics(t, cl, 1, "A.checkpoints.internal", "X__checkpoints__internal")
	mc := newClient(t, c)
	ctx := context.Background()
	if got, err := mc.RemoteConsumerOffsets(ctx, "g1", "A", 10*time.Second); err != nil || len(got) != 0 {
		t.Errorf("empty topic: %v, %v", got, err)
	}
	if _, err := mc.RemoteConsumerOffsets(ctx, "g1", "B", 10*time.Second); err == nil || errors.Is(err, mirrorclient.ErrIncomplete) {
		t.Errorf("missing topic: err = %v, want a not-found error", err)
	}
	// The custom separator names the checkpoints topic.
	mc = newClient(t, c, mirrorclient.WithSeparator("__"))
	if got := mc.CheckpointsTopic("X"); got != "X__checkpoints__internal" {
		t.Errorf("CheckpointsTopic(X) = %q", got)
	}
	if _, err := mc.RemoteConsumerOffsets(ctx, "g1", "X", 10*time.Second); err != nil {
		t.Errorf("custom separator: %v", err)
	}
}

func TestRemoteConsumerOffsetsTimeout(t *testing.T) {
	c, cl := testkafka.Fake(t)
	topic := "A.checkpoints.internal"
	createTopics(t, cl, 1, topic)
	produce(t, cl, topic, 0, checkpoint(t, "g1", "A.t", 0, 5, 4, ""))
	// Fetches never get an answer.
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true
	})
	mc := newClient(t, c)
	start := time.Now()
	got, err := mc.RemoteConsumerOffsets(context.Background(), "g1", "A", 500*time.Millisecond)
	if !errors.Is(err, mirrorclient.ErrIncomplete) {
		t.Fatalf("err = %v, want ErrIncomplete", err)
	}
	if got == nil {
		t.Error("no partial result with ErrIncomplete")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("read took %v with a 500ms timeout", d)
	}
}

package testkafka_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

func TestBrokerVersion(t *testing.T) {
	t.Parallel()
	c := testkafka.Shared(t, 1)[0]
	jars, _ := filepath.Glob(filepath.Join(testkafka.Libs(t), "kafka_2.13-*.jar"))
	want := "kafka_2.13-" + testkafka.KafkaVersion() + ".jar"
	if len(jars) != 1 || filepath.Base(jars[0]) != want {
		t.Fatalf("broker jars %v, want %s", jars, want)
	}
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %s runs Apache Kafka %s (%s); franz-go guesses %s from ApiVersions",
		c.Name, testkafka.KafkaVersion(), filepath.Base(jars[0]),
		kversion.FromApiVersionsResponse(resp).VersionGuess())
}

// TestBrokerLogs guards the pom: without an SLF4J binding that matches
// the resolved slf4j-api, brokers log nothing.
func TestBrokerLogs(t *testing.T) {
	t.Parallel()
	libs := testkafka.Libs(t)
	api, _ := filepath.Glob(filepath.Join(libs, "slf4j-api-*.jar"))
	binding := "log4j-slf4j2-impl-*.jar"
	if len(api) == 1 && strings.HasPrefix(filepath.Base(api[0]), "slf4j-api-1.") {
		binding = "log4j-slf4j-impl-*.jar"
	}
	if m, _ := filepath.Glob(filepath.Join(libs, binding)); len(api) != 1 || len(m) != 1 {
		t.Fatalf("slf4j-api %v needs exactly one %s in %s", api, binding, libs)
	}
	c := testkafka.Shared(t, 1)[0]
	log, err := os.ReadFile(filepath.Join(c.Info().Nodes[0].Dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Kafka version: " + testkafka.KafkaVersion(); !strings.Contains(string(log), want) {
		t.Fatalf("broker log lacks %q", want)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range testkafka.Shared(t, 2) {
		topic := testkafka.Topic(t, "rt")
		c.CreateTopic(t, topic, 3, nil)
		var want []*kgo.Record
		for i := range 30 {
			want = append(want, &kgo.Record{
				Topic:     topic,
				Partition: int32(i % 3),
				Key:       fmt.Appendf(nil, "k%d", i),
				Value:     fmt.Appendf(nil, "v%d@%s", i, c.Name),
				Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}},
			})
		}
		c.Produce(t, want...)
		got := c.ReadAll(t, topic)
		slices.SortStableFunc(want, func(a, b *kgo.Record) int { return int(a.Partition - b.Partition) })
		if len(got) != len(want) {
			t.Fatalf("cluster %s: read %d records, want %d", c.Name, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Partition != w.Partition || string(g.Key) != string(w.Key) ||
				string(g.Value) != string(w.Value) || !reflect.DeepEqual(g.Headers, w.Headers) {
				t.Fatalf("cluster %s record %d: got p%d %s=%s %v, want p%d %s=%s %v", c.Name, i,
					g.Partition, g.Key, g.Value, g.Headers, w.Partition, w.Key, w.Value, w.Headers)
			}
		}
	}
}

// TestReadAllTransactions checks that ReadAll skips aborted records and
// transaction markers and still finds the end of each partition.
func TestReadAllTransactions(t *testing.T) {
	t.Parallel()
	c := testkafka.Shared(t, 1)[0]
	topic := testkafka.Topic(t, "txn")
	c.CreateTopic(t, topic, 1, nil)
	cl := c.Client(t, kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
	ctx := context.Background()
	for _, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			v := fmt.Sprintf("commit=%t/%d", commit, i)
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range c.ReadAll(t, topic) {
		got = append(got, string(r.Value))
	}
	want := []string{"commit=true/0", "commit=true/1", "commit=true/0", "commit=true/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("ReadAll = %q, want %q", got, want)
	}
}

func TestKcatReadsWhatFranzGoWrote(t *testing.T) {
	t.Parallel()
	c := testkafka.Shared(t, 1)[0]
	topic := testkafka.Topic(t, "kcat")
	c.CreateTopic(t, topic, 1, nil)
	var want []string
	var recs []*kgo.Record
	for i := range 5 {
		r := &kgo.Record{
			Topic: topic,
			Key:   fmt.Appendf(nil, "key-%d", i),
			Value: fmt.Appendf(nil, "value %d", i),
			Headers: []kgo.RecordHeader{
				{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)},
				{Key: "origin", Value: []byte("franz-go")},
			},
		}
		recs = append(recs, r)
		want = append(want, fmt.Sprintf("%s|%s|trace=t%d,origin=franz-go", r.Key, r.Value, i))
	}
	c.Produce(t, recs...)
	out := c.Kcat(t, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%k|%s|%h\n`)
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !slices.Equal(got, want) {
		t.Fatalf("kcat read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSecureCluster(t *testing.T) {
	t.Parallel()
	c := testkafka.Start(t, testkafka.Options{Secure: true})[0]
	if len(c.SecureBootstrap) == 0 || c.CAFile == "" || c.Users[c.SuperUser] == "" {
		t.Fatalf("secure cluster info missing: %+v", c)
	}
	topic := testkafka.Topic(t, "sec")
	c.CreateTopic(t, topic, 1, nil) // over PLAINTEXT, as a super user

	tests := []struct {
		mech, user, pass string
		wantAuth         bool // authentication succeeds
		wantWrite        bool // ACLs allow producing to topic
	}{
		{"SCRAM-SHA-512", "admin", c.Users["admin"], true, true},
		{"SCRAM-SHA-512", "admin", "wrong", false, false},
		{"PLAIN", "admin", c.Users["admin"], true, true},
		{"PLAIN", "admin", "wrong", false, false},
		{"SCRAM-SHA-512", "alice", c.Users["alice"], true, false},
		{"PLAIN", "bob", c.Users["bob"], true, false},
		{"SCRAM-SHA-512", "mallory", "x", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.mech+"/"+tt.user+"/"+map[bool]string{true: "right", false: "wrong"}[tt.wantAuth], func(t *testing.T) {
			cl := c.Client(t, append(c.SASL(t, tt.mech, tt.user, tt.pass),
				kgo.RecordRetries(2), kgo.RequestRetries(2))...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := cl.Ping(ctx)
			if tt.wantAuth != (err == nil) {
				t.Fatalf("ping err = %v, want success %t", err, tt.wantAuth)
			}
			if !tt.wantAuth {
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("ping err = %v, want SASL_AUTHENTICATION_FAILED", err)
				}
				return
			}
			err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(tt.user)}).FirstErr()
			if tt.wantWrite && err != nil {
				t.Fatalf("produce as %s: %v", tt.user, err)
			}
			if !tt.wantWrite && !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("produce as %s without ACLs: err = %v, want TOPIC_AUTHORIZATION_FAILED", tt.user, err)
			}
		})
	}

	// An ACL granted by the super user lets alice write.
	acl := kadm.NewACLs().Allow("User:alice").Topics(topic).Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := c.Admin(t).CreateACLs(context.Background(), acl)
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("create ACL: %v", err)
	}
	alice := c.Client(t, c.SASL(t, "SCRAM-SHA-512", "alice", c.Users["alice"])...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := alice.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("alice")}).FirstErr()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce as alice with a write ACL: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // ACL still propagating
	}
}

// TestThreeNodeFailover kills the leader of an RF 3, min.insync.replicas 2
// topic: acks=all writes keep working, another node leads, and the killed
// node rejoins the ISR after a restart.
func TestThreeNodeFailover(t *testing.T) {
	t.Parallel()
	c := testkafka.Start(t, testkafka.Options{Nodes: 3})[0]
	if got := c.Nodes(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("nodes = %v", got)
	}
	topic := testkafka.Topic(t, "ha")
	c.CreateTopic(t, topic, 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	// partition reads the topic's one partition from metadata, waiting
	// while it has no leader (just created, or during an election).
	partition := func() kadm.PartitionDetail {
		t.Helper()
		cl := c.Client(t)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			cancel()
			if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == 1 &&
				resp.Topics[0].Partitions[0].ErrorCode == 0 && resp.Topics[0].Partitions[0].Leader >= 0 {
				p := resp.Topics[0].Partitions[0]
				return kadm.PartitionDetail{Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR}
			}
			if time.Now().After(deadline) {
				t.Fatalf("metadata of %s: %v %+v", topic, err, resp)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	before := partition()
	if len(before.Replicas) != 3 {
		t.Fatalf("replicas = %v, want 3", before.Replicas)
	}
	victim := before.Leader
	c.Produce(t, &kgo.Record{Topic: topic, Value: []byte("before")})

	c.KillNode(t, victim)
	c.Produce(t, &kgo.Record{Topic: topic, Value: []byte("during")}) // acks=all with 2 of 3 in sync
	after := partition()
	if after.Leader == victim || after.Leader < 0 {
		t.Fatalf("leader after killing node %d = %d", victim, after.Leader)
	}
	t.Logf("killed leader %d; new leader %d, ISR %v", victim, after.Leader, after.ISR)

	c.StartNode(t, victim)
	deadline := time.Now().Add(time.Minute)
	for !slices.Contains(partition().ISR, victim) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d did not rejoin the ISR: %+v", victim, partition())
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.Produce(t, &kgo.Record{Topic: topic, Value: []byte("after")})
	var got []string
	for _, r := range c.ReadAll(t, topic) {
		got = append(got, string(r.Value))
	}
	if want := []string{"before", "during", "after"}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

func TestTopicNamesAreUnique(t *testing.T) {
	a, b := testkafka.Topic(t, "x"), testkafka.Topic(t, "x")
	if a == b || strings.ContainsAny(a, "./") || !strings.HasPrefix(a, "x-TestTopicNamesAreUnique-") {
		t.Fatalf("Topic() = %q, %q", a, b)
	}
}

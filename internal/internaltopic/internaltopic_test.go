package internaltopic

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreate(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	created, err := Create(ctx, adm, Compacted("t.internal", 1, "x.replication.factor"))
	if err != nil || !created {
		t.Fatalf("first create: created %v, err %v", created, err)
	}
	created, err = Create(ctx, adm, Compacted("t.internal", 1, "x.replication.factor"))
	if err != nil || created {
		t.Fatalf("second create: created %v, err %v; want an existing topic to be fine", created, err)
	}
	n, err := Partitions(ctx, adm, "t.internal")
	if err != nil || n != 1 {
		t.Fatalf("Partitions = %d, %v", n, err)
	}
	_, err = Create(ctx, adm, Compacted("other.internal", 3, "x.replication.factor"))
	if err == nil || !strings.Contains(err.Error(), "key x.replication.factor") {
		t.Fatalf("replication factor 3 on one broker: %v; want an error naming the key", err)
	}
}

// TestCreateRetriesTransient: a target that cannot answer for a while (a
// broker that closes the connection, no controller yet, a request timing
// out) does not fail Create; a refusal fails it at the first answer.
func TestCreateRetriesTransient(t *testing.T) {
	closed := errors.New("connection closed by the test")
	for _, tt := range []struct {
		name     string
		fail     func(*kmsg.CreateTopicsRequest) (kmsg.Response, error)
		failures int64
		brokers  int    // of the cluster; 1 if 0
		rf       int16  // of the topic; 1 if 0
		wantErr  string // "" means created
	}{
		{name: "connection closed", failures: 3, fail: func(*kmsg.CreateTopicsRequest) (kmsg.Response, error) { return nil, closed }},
		{name: "not controller", failures: 3, fail: answer(kerr.NotController.Code)},
		{name: "request timed out", failures: 2, fail: answer(kerr.RequestTimedOut.Code)},
		{name: "policy refusal", failures: 1 << 20, fail: answer(kerr.PolicyViolation.Code), wantErr: "POLICY_VIOLATION"},
		// A broker of three in controlled shutdown (a rolling restart).
		{name: "replication factor refused, the cluster has the brokers", brokers: 3, rf: 3, failures: 3, fail: answer(kerr.InvalidReplicationFactor.Code)},
		{name: "replication factor larger than the cluster", brokers: 2, rf: 3, failures: 1 << 20, fail: answer(kerr.InvalidReplicationFactor.Code),
			wantErr: "replication factor 3 (key x.replication.factor)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(max(tt.brokers, 1)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var calls atomic.Int64
			c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if calls.Add(1) > tt.failures {
					return nil, nil, false
				}
				resp, err := tt.fail(req.(*kmsg.CreateTopicsRequest))
				return resp, err, true
			})
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			created, err := Create(context.Background(), kadm.NewClient(cl), Compacted("t.internal", max(tt.rf, 1), "x.replication.factor"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || calls.Load() != 1 {
					t.Fatalf("Create = %v after %d attempts; want %s at the first", err, calls.Load(), tt.wantErr)
				}
				return
			}
			if err != nil || !created {
				t.Fatalf("Create = %v, %v after %d attempts; want created once the target answers", created, err, calls.Load())
			}
		})
	}
}

// answer makes a CreateTopics answer with code for every topic.
func answer(code int16) func(*kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	return func(req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
}

// TestBrokersFor: a refused replication factor is waited for only when
// the cluster knows enough brokers for it, those that answer and those
// its topics' replicas name.
func TestBrokersFor(t *testing.T) {
	meta := func(live []int32, replicas ...[]int32) kadm.Metadata {
		m := kadm.Metadata{Topics: kadm.TopicDetails{}}
		for _, id := range live {
			m.Brokers = append(m.Brokers, kadm.BrokerDetail{NodeID: id})
		}
		ps := kadm.PartitionDetails{}
		for i, rs := range replicas {
			ps[int32(i)] = kadm.PartitionDetail{Partition: int32(i), Replicas: rs}
		}
		m.Topics["t"] = kadm.TopicDetail{Topic: "t", Partitions: ps}
		return m
	}
	for _, tt := range []struct {
		name string
		m    kadm.Metadata
		rf   int16
		want bool
	}{
		{"all three answer (one in controlled shutdown)", meta([]int32{1, 2, 3}, []int32{1, 2, 3}), 3, true},
		{"one of three restarting", meta([]int32{1, 2}, []int32{1, 2, 3}), 3, true},
		{"the away broker only in another partition", meta([]int32{1, 2}, []int32{1, 2}, []int32{2, 3}), 3, true},
		{"a one-broker cluster", meta([]int32{1}, []int32{1}), 3, false},
		{"no topics to tell", meta([]int32{1, 2}), 3, false},
		{"two of four known, three wanted", meta([]int32{1}, []int32{1, 4}), 3, false},
		{"the broker default", meta([]int32{1, 2}, []int32{1, 2, 3}), -1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := brokersFor(tt.m, tt.rf); got != tt.want {
				t.Errorf("brokersFor(rf %d) = %v, want %v", tt.rf, got, tt.want)
			}
		})
	}
}

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
		wantErr  string // "" means created
	}{
		{name: "connection closed", failures: 3, fail: func(*kmsg.CreateTopicsRequest) (kmsg.Response, error) { return nil, closed }},
		{name: "not controller", failures: 3, fail: answer(kerr.NotController.Code)},
		{name: "request timed out", failures: 2, fail: answer(kerr.RequestTimedOut.Code)},
		{name: "policy refusal", failures: 1 << 20, fail: answer(kerr.PolicyViolation.Code), wantErr: "POLICY_VIOLATION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
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
			created, err := Create(context.Background(), kadm.NewClient(cl), Compacted("t.internal", 1, "x.replication.factor"))
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

package checkpoint

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

// TestCreateTopicRetried: a worker that starts leading a flow while the
// target cannot create topics (no answer in time, no controller) waits
// for it instead of stopping the flow, and with it the worker; so does a
// replication factor the cluster has the brokers for. A refusal that will
// not pass ends the task with the key to fix.
func TestCreateTopicRetried(t *testing.T) {
	for _, tt := range []struct {
		name     string
		code     int16
		failures int64
		rf       int16  // of the checkpoints topic; 1 (the fake's one broker) if 0
		wantErr  string // "" means the task runs
	}{
		{name: "request timed out", code: kerr.RequestTimedOut.Code, failures: 3},
		{name: "no leader yet", code: kerr.LeaderNotAvailable.Code, failures: 2},
		// The cluster has the broker: refused while it is in controlled
		// shutdown (a rolling restart).
		{name: "replication factor refused for now", code: kerr.InvalidReplicationFactor.Code, failures: 3},
		{name: "replication factor larger than the cluster", code: kerr.InvalidReplicationFactor.Code, failures: 1 << 20, rf: 3, wantErr: "checkpoints.topic.replication.factor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, _ := testkafka.Fake(t)
			dst, dstCl := testkafka.Fake(t)
			var calls atomic.Int64
			dst.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
				dst.KeepControl()
				if calls.Add(1) > tt.failures {
					return nil, nil, false
				}
				cr := req.(*kmsg.CreateTopicsRequest)
				resp := cr.ResponseKind().(*kmsg.CreateTopicsResponse)
				for _, rt := range cr.Topics {
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic, st.ErrorCode = rt.Topic, tt.code
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			f := testFlow(src.ListenAddrs(), dst.ListenAddrs(), "exact")
			if tt.rf > 0 {
				f.CheckpointsTopicReplicationFactor = tt.rf
			}
			task, err := New(Config{Flow: f, Metrics: metrics.New()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- task.Run(ctx) }()
			if tt.wantErr != "" {
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("Run returned %v, want an error naming %s", err, tt.wantErr)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("Run still retrying a refusal after 30 s")
				}
				return
			}
			adm := kadm.NewClient(dstCl)
			testwait.For(t, 30*time.Second, "the checkpoints topic created after the failures", func() bool {
				select {
				case err := <-done:
					t.Fatalf("Run ended after %d create attempts: %v", calls.Load(), err)
				default:
				}
				td, err := adm.ListTopics(ctx, "A.checkpoints.internal")
				return err == nil && td["A.checkpoints.internal"].Err == nil
			})
			if n := calls.Load(); n <= tt.failures {
				t.Errorf("%d create attempts, want more than the %d failed", n, tt.failures)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
		})
	}
}

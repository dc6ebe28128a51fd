package heartbeat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

// TestFailuresRateLimited: N heartbeats the target refuses for one cause
// log one line, then only lines that count them (lograte), not one line
// each nor the first alone.
func TestFailuresRateLimited(t *testing.T) {
	for _, n := range []int{1, 3, 20} {
		t.Run(fmt.Sprintf("%d refused", n), func(t *testing.T) {
			c, cl := testkafka.Fake(t)
			var logs testkafka.Logs
			e := New(cl, kadm.NewClient(cl), "heartbeats", "A", "B", 1, time.Millisecond, logs.Logger())
			if err := e.CreateTopic(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkafka.FailProduce(c, kerr.TopicAuthorizationFailed, n)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			// The target accepts heartbeats again after n refusals.
			testwait.For(t, 30*time.Second, "a heartbeat written after the refusals", func() bool { return e.Sent() > 0 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			failed := e.Failed()
			if failed < int64(n) {
				t.Fatalf("%d heartbeats failed, want at least %d", failed, n)
			}
			logs.CheckLimited(t, "heartbeat not written", failed)
		})
	}
}

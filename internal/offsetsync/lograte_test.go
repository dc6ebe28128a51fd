package offsetsync

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestFailuresRateLimited: N offset syncs the target refuses for one
// cause log one line, then only lines that count them (lograte), not one
// line each.
func TestFailuresRateLimited(t *testing.T) {
	for _, n := range []int{1, 3, 20} {
		t.Run(fmt.Sprintf("%d refused", n), func(t *testing.T) {
			c, cl := testkafka.Fake(t, kfake.SeedTopics(1, "syncs"))
			testkafka.FailProduce(c, kerr.TopicAuthorizationFailed, -1)
			var logs testkafka.Logs
			var failed atomic.Int64
			w := New(cl, "syncs", 100, logs.Logger(), func() { failed.Add(1) })
			for p := range n {
				// The first record of a partition is due at once.
				w.Acked("t", int32(p), 0, 0)
			}
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := failed.Load(); got != int64(n) {
				t.Fatalf("%d syncs failed, want %d", got, n)
			}
			logs.CheckLimited(t, "offset sync not written", int64(n))
		})
	}
}

package checkpoint

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestFailuresRateLimited: a source that refuses the committed offsets of
// every group at every interval logs the first failure, then only lines
// that count them (lograte), not one line per group and interval.
func TestFailuresRateLimited(t *testing.T) {
	for _, tt := range []struct{ groups, intervals int }{{1, 1}, {20, 1}, {20, 3}} {
		t.Run(fmt.Sprintf("%d groups, %d intervals", tt.groups, tt.intervals), func(t *testing.T) {
			src, _ := testkafka.Fake(t)
			dst, dstCl := testkafka.Fake(t)
			if _, err := kadm.NewClient(dstCl).CreateTopic(context.Background(), 1, 1, nil, "A.checkpoints.internal"); err != nil {
				t.Fatal(err)
			}
			src.ControlKey(int16(kmsg.OffsetFetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				src.KeepControl()
				req := kr.(*kmsg.OffsetFetchRequest)
				resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
				resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
				for _, g := range req.Groups {
					rg := kmsg.NewOffsetFetchResponseGroup()
					rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
					resp.Groups = append(resp.Groups, rg)
				}
				return resp, nil, true
			})
			var logs testkafka.Logs
			task, err := New(Config{Flow: testFlow(src.ListenAddrs(), dst.ListenAddrs(), "exact"), Metrics: metrics.New(), Log: logs.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.groups {
				task.listed = append(task.listed, fmt.Sprintf("g%d", i))
			}
			for range tt.intervals {
				task.EmitOnce(context.Background())
			}
			logs.CheckLimited(t, "fetching committed offsets on the source failed", int64(tt.groups*tt.intervals))
		})
	}
}

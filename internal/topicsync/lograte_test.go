package topicsync

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestFailuresRateLimited: a remote topic the target refuses to create
// at every sync logs one line, then only lines that count the failures
// (lograte), not one line per sync.
func TestFailuresRateLimited(t *testing.T) {
	for _, n := range []int{1, 3, 20} {
		t.Run(fmt.Sprintf("%d syncs", n), func(t *testing.T) {
			_, srcCl := testkafka.Fake(t, kfake.SeedTopics(1, "t1"))
			dst, dstCl := testkafka.Fake(t)
			dst.ControlKey(int16(kmsg.CreateTopics), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				dst.KeepControl()
				req := kr.(*kmsg.CreateTopicsRequest)
				resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic, st.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			p, f := defaultPolicy(t, "t.*")
			var logs testkafka.Logs
			s := &Syncer{Source: kadm.NewClient(srcCl), Target: kadm.NewClient(dstCl), TargetClient: dstCl,
				SourceAlias: "A", TargetAlias: "B", Policy: p, Topics: f, ReplicationFactor: -1, Log: logs.Logger()}
			for range n {
				ts, err := s.Sync(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(ts) != 1 || !strings.Contains(ts[0].Err, "cannot create the remote topic") {
					t.Fatalf("Sync = %+v, want A.t1 not created", ts)
				}
			}
			logs.CheckLimited(t, "cannot create remote topic", int64(n))
		})
	}
}

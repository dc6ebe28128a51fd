package passthrough

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestFetchErrorsDoNotFlood: an authorization error on 5,000 partitions
// (an ACL revoked) logs a handful of lines, each after the first with the
// count, not 5,000; another cause is still logged at once.
func TestFetchErrorsDoNotFlood(t *testing.T) {
	var buf bytes.Buffer
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(&buf, nil))})
	fail := func(i int, code int16) {
		p := &partition{tp: progress.TP{Topic: "t", Partition: int32(i)}}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.ErrorCode = code
		pl.fetched(context.Background(), fetchAsk{p: p}, &rp)
	}
	const n = 5000
	for i := range n {
		fail(i, kerr.TopicAuthorizationFailed.Code)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) > 14 { // the first, then at 2, 4, ..., 4096
		t.Fatalf("%d lines for %d failures:\n%s", len(lines), n, buf.String())
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "count=4096") || !strings.Contains(last, "suppressed=2047") {
		t.Fatalf("last line %q, want count=4096 suppressed=2047", last)
	}
	buf.Reset()
	fail(0, kerr.ClusterAuthorizationFailed.Code)
	if !strings.Contains(buf.String(), "CLUSTER_AUTHORIZATION_FAILED") || strings.Contains(buf.String(), "count=") {
		t.Fatalf("another cause: %q, want it logged as a first line", buf.String())
	}
}

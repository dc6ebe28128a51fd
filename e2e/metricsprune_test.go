package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestDeletedTopicsLeaveNoSeries creates and deletes source topics twice
// while kmirror copies them: once a topic is gone (and /status lists none
// of its partitions), /metrics has no series of its partitions left, so
// the series count goes back down instead of growing with every topic
// ever copied.
func TestDeletedTopicsLeaveNoSeries(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{"passthrough", nil},
		{"re-encode", []string{reencodeAll}},
	} {
		t.Run(tt.name, func(t *testing.T) { deletedTopicsLeaveNoSeries(t, tt.extra) })
	}
}

func deletedTopicsLeaveNoSeries(t *testing.T, extra []string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	base := testkafka.Topic(t, "churn")
	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{src + "->" + dst + ".topics = " + base + "-.*"}, extra...)...))
	metricsAddr := freeAddr(t)
	p := startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	defer p.stop()

	// series counts the per-partition series of the test's remote topics.
	series := func() (int, string) {
		code, body := httpGet("http://" + metricsAddr + "/metrics")
		if code != 200 {
			return -1, body
		}
		n := 0
		var names []string
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "#") && strings.Contains(line, `topic="`+src+"."+base) {
				n++
				names = append(names, line)
			}
		}
		return n, strings.Join(names, "\n")
	}
	const topics, parts = 5, 2
	var left string
	defer func() {
		if t.Failed() {
			t.Logf("series of the test's topics left:\n%s", left)
		}
	}()
	for round := range 2 {
		var names []string
		for i := range topics {
			name := fmt.Sprintf("%s-%d-%d", base, round, i)
			a.CreateTopic(t, name, parts, nil)
			produceN(t, a, name, parts, 4, "r")
			names = append(names, name)
		}
		for _, name := range names {
			waitFor(t, 60*time.Second, "records of "+name+" on the target", func() bool { return countOrZero(t, b, src+"."+name) == 4 })
		}
		var during string
		waitFor(t, 30*time.Second, "record_count series of every partition", func() bool {
			_, during = series()
			return strings.Count(during, "kafka_connect_mirror_source_connector_record_count{") == topics*parts
		})
		if _, err := a.Admin(t).DeleteTopics(ctx(t), names...); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, fmt.Sprintf("no series left of the deleted topics (round %d)", round+1), func() bool {
			var n int
			n, left = series()
			return n == 0
		})
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestPartitionHealth runs kmirror on a plain and a transactional topic,
// then kills the target while the source grows: every partition is
// running with lag 0 once copied (transaction markers included), then
// stalled in /flows, the metrics and /ready while the target is down,
// and running again after it returns, with every record copied once.
func TestPartitionHealth(t *testing.T) {
	t.Parallel()
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		partitionHealth(t)
	})
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		partitionHealth(t, reencodeAll)
	})
}

func partitionHealth(t *testing.T, extra ...string) {
	cs := testkafka.Start(t, testkafka.Options{Clusters: 2, Nodes: 1})
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "health")
	a.CreateTopic(t, topic, 2, nil)
	produceFailoverWorkload(t, a, topic, 200, 50, 5) // p0 plain, p1 transactions

	addr, metricsAddr := freeAddr(t), freeAddr(t)
	src, dst := alias(t, "src"), alias(t, "dst")
	name := src + "->" + dst
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{
		name + ".topics = " + topic,
		"kmirror.rest.listener = " + addr, "kmirror.rest.auth = none",
		"kmirror.partition.stall.timeout.ms = 4000",
		"kmirror.partition.lag.threshold.ms = 2000",
	}, extra...)...))
	p := startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	remote := src + "." + topic

	get := httpGet
	type part struct {
		Partition int32  `json:"partition"`
		State     string `json:"state"`
		Lag       int64  `json:"lag"`
		SourceEnd int64  `json:"source_end"`
	}
	parts := func() []part {
		_, out := get("http://" + addr + "/flows/" + name)
		var st struct {
			Partitions []part `json:"partitions"`
		}
		json.Unmarshal([]byte(out), &st)
		return st.Partitions
	}
	all := func(state string, lag0 bool) func() bool {
		return func() bool {
			ps := parts()
			for _, x := range ps {
				if x.State != state || (lag0 && (x.Lag != 0 || x.SourceEnd <= 0)) {
					return false
				}
			}
			return len(ps) == 2
		}
	}
	ready := func() int { code, _ := get("http://" + addr + "/ready"); return code }
	stateMetric := func(p int, state string) string {
		return fmt.Sprintf(`kmirror_partition_state{partition="%d",source=%q,state=%q,target=%q,topic=%q} 1`, p, src, state, dst, remote)
	}
	metricsHave := func(want ...string) func() bool {
		return func() bool {
			_, m := get("http://" + metricsAddr + "/metrics")
			for _, w := range want {
				if !strings.Contains(m, w) {
					return false
				}
			}
			return true
		}
	}

	waitFor(t, 60*time.Second, "all records copied", func() bool { return countOrZero(t, b, remote) == 250 })
	waitFor(t, 30*time.Second, "both partitions running with lag 0 (p1 ends in a commit marker)", all("running", true))
	if code := ready(); code != 200 {
		t.Errorf("/ready %d while every partition runs", code)
	}
	waitFor(t, 20*time.Second, "running in the metrics", metricsHave(stateMetric(0, "running"), stateMetric(1, "running"),
		fmt.Sprintf(`kmirror_partition_lag_records{partition="1",source=%q,target=%q,topic=%q} 0`, src, dst, remote)))

	b.KillNode(t, b.Nodes()[0])
	produceN(t, a, topic, 1, 100, "while-down") // p0 only
	waitFor(t, 60*time.Second, "p0 stalled while the target is down", func() bool {
		for _, x := range parts() {
			if x.Partition == 0 {
				return x.State == "stalled" && x.Lag > 0
			}
		}
		return false
	})
	waitFor(t, 20*time.Second, "stalled in the metrics", metricsHave(stateMetric(0, "stalled")))
	if code := ready(); code != 503 {
		t.Errorf("/ready %d while a partition is stalled, want 503", code)
	}

	b.StartNode(t, b.Nodes()[0])
	waitFor(t, 120*time.Second, "records after the target returned", func() bool { return countOrZero(t, b, remote) == 350 })
	waitFor(t, 60*time.Second, "running again", all("running", true))
	waitFor(t, 20*time.Second, "/ready 200 again", func() bool { return ready() == 200 })
	p.stop()
	sameRecords(t, a.ReadAll(t, topic), b.ReadAll(t, remote), "")
}

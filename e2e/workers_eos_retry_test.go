package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestWorkersExactlyOnceSlotRetry runs exactly-once in group mode into a
// target whose ACLs deny kmirror's user the transactional IDs, so every
// slot's InitProducerID fails: the partitions must show as stopped with
// the reason in the status, in the metrics, and fail /ready, and the slots
// must be retried. Once the ACL is granted, the worker takes the slots
// without a rebalance and copies every record exactly once.
func TestWorkersExactlyOnceSlotRetry(t *testing.T) {
	a := testkafka.Shared(t, 1)[0]
	sec := testkafka.Start(t, testkafka.Options{Clusters: 1, Nodes: 1, Secure: true})[0]
	info := sec.Info()
	adm := sec.Admin(t) // PLAINTEXT: a super user
	grant := func(acl *kadm.ACLBuilder) {
		rs, err := adm.CreateACLs(ctx(t), acl.ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAll).Allow("User:alice"))
		if err == nil {
			for _, r := range rs {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Everything but transactional IDs.
	grant(kadm.NewACLs().Topics("*").Groups("*").Clusters())

	topic := testkafka.Topic(t, "eosretry")
	a.CreateTopic(t, topic, 4, nil)
	produceN(t, a, topic, 4, 400, "r")

	src, dst := alias(t, "src"), "secure"
	name := src + "->" + dst
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	cfg := writeFile(t, "mm2.properties", strings.Join([]string{
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
		dst + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
		dst + ".security.protocol = SASL_SSL",
		dst + ".sasl.mechanism = SCRAM-SHA-512",
		dst + `.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="` + sec.Users["alice"] + `";`,
		dst + ".ssl.truststore.type = PEM",
		dst + ".ssl.truststore.location = " + info.CAFile,
		name + ".enabled = true",
		name + ".topics = " + topic,
		dst + "->" + src + ".emit.heartbeats.enabled = false",
		"replication.factor = 1", "offset-syncs.topic.replication.factor = 1", "offset.storage.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1", "checkpoints.topic.replication.factor = 1",
		"kmirror.workers = group",
		name + ".kmirror.exactly.once.slots = 2",
		dst + ".exactly.once.source.support = enabled",
		src + ".consumer.session.timeout.ms = 6000",
		src + ".consumer.heartbeat.interval.ms = 500",
		"kmirror.rest.listener = " + addr, "kmirror.rest.auth = none",
	}, "\n")+"\n")
	w := startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	remote := src + "." + topic

	get := func(url string) (int, string) {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	type part struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		State     string `json:"state"`
		Error     string `json:"error"`
	}
	// The flow also copies every heartbeats topic other tests left on the
	// shared source (as MM2 does); the test's own are its topic's 4.
	flowParts := func() []part {
		_, out := get("http://" + addr + "/flows/" + name)
		var st struct {
			Partitions []part `json:"partitions"`
		}
		json.Unmarshal([]byte(out), &st)
		return st.Partitions
	}
	parts := func() []part {
		var ps []part
		for _, p := range flowParts() {
			if p.Topic == topic {
				ps = append(ps, p)
			}
		}
		return ps
	}
	all := func(cond func(p part) bool) bool {
		ps := parts()
		for _, p := range ps {
			if !cond(p) {
				return false
			}
		}
		return len(ps) == 4
	}
	metric := func(name string) float64 {
		_, m := get("http://" + metricsAddr + "/metrics")
		re := regexp.MustCompile(`(?m)^` + name + `\{source="` + src + `",target="` + dst + `"\} (\S+)$`)
		if g := re.FindStringSubmatch(m); g != nil {
			v, _ := strconv.ParseFloat(g[1], 64)
			return v
		}
		return -1
	}
	ready := func() int { code, _ := get("http://" + addr + "/ready"); return code }

	// While InitProducerID is refused.
	waitFor(t, 90*time.Second, "every partition stopped, naming the transactional ID authorization", func() bool {
		return all(func(p part) bool {
			return p.State == "stopped" && strings.Contains(p.Error, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") && strings.Contains(p.Error, "slot")
		})
	})
	t.Logf("status while refused: %+v", parts()[0])
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("/ready answered %d while no partition can be copied, want 503", code)
	}
	// Status and metric are read apart; other heartbeats topics may join.
	var waiting int
	var gauge float64
	waitFor(t, 15*time.Second, "kmirror_exactly_once_partitions_waiting to count the partitions stopped", func() bool {
		waiting = 0
		for _, p := range flowParts() {
			if p.State == "stopped" {
				waiting++
			}
		}
		gauge = metric("kmirror_exactly_once_partitions_waiting")
		return gauge == float64(waiting) && waiting >= 4
	})
	t.Logf("kmirror_exactly_once_partitions_waiting %v: %d partitions stopped", gauge, waiting)
	// Two slots, each retried: more failures than slots.
	waitFor(t, 30*time.Second, "the slots to be retried", func() bool { return metric("kmirror_exactly_once_slot_init_failures_total") > 2 })
	if n := countOrZero(t, sec, remote); n != 0 {
		t.Errorf("%d records on the target while no slot is taken", n)
	}
	if !strings.Contains(w.log.String(), "could not be fenced") {
		t.Error("the log does not say the slots could not be taken")
	}

	// The cause removed: the retries take the slots, with no rebalance.
	grant(kadm.NewACLs().TransactionalIDs("*"))
	want := a.ReadAll(t, topic)
	waitFor(t, 90*time.Second, "every record copied after the ACL was granted", func() bool { return hasAllKeys(t, sec, remote, want) })
	waitFor(t, 30*time.Second, "every partition running", func() bool {
		return all(func(p part) bool { return p.State == "running" })
	})
	if code := ready(); code != http.StatusOK {
		t.Errorf("/ready answered %d with every partition copied, want 200", code)
	}
	if v := metric("kmirror_exactly_once_partitions_waiting"); v != 0 {
		t.Errorf("kmirror_exactly_once_partitions_waiting %v after the ACL was granted, want 0", v)
	}
	failures := metric("kmirror_exactly_once_slot_init_failures_total")
	w.stop()
	got := sec.ReadAll(t, remote) // read_committed
	dups := checkNoLoss(t, want, got)
	if dups != 0 || len(got) != len(want) {
		t.Errorf("%d duplicates, %d records on the target for %d on the source; want 0 and the same count", dups, len(got), len(want))
	}
	sameRecords(t, want, got, "")
	t.Log(fmt.Sprintf("%d slot init failures before the ACL was granted; then %d records copied exactly once", int(failures), len(got)))
}

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestWorkersExactlyOnceSlotRetry runs exactly-once in group mode into a
// target whose ACLs deny kmirror's user the transactional IDs, so every
// slot's InitProducerID fails: the partitions must show as fencing with
// the reason in the status and in kmirror_partition_state, be counted in
// the exactly-once metrics, and fail /ready, and the slots must be
// retried. Once the ACL is granted, the worker takes the slots without a
// rebalance, the partitions run and every record is copied exactly once.
// It runs with batches forwarded (the default) and re-encoded.
func TestWorkersExactlyOnceSlotRetry(t *testing.T) {
	t.Parallel()
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		slotRetry(t)
	})
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		slotRetry(t, reencodeAll)
	})
}

func slotRetry(t *testing.T, extra ...string) {
	a := testkafka.Shared(t, 1)[0]
	// One of the shared secure pair; kmirror logs in as a user of this
	// (sub)test's own, so its wildcard grants reach no other test.
	sec := testkafka.SharedSecure(t)[1]
	info := sec.Info()
	user := testkafka.Topic(t, "kmirror")
	password := sec.AddUser(t, user)
	grant := func(acl *kadm.ACLBuilder) {
		sec.Grant(t, acl.ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAll).Allow("User:"+user))
	}
	// Everything but transactional IDs.
	grant(kadm.NewACLs().Topics("*").Groups("*").Clusters())

	topic := testkafka.Topic(t, "eosretry")
	a.CreateTopic(t, topic, 4, nil)
	produceN(t, a, topic, 4, 400, "r")

	src, dst := alias(t, "src"), "secure"
	name := src + "->" + dst
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	cfg := writeFile(t, "mm2.properties", strings.Join(append([]string{
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
		dst + ".bootstrap.servers = " + strings.Join(info.SecureBootstrap, ","),
		dst + ".security.protocol = SASL_SSL",
		dst + ".sasl.mechanism = SCRAM-SHA-512",
		dst + `.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="` + user + `" password="` + password + `";`,
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
	}, extra...), "\n")+"\n")
	w := startKmirror(t, "--metrics-addr", metricsAddr, cfg)
	remote := src + "." + topic

	// The flow also copies every heartbeats topic other tests left on the
	// shared source (as MM2 does); the test's own are its topic's 4.
	parts := func() []statusPart {
		var ps []statusPart
		for _, p := range flowParts(addr, name) {
			if p.Topic == topic {
				ps = append(ps, p)
			}
		}
		return ps
	}
	all := func(cond func(p statusPart) bool) bool {
		ps := parts()
		for _, p := range ps {
			if !cond(p) {
				return false
			}
		}
		return len(ps) == 4
	}
	metric := func(name string) float64 {
		return metricValue(metricsAddr, name, `source="`+src+`",target="`+dst+`"`)
	}
	// kmirror_partition_state of the topic's partitions in state.
	stateSeries := func(state string) []float64 {
		var vs []float64
		for p := range 4 {
			vs = append(vs, metricValue(metricsAddr, "kmirror_partition_state",
				fmt.Sprintf(`partition="%d",source="%s",state="%s",target="%s",topic="%s"`, p, src, state, dst, remote)))
		}
		return vs
	}
	allOne := func(vs []float64) bool { return !slices.ContainsFunc(vs, func(v float64) bool { return v != 1 }) }
	ready := func() int { code, _ := httpGet("http://" + addr + "/ready"); return code }

	// While InitProducerID is refused.
	waitFor(t, 90*time.Second, "every partition fencing, naming the transactional ID authorization", func() bool {
		return all(func(p statusPart) bool {
			return p.State == "fencing" && strings.Contains(p.Error, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") && strings.Contains(p.Error, "slot")
		})
	})
	t.Logf("status while refused: %+v", parts()[0])
	waitFor(t, 30*time.Second, `kmirror_partition_state{state="fencing"} 1 for every partition`, func() bool { return allOne(stateSeries("fencing")) })
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("/ready answered %d while no partition can be copied, want 503", code)
	}
	// Status and metric are read apart; other heartbeats topics may join.
	var waiting int
	var gauge float64
	waitFor(t, 15*time.Second, "kmirror_exactly_once_partitions_waiting to count the partitions fencing", func() bool {
		waiting = 0
		for _, p := range flowParts(addr, name) {
			if p.State == "fencing" {
				waiting++
			}
		}
		gauge = metric("kmirror_exactly_once_partitions_waiting")
		return gauge == float64(waiting) && waiting >= 4
	})
	t.Logf("kmirror_exactly_once_partitions_waiting %v: %d partitions fencing", gauge, waiting)
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
		return all(func(p statusPart) bool { return p.State == "running" })
	})
	waitFor(t, 30*time.Second, `kmirror_partition_state{state="running"} 1 for every partition`, func() bool { return allOne(stateSeries("running")) })
	if vs := stateSeries("fencing"); slices.Contains(vs, 1) {
		t.Errorf(`kmirror_partition_state{state="fencing"} %v once the slots are taken, want 0`, vs)
	}
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
	dataPathRan(t, extra, w)
	t.Log(fmt.Sprintf("%d slot init failures before the ACL was granted; then %d records copied exactly once", int(failures), len(got)))
}

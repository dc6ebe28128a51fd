package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

func produceN(t *testing.T, c *testkafka.Cluster, topic string, partitions int32, n int, tag string) {
	t.Helper()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: []byte(fmt.Sprintf("%s-%d", tag, i)), Value: []byte(tag)})
	}
	// A topic created a moment ago (or deleted and created again) may be
	// unknown to its leader for a while: retry until ctx ends. Partitions
	// just added are in the broker's metadata only once it applied the
	// controller's record: the producer's first metadata must list them,
	// or the manual partitioner refuses the records for them.
	adm := c.Admin(t)
	testwait.For(t, 30*time.Second, fmt.Sprintf("%d partitions of %s in the metadata", partitions, topic), func() bool {
		td, err := adm.ListTopics(ctx(t), topic)
		return err == nil && len(td[topic].Partitions) >= int(partitions)
	})
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.UnknownTopicRetries(-1))
	if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func topicNames(t *testing.T, c *testkafka.Cluster) map[string]bool {
	td, err := c.Admin(t).ListTopics(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for name := range td {
		out[name] = true
	}
	return out
}

// TestTopicSelectionAndNaming covers topics.exclude and a custom separator,
// and checks that the remote topic gets the source's partitions and configs.
func TestTopicSelectionAndNaming(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	prefix := testkafka.Topic(t, "sel")
	keep, skip := prefix+"-keep", prefix+"-skip-test"
	retention := "123456789"
	a.CreateTopic(t, keep, 4, map[string]*string{"retention.ms": &retention})
	a.CreateTopic(t, skip, 1, nil)
	produceN(t, a, keep, 4, 20, "k")
	produceN(t, a, skip, 1, 20, "s")

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+prefix+"-.*",
		"topics.exclude = .*[\\-\\_]internal.*, .*test.*",
		"replication.policy.separator = _"))
	p := startKmirror(t, cfg)
	remote := src + "_" + keep
	waitFor(t, 60*time.Second, remote, func() bool { return hasTopic(t, b, remote) && countAll(t, b, remote) == 20 })
	p.stop()
	names := topicNames(t, b)
	if names[src+"_"+skip] || names[src+"."+keep] {
		t.Errorf("unexpected topics on the target: %v", names)
	}
	td, err := b.Admin(t).ListTopics(ctx(t), remote)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td[remote].Partitions); n != 4 {
		t.Errorf("%s has %d partitions, want 4", remote, n)
	}
	rc, err := b.Admin(t).DescribeTopicConfigs(ctx(t), remote)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(remote, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Configs {
		if kv.Key == "retention.ms" && kv.MaybeValue() != retention {
			t.Errorf("remote retention.ms = %s, want %s copied from the source", kv.MaybeValue(), retention)
		}
	}
	// The internal separator follows the custom one (MM2's default).
	if !names["mm2-offset-syncs_"+src+"_internal"] {
		t.Errorf("offset-syncs topic mm2-offset-syncs_%s_internal missing on the target", src)
	}
}

// TestNewTopicsAndPartitionsFollowed creates a topic and adds partitions
// while kmirror runs.
func TestNewTopicsAndPartitionsFollowed(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	prefix := testkafka.Topic(t, "grow")
	first := prefix + "-first"
	a.CreateTopic(t, first, 1, nil)
	produceN(t, a, first, 1, 10, "a")

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+prefix+"-.*"))
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "first topic", func() bool { return countOrZero(t, b, src+"."+first) == 10 })

	later := prefix + "-later"
	a.CreateTopic(t, later, 2, nil)
	produceN(t, a, later, 2, 10, "b")
	waitFor(t, 30*time.Second, "topic created after start", func() bool { return countOrZero(t, b, src+"."+later) == 10 })

	if _, err := a.Admin(t).UpdatePartitions(ctx(t), 3, first); err != nil {
		t.Fatal(err)
	}
	produceN(t, a, first, 3, 9, "c") // 3 records go to the new partition 2
	waitFor(t, 30*time.Second, "the added partition", func() bool {
		if countOrZero(t, b, src+"."+first) != 19 {
			return false
		}
		n := 0
		for _, r := range b.ReadAll(t, src+"."+first) {
			if r.Partition == 2 {
				n++
			}
		}
		return n == 3
	})
	p.stop()
}

// TestActiveActive runs A->B and B->A in one process, with the default
// policy and with the identity policy.
//
// Heartbeats topics are replicated whatever the topic filter says, so two
// topologies over one cluster pair that copy them both ways form a loop
// that no alias chain shows: A's heartbeats go to B under one test's
// alias and back to A under the other's, growing names until they pass
// Kafka's 249 characters (and broke MM2 in another package's test). Each
// subtest therefore uses a separator of its own: no other test's policy
// reads its heartbeats topics as heartbeats, nor it theirs.
func TestActiveActive(t *testing.T) {
	t.Parallel()
	for _, identity := range []bool{false, true} {
		sep := map[bool]string{false: "--", true: "__"}[identity]
		t.Run(fmt.Sprintf("identity=%v", identity), func(t *testing.T) {
			t.Parallel()
			cs := testkafka.Shared(t, 2)
			a, b := cs[0], cs[1]
			topic := testkafka.Topic(t, "aa")
			a.CreateTopic(t, topic, 2, nil)
			b.CreateTopic(t, topic, 2, nil)
			produceN(t, a, topic, 2, 30, "fromA")
			produceN(t, b, topic, 2, 20, "fromB")

			x, y := alias(t, "x"), alias(t, "y")
			lines := []string{
				"clusters = " + x + ", " + y,
				x + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
				y + ".bootstrap.servers = " + strings.Join(b.Bootstrap, ","),
				x + "->" + y + ".enabled = true",
				y + "->" + x + ".enabled = true",
				"topics = .*" + topic + ".*",
				"replication.factor = 1",
				"offset-syncs.topic.replication.factor = 1",
				"offset.storage.replication.factor = 1",
				"heartbeats.topic.replication.factor = 1",
				"checkpoints.topic.replication.factor = 1",
				"refresh.topics.interval.seconds = 2",
				"replication.policy.separator = " + sep,
			}
			if identity {
				lines = append(lines, "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy")
			}
			cfg := writeFile(t, "mm2.properties", strings.Join(lines, "\n")+"\n")
			p := startKmirror(t, cfg)
			if identity {
				waitFor(t, 60*time.Second, "both sides to hold 50 records", func() bool {
					return countAll(t, a, topic) == 50 && countAll(t, b, topic) == 50
				})
				time.Sleep(5 * time.Second) // a loop would show as growth
				p.stop()
				for _, c := range []*testkafka.Cluster{a, b} {
					seen := map[string]int{}
					for _, r := range c.ReadAll(t, topic) {
						seen[string(r.Key)]++
					}
					if len(seen) != 50 {
						t.Errorf("cluster %s: %d distinct records, want 50", c.Name, len(seen))
					}
					for k, n := range seen {
						if n != 1 {
							t.Errorf("cluster %s: record %s exists %d times", c.Name, k, n)
						}
					}
				}
				return
			}
			waitFor(t, 60*time.Second, "remote topics", func() bool {
				return countOrZero(t, b, x+sep+topic) == 30 && countOrZero(t, a, y+sep+topic) == 20
			})
			time.Sleep(5 * time.Second) // a cycle topic would appear by now (refresh every 2 s)
			p.stop()
			// The heartbeats each flow writes went across once and stopped.
			if !hasTopic(t, b, x+sep+"heartbeats") || !hasTopic(t, a, y+sep+"heartbeats") {
				t.Errorf("want %s on %s and %s on %s", x+sep+"heartbeats", b.Name, y+sep+"heartbeats", a.Name)
			}
			for _, c := range []*testkafka.Cluster{a, b} {
				for name := range topicNames(t, c) {
					if strings.HasPrefix(name, x+sep+y+sep) || strings.HasPrefix(name, y+sep+x+sep) {
						t.Errorf("cycle topic %s on %s", name, c.Name)
					}
				}
			}
		})
	}
}

// TestGapReported deletes records upstream while kmirror is down and checks
// that it reports the lost range and copies the rest.
func TestGapReported(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "gap")
	a.CreateTopic(t, topic, 1, nil)
	produceN(t, a, topic, 1, 10, "before")

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic))
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "first records", func() bool { return countOrZero(t, b, src+"."+topic) == 10 })
	p.stop()

	produceN(t, a, topic, 1, 20, "after") // offsets 10..29
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 17})
	if _, err := a.Admin(t).DeleteRecords(ctx(t), o); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p = startKmirror(t, "--metrics-addr", addr, cfg)
	waitFor(t, 60*time.Second, "records after the gap", func() bool { return countOrZero(t, b, src+"."+topic) == 23 })
	// The loss and the copied records show in the metrics, with MM2's names.
	metrics := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	lost := fmt.Sprintf(`kmirror_source_records_lost_total{partition="0",source=%q,target=%q,topic=%q} 7`, src, dst, topic)
	copied := fmt.Sprintf(`kafka_connect_mirror_source_connector_record_count{partition="0",source=%q,target=%q,topic=%q} 13`, src, dst, src+"."+topic)
	waitFor(t, 10*time.Second, "metrics", func() bool { m := metrics(); return strings.Contains(m, lost) && strings.Contains(m, copied) })
	p.stop()
	log := p.log.String()
	if !strings.Contains(log, "source records lost before replication") || !strings.Contains(log, "first_lost=10") || !strings.Contains(log, "last_lost=16") {
		t.Errorf("kmirror log does not report the lost range 10..16:\n%s", log)
	}
}

// TestRecreatedTopicReported deletes and re-creates a source topic while
// kmirror is down, with more records than before: without a check, the old
// progress would silently skip the new topic's first records.
func TestRecreatedTopicReported(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "recreate")
	a.CreateTopic(t, topic, 1, nil)
	produceN(t, a, topic, 1, 30, "old")

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic))
	remote := src + "." + topic
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "the old topic's records", func() bool { return countOrZero(t, b, remote) == 30 })
	p.stop()

	if _, err := a.Admin(t).DeleteTopics(ctx(t), topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the topic to be deleted", func() bool { return !hasTopic(t, a, topic) })
	waitFor(t, 30*time.Second, "the topic to be re-created", func() bool {
		resp, err := a.Admin(t).CreateTopic(ctx(t), 1, 1, nil, topic)
		return err == nil && resp.Err == nil
	})
	produceN(t, a, topic, 1, 40, "new")

	p = startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "the new topic's records", func() bool { return countOrZero(t, b, remote) == 70 })
	p.stop()
	news := 0
	for _, r := range b.ReadAll(t, remote) {
		if string(r.Value) == "new" {
			news++
		}
	}
	if news != 40 {
		t.Errorf("target has %d records of the re-created topic, want 40", news)
	}
	if !strings.Contains(p.log.String(), "source topic was deleted and re-created") {
		t.Errorf("re-creation not reported:\n%s", p.log.String())
	}
}

// TestRecreatedTopicWhileRunning deletes and re-creates a source topic
// while kmirror copies it, in every mode: the new topic is copied from its
// start (some records may come twice, none is missing) and the
// re-creation is reported.
func TestRecreatedTopicWhileRunning(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		extra []string
		skip  string
	}{
		{"passthrough", nil, ""},
		{"re-encode", []string{reencodeAll}, ""},
		{"group passthrough", []string{"kmirror.workers = group"}, ""},
		{"group re-encode", []string{"kmirror.workers = group", reencodeAll}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.skip != "" {
				t.Skip(tt.skip)
			}
			cs := testkafka.Shared(t, 2)
			a, b := cs[0], cs[1]
			topic := testkafka.Topic(t, "recreate-live")
			a.CreateTopic(t, topic, 2, nil)
			produceN(t, a, topic, 2, 30, "old")

			src, dst := alias(t, "src"), alias(t, "dst")
			cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{src + "->" + dst + ".topics = " + topic}, tt.extra...)...))
			remote := src + "." + topic
			p := startKmirror(t, cfg)
			defer p.stop()
			waitFor(t, 60*time.Second, "the old topic's records", func() bool { return countOrZero(t, b, remote) == 30 })

			if _, err := a.Admin(t).DeleteTopics(ctx(t), topic); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the topic to be deleted", func() bool { return !hasTopic(t, a, topic) })
			waitFor(t, 30*time.Second, "the topic to be re-created", func() bool {
				resp, err := a.Admin(t).CreateTopic(ctx(t), 2, 1, nil, topic)
				return err == nil && resp.Err == nil
			})
			produceN(t, a, topic, 2, 40, "new")
			waitFor(t, 60*time.Second, "every record of the new topic", func() bool {
				seen := map[string]bool{}
				for _, r := range b.ReadAll(t, remote) {
					if string(r.Value) == "new" {
						seen[string(r.Key)] = true
					}
				}
				return len(seen) == 40
			})
			waitFor(t, 10*time.Second, "the re-creation reported", func() bool {
				return strings.Contains(p.log.String(), "source topic was deleted and re-created")
			})
		})
	}
}

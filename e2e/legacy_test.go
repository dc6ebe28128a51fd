package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// Environment variables of the compatibility matrix (make test-compat):
// comma-separated source and target Kafka versions. Without them the test
// runs its lean case: a 2.8.2 source on ZooKeeper into the shared target.
const (
	envLegacySources = "KMIRROR_COMPAT_SOURCES"
	envLegacyTargets = "KMIRROR_COMPAT_TARGETS"
)

func legacyVersions(env, def string) []string {
	v := os.Getenv(env)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}

// TestLegacySource replicates from an old Kafka into a current one: topics
// in message formats v0 and v1 (plain and compressed wrapper messages) and
// v2, with topic configs the target no longer knows. It checks that every
// record arrives exact (key, value, headers, timestamp; a v0 record's
// timestamp becomes -1), also as kcat reads it, that the remote topics were
// created with the configs translated and followed by config sync, and that
// a group's offsets on the source are synced to the target so that the
// group resumes there where it stopped (failover).
func TestLegacySource(t *testing.T) {
	t.Parallel()
	for _, sv := range legacyVersions(envLegacySources, "2.8.2") {
		for _, tv := range legacyVersions(envLegacyTargets, "") {
			name := sv + "->" + tv
			if tv == "" {
				name = sv + "->" + testkafka.KafkaVersion()
			}
			t.Run(name, func(t *testing.T) { legacyCase(t, sv, tv) })
		}
	}
}

// legacyTopic is one source topic of the case.
type legacyTopic struct {
	name    string
	format  string // message.format.version; "" for the broker's
	v0      bool
	headers bool
}

func legacyCase(t *testing.T, sourceVersion, targetVersion string) {
	a := testkafka.Start(t, testkafka.Options{Version: sourceVersion})[0]
	var b *testkafka.Cluster
	if targetVersion == "" {
		b = testkafka.Shared(t, 1)[0]
	} else {
		b = testkafka.Start(t, testkafka.Options{Version: targetVersion})[0]
	}
	major, _ := strconv.Atoi(strings.SplitN(sourceVersion, ".", 2)[0])
	oldFormats := major < 3 // 3.0+ ignores message.format.version, 4.0 refuses it
	targetOld := targetVersion != "" && !strings.HasPrefix(targetVersion, "4.")

	prefix := testkafka.Topic(t, "legacy")
	topics := []legacyTopic{{name: prefix + "-v2", headers: major >= 1}}
	if oldFormats {
		topics = append(topics,
			legacyTopic{name: prefix + "-v1", format: "0.10.2"},
			legacyTopic{name: prefix + "-v0", format: "0.9.0", v0: true})
	}
	if major == 3 { // takes the old keys but writes v2 (and headers) anyway
		topics = append(topics, legacyTopic{name: prefix + "-v1", format: "0.10.2", headers: true})
	}
	for _, tp := range topics {
		cfg := map[string]*string{}
		if tp.format != "" {
			cfg["message.format.version"] = kadm.StringPtr(tp.format)
			cfg["message.timestamp.difference.max.ms"] = kadm.StringPtr("3600000")
			if major >= 2 {
				cfg["message.downconversion.enable"] = kadm.StringPtr("true")
			}
		}
		a.CreateTopic(t, tp.name, 2, cfg)
	}

	// Old formats refuse idempotent producers and headers; the broker
	// converts what is produced into the topic's format. Half the
	// batches are compressed: v0/v1 wrapper messages.
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.SnappyCompression(), kgo.GzipCompression()} {
		cl := a.Client(t, kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for _, tp := range topics {
			for j := range 30 {
				n := i*30 + j
				r := &kgo.Record{Topic: tp.name, Partition: int32(n % 2), Key: []byte(fmt.Sprintf("k-%d", n)),
					Value: []byte(fmt.Sprintf("value %d of %s", n, tp.name)), Timestamp: base.Add(time.Duration(n) * time.Millisecond)}
				if n%7 == 0 {
					r.Value = nil
				}
				if tp.headers && n%3 == 0 {
					r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(n))}}
				}
				recs = append(recs, r)
			}
		}
		if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
			t.Fatalf("produce to Kafka %s: %v", sourceVersion, err)
		}
		cl.Close()
	}
	commits := map[int32]int64{0: 17, 1: 30}
	for _, tp := range topics {
		commitOnA(t, a, tp.name+"-g", tp.name, commits)
	}

	for _, path := range []string{"passthrough", "record"} {
		t.Run(path, func(t *testing.T) { legacyFlow(t, a, b, path, prefix, topics, commits, oldFormats, targetOld) })
	}
}

// legacyFlow runs kmirror on one data path from a to b and checks what
// TestLegacySource promises.
func legacyFlow(t *testing.T, a, b *testkafka.Cluster, path, prefix string, topics []legacyTopic, commits map[int32]int64, oldFormats, targetOld bool) {
	const diffMS = "3600000"
	src, dst := alias(t, "old"), alias(t, "new")
	sel := prefix + "-.*"
	extra := []string{}
	if path == "record" {
		// MM2's default: offset syncs written to and read from the old source.
		extra = append(extra, reencodeAll, "offset-syncs.topic.location = source")
	}
	k := startKmirror(t, writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append(extra,
		src+"->"+dst+".topics = "+sel,
		"groups = "+prefix+"-.*",
		"sync.group.offsets.enabled = true",
		"sync.group.offsets.interval.seconds = 1",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.groups.interval.seconds = 1",
		"sync.topic.configs.interval.seconds = 1",
		// MM2's default exclude list holds message.timestamp.difference.max.ms:
		// leave it out so that its translation is tested too.
		"config.properties.exclude = min.insync.replicas")...)))

	for _, tp := range topics {
		remote := src + "." + tp.name
		up := a.ReadAll(t, tp.name) // a fresh copy: the checks below change it
		if len(up) != 90 {
			t.Fatalf("%s: source holds %d records, want 90", tp.name, len(up))
		}
		waitFor(t, 90*time.Second, remote+" complete", func() bool { return hasTopic(t, b, remote) && countAll(t, b, remote) == len(up) })
		if tp.v0 {
			for _, r := range up {
				if r.Attrs.TimestampType() != -1 {
					t.Fatalf("%s: source record at offset %d has timestamp type %d; the topic is not in format v0", tp.name, r.Offset, r.Attrs.TimestampType())
				}
				r.Timestamp = time.UnixMilli(-1) // what a v0 record becomes in v2
			}
		}
		down := b.ReadAll(t, remote)
		sameRecords(t, up, down, "")
		for i := range up {
			if up[i].Offset != down[i].Offset {
				t.Fatalf("%s: record %d at source offset %d is at target offset %d", tp.name, i, up[i].Offset, down[i].Offset)
			}
		}
		kcatSame(t, b, remote, up)
		if tp.format != "" {
			checkTranslatedConfigs(t, b, remote, diffMS, targetOld)
		}
		failoverResumes(t, b, tp.name+"-g", remote, up, commits)
		if tp.format != "" && !targetOld {
			for _, key := range []string{"message.format.version", "message.timestamp.difference.max.ms"} {
				if n := warnings(k.log.String(), tp.name, key); n != 1 {
					t.Errorf("kmirror warned %d times about %s of %s, want once:\n%s", n, key, tp.name, k.log.String())
				}
			}
		}
	}
	if oldFormats && path == "passthrough" && !strings.Contains(k.log.String(), "message format v0/v1") {
		t.Errorf("kmirror did not log the v0/v1 conversion:\n%s", k.log.String())
	}

	// Config sync follows a change of the removed key into its successors
	// (on the last path only: the change stays on the source).
	if len(topics) > 1 && !targetOld && path == "record" {
		tp := topics[1]
		alterOld(t, a, tp.name, map[string]string{"message.format.version": tp.format, "message.timestamp.difference.max.ms": "7200000"})
		remote := src + "." + tp.name
		waitFor(t, 30*time.Second, "config sync of "+remote, func() bool {
			c := remoteConfigs(t, b, remote)
			return c["message.timestamp.before.max.ms"] == "7200000" && c["message.timestamp.after.max.ms"] == "7200000"
		})
		if strings.Contains(k.log.String(), "cannot sync remote topic configs") {
			t.Errorf("config sync sent a key the target refuses:\n%s", k.log.String())
		}
	}
	if strings.Contains(k.log.String(), "cannot create remote topic") {
		t.Errorf("kmirror failed to create a remote topic:\n%s", k.log.String())
	}
}

// warnings counts the warnings in log that name topic and key.
func warnings(log, topic, key string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "topic="+topic+" ") && strings.Contains(line, "key="+key+" ") {
			n++
		}
	}
	return n
}

// kcatSame reads topic on c with kcat and compares key, value and
// timestamp of each record with want (sorted by partition, offset).
func kcatSame(t *testing.T, c *testkafka.Cluster, topic string, want []*kgo.Record) {
	t.Helper()
	out := c.Kcat(t, "-C", "-t", topic, "-e", "-q", "-o", "beginning", "-f", "%p %o %T %K|%k|%S|%s\\n")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 {
			t.Fatalf("kcat printed %q", line)
		}
		got[f[0]+" "+f[1]] = f[2] + " " + f[3]
	}
	if len(got) != len(want) {
		t.Fatalf("kcat read %d records of %s, want %d", len(got), topic, len(want))
	}
	for _, r := range want {
		id := fmt.Sprintf("%d %d", r.Partition, r.Offset)
		// kcat prints -1 as the length of a null key or value.
		w := fmt.Sprintf("%d %d|%s|%d|%s", r.Timestamp.UnixMilli(), kcatLen(r.Key), r.Key, kcatLen(r.Value), r.Value)
		if got[id] != w {
			t.Errorf("kcat: %s partition/offset %s is %q, want %q", topic, id, got[id], w)
		}
	}
}

func kcatLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// remoteConfigs returns the topic configs c sets on topic itself.
func remoteConfigs(t *testing.T, c *testkafka.Cluster, topic string) map[string]string {
	rcs, err := c.Admin(t).DescribeTopicConfigs(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cfg := range rc.Configs {
		if cfg.Value != nil && cfg.Source == 1 { // DYNAMIC_TOPIC_CONFIG
			out[cfg.Key] = *cfg.Value
		}
	}
	return out
}

// checkTranslatedConfigs checks the remote topic of a topic with old
// configs: a 4.x target has the difference translated and no removed key;
// an older target keeps them.
func checkTranslatedConfigs(t *testing.T, c *testkafka.Cluster, topic, diffMS string, targetOld bool) {
	t.Helper()
	got := remoteConfigs(t, c, topic)
	if targetOld {
		if got["message.timestamp.difference.max.ms"] != diffMS {
			t.Errorf("%s: configs %v, want message.timestamp.difference.max.ms=%s", topic, got, diffMS)
		}
		return
	}
	if got["message.timestamp.before.max.ms"] != diffMS || got["message.timestamp.after.max.ms"] != diffMS {
		t.Errorf("%s: configs %v, want message.timestamp.before.max.ms and after.max.ms = %s", topic, got, diffMS)
	}
	for _, k := range []string{"message.format.version", "message.downconversion.enable", "message.timestamp.difference.max.ms"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s: has %s on a Kafka 4 target", topic, k)
		}
	}
}

// failoverResumes waits until group's offsets for topic on c are the
// commits made on the source, then consumes topic on c as that group and
// expects exactly the source records from the committed offsets on.
func failoverResumes(t *testing.T, c *testkafka.Cluster, group, topic string, src []*kgo.Record, commits map[int32]int64) {
	t.Helper()
	adm := c.Admin(t)
	waitFor(t, 60*time.Second, "group offsets of "+group+" on the target", func() bool {
		offs, err := adm.FetchOffsets(ctx(t), group)
		if err != nil {
			return false
		}
		for p, want := range commits {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.At != want {
				return false
			}
		}
		return true
	})
	var want []*kgo.Record
	for _, r := range src {
		if r.Offset >= commits[r.Partition] {
			want = append(want, r)
		}
	}
	// The synced offsets are only for an inactive group; kmirror stops
	// syncing once the group has members on the target.
	cl := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume %s as %s on the target: %v", topic, group, err)
		}
		got = append(got, fs.Records()...)
	}
	byPart := func(rs []*kgo.Record) map[int32][]*kgo.Record {
		m := map[int32][]*kgo.Record{}
		for _, r := range rs {
			m[r.Partition] = append(m[r.Partition], r)
		}
		return m
	}
	var sorted []*kgo.Record
	gp := byPart(got)
	for p := range int32(2) {
		sorted = append(sorted, gp[p]...)
	}
	sameRecords(t, want, sorted, "")
}

// alterOld sets topic's configs to exactly cfg with the AlterConfigs
// request every old broker has.
func alterOld(t *testing.T, c *testkafka.Cluster, topic string, cfg map[string]string) {
	t.Helper()
	var ops []kadm.AlterConfig
	for k, v := range cfg {
		ops = append(ops, kadm.AlterConfig{Name: k, Value: kadm.StringPtr(v)})
	}
	resp, err := c.Admin(t).AlterTopicConfigsState(ctx(t), ops, topic)
	if err == nil {
		_, err = resp.On(topic, func(r *kadm.AlterConfigsResponse) error { return r.Err })
	}
	if err != nil {
		t.Fatalf("alter configs of %s: %v", topic, err)
	}
}

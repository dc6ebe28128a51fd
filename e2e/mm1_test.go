package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// startMM1 runs "kmirror mm1 ARGS..." with TMPDIR set to tmp until the test
// ends.
func startMM1(t *testing.T, tmp string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(kmirrorBin(t), append([]string{"mm1"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	return startProc(t, "kmirror mm1", cmd)
}

// TestMM1 runs MirrorMaker 1's command line: records reach the target under
// the same topic name and partition, nothing is committed to the consumer
// group on the source, SIGTERM stops cleanly and removes the generated
// file, and a restart copies nothing twice.
func TestMM1(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	prefix := testkafka.Topic(t, "mm1")
	one, two, other := prefix+"-one", prefix+"-two", testkafka.Topic(t, "mm1skip")
	a.CreateTopic(t, one, 3, nil)
	a.CreateTopic(t, two, 2, nil)
	a.CreateTopic(t, other, 1, nil)
	produceN(t, a, one, 3, 300, "before")
	produceN(t, a, two, 2, 50, "before")
	produceN(t, a, other, 1, 10, "skip")

	group := prefix + "-group"
	consumer := writeFile(t, "consumer.properties", strings.Join([]string{
		"bootstrap.servers=" + strings.Join(a.Bootstrap, ","),
		"group.id=" + group,
		"key.deserializer=org.apache.kafka.common.serialization.ByteArrayDeserializer",
		"max.poll.records=100",
	}, "\n")+"\n")
	producer := writeFile(t, "producer.properties", strings.Join([]string{
		"bootstrap.servers=" + strings.Join(b.Bootstrap, ","),
		"linger.ms=5",
		"acks=all",
	}, "\n")+"\n")
	tmp := t.TempDir()
	args := []string{"--consumer.config", consumer, "--producer.config=" + producer,
		"--whitelist", "'" + prefix + ".*'", "--num.streams", "2",
		"--offset.commit.interval.ms", "500", "--replication.factor", "1"}

	p := startMM1(t, tmp, args...)
	waitFor(t, 90*time.Second, "the first records on the target", func() bool {
		return countOrZero(t, b, one) == 300 && countOrZero(t, b, two) == 50
	})
	produceN(t, a, one, 3, 300, "after")
	waitFor(t, 60*time.Second, "the records written while mm1 runs", func() bool { return countOrZero(t, b, one) == 600 })
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Errorf("TMPDIR holds %d entries while mm1 runs, want the generated file", len(entries))
	}
	p.stop()

	for _, topic := range []string{one, two} {
		sameRecords(t, a.ReadAll(t, topic), b.ReadAll(t, topic), "")
		td, err := b.Admin(t).ListTopics(ctx(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(td[topic].Partitions), map[string]int{one: 3, two: 2}[topic]; got != want {
			t.Errorf("%s has %d partitions on the target, want %d", topic, got, want)
		}
	}
	if hasTopic(t, b, other) {
		t.Errorf("%s does not match the whitelist but was mirrored", other)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the generated MM2 file is left behind: %v", entries)
	}
	groups, err := a.Admin(t).ListGroups(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups[group]; ok {
		t.Errorf("group %s exists on the source; kmirror should keep progress on the target only", group)
	}
	log := p.log.String()
	for _, want := range []string{"--num.streams is ignored", "group.id", "mm2-offsets.source.internal"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}

	// A restart resumes from the progress saved on the target.
	produceN(t, a, one, 3, 30, "restart")
	p = startMM1(t, tmp, args...)
	waitFor(t, 60*time.Second, "the records written while mm1 was down", func() bool { return countOrZero(t, b, one) == 630 })
	time.Sleep(2 * time.Second) // time for duplicates that must not come: nothing to wait for
	p.stop()
	if n := countAll(t, b, one); n != 630 {
		t.Errorf("%s holds %d records after the restart, want 630 (no duplicates)", one, n)
	}
}

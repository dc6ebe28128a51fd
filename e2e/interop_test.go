package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/mirrorclient"
)

// translateJava calls Java's RemoteClusterUtils on the cluster of
// bootstrap: for each group, translateOffsets from remoteAlias, printed
// as "offset GROUP TOPIC PARTITION OFFSET"; then checkpointTopics, one
// "checkpoints TOPIC" line each.
const translateJava = `import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class Translate {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        String remoteAlias = args[1];
        for (int i = 2; i < args.length; i++) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, remoteAlias, args[i], Duration.ofSeconds(30));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                System.out.println("offset " + args[i] + " " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset());
            }
        }
        for (String topic : RemoteClusterUtils.checkpointTopics(props)) {
            System.out.println("checkpoints " + topic);
        }
    }
}
`

// runTranslateJava compiles translateJava against the Kafka jars and runs
// it; it returns offsets per group and the checkpoints topics it listed.
func runTranslateJava(t *testing.T, bootstrap, remoteAlias string, groups ...string) (map[string]map[mirrorclient.TopicPartition]int64, []string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Translate.java"), []byte(translateJava), 0o600); err != nil {
		t.Fatal(err)
	}
	libs := filepath.Join(testkafka.Libs(t), "*")
	if out, err := exec.Command("javac", "-cp", libs, "-d", dir, filepath.Join(dir, "Translate.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	args := append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", libs + ":" + dir, "Translate", bootstrap, remoteAlias}, groups...)
	cmd := exec.Command("java", args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java Translate: %v\n%s%s", err, out, stderr.String())
	}
	offsets := map[string]map[mirrorclient.TopicPartition]int64{}
	var topics []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[0] == "offset":
			p, err1 := strconv.ParseInt(f[3], 10, 32)
			o, err2 := strconv.ParseInt(f[4], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("java Translate printed %q", line)
			}
			if offsets[f[1]] == nil {
				offsets[f[1]] = map[mirrorclient.TopicPartition]int64{}
			}
			offsets[f[1]][mirrorclient.TopicPartition{Topic: f[2], Partition: int32(p)}] = o
		case len(f) == 2 && f[0] == "checkpoints":
			topics = append(topics, f[1])
		case len(f) > 0:
			t.Fatalf("java Translate printed %q", line)
		}
	}
	return offsets, topics
}

// TestJavaTranslatesKmirrorCheckpoints runs kmirror on a flow and has
// Java's RemoteClusterUtils.translateOffsets read kmirror's checkpoints
// on B: it must return the offsets mirrorclient returns, which are the
// exact translations of the groups' commits on A.
func TestJavaTranslatesKmirrorCheckpoints(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "interop")
	a.CreateTopic(t, topic, 2, nil)
	produceFailoverWorkload(t, a, topic, 120, 30, 6, 2)
	up := a.ReadAll(t, topic)
	g := func(s string) string { return topic + "-" + s }
	commits := map[string]map[int32]int64{
		g("one"): {0: 47, 1: 10}, // mid-batch, the marker offset
		g("two"): {0: 120, 1: 25},
	}
	for group, offs := range commits {
		commitOnA(t, a, group, topic, offs)
	}

	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	startKmirror(t, writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic,
		"groups = "+topic+"-.*",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.groups.interval.seconds = 1")))

	mc, err := mirrorclient.New(mirrorclient.WithSeedBrokers(b.Bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	goOffsets := map[string]map[mirrorclient.TopicPartition]int64{}
	waitFor(t, 60*time.Second, "checkpoints of both groups", func() bool {
		for group, offs := range commits {
			got, err := mc.RemoteConsumerOffsets(ctx(t), group, src, 10*time.Second)
			if err != nil || len(got) != len(offs) {
				return false
			}
			for p, u := range offs {
				if got[mirrorclient.TopicPartition{Topic: remote, Partition: p}] != expectedDown(up, p, u) {
					return false
				}
			}
			goOffsets[group] = got
		}
		return true
	})

	javaOffsets, cpTopics := runTranslateJava(t, strings.Join(b.Bootstrap, ","), src, g("one"), g("two"))
	for group, want := range goOffsets {
		got := javaOffsets[group]
		t.Logf("group %s: mirrorclient %v, Java RemoteClusterUtils %v", group, want, got)
		if len(got) != len(want) {
			t.Errorf("group %s: Java translated %d partitions, mirrorclient %d", group, len(got), len(want))
		}
		for tp, o := range want {
			if got[tp] != o {
				t.Errorf("group %s %s: Java says %d, mirrorclient %d", group, tp, got[tp], o)
			}
		}
	}
	if !slices.Contains(cpTopics, src+".checkpoints.internal") {
		t.Errorf("Java checkpointTopics %q lacks %s.checkpoints.internal", cpTopics, src)
	}
}

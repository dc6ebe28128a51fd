package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
	"github.com/kmirror/kmirror/mirrorclient"
)

// TestConnectCheckpoints: a MirrorSourceConnector with
// emit.checkpoints.enabled=false and a MirrorCheckpointConnector for the
// same pair, created through kmirror connect's REST API, give the source
// group's checkpoints on the target with translated offsets, and the
// target group's committed offsets (sync.group.offsets.enabled). A second
// worker joins, and the next commit's checkpoint is written once: one
// worker leads. Once the checkpoint connector is deleted no checkpoint
// appears any more: the source connector writes none.
func TestConnectCheckpoints(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	src, dst := alias(t, "cpa"), alias(t, "cpb")
	topic := testkafka.Topic(t, "cporders")
	a.CreateTopic(t, topic, 2, nil)
	remote := src + "." + topic
	port, port2 := freePort(t), freePort(t)
	workers := testkafka.Topic(t, "cpconnect")
	startConnect(t, connectWorker(t, b, workers, port), port)

	var up []*kgo.Record
	for i := 0; i < 30; i++ {
		up = append(up, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx(t), up...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	common := fmt.Sprintf(`"source.cluster.alias": %q, "target.cluster.alias": %q, "source.cluster.bootstrap.servers": %q`,
		src, dst, strings.Join(a.Bootstrap, ","))
	create := func(name, body string) {
		t.Helper()
		code, out := rest(t, "PUT", port, "/connectors/"+name+"/config", body)
		if code != 201 {
			t.Fatalf("PUT %s: %d %s", name, code, out)
		}
	}
	// The source connector could emit checkpoints every second, were they on.
	create("source", `{"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", `+common+fmt.Sprintf(`,
  "topics": %q, "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
  "emit.checkpoints.enabled": "false", "emit.checkpoints.interval.seconds": "1", "checkpoints.topic.replication.factor": "1"}`, topic))
	waitFor(t, 60*time.Second, "30 records on the target", func() bool { return countOrZero(t, b, remote) == 30 })

	group := testkafka.Topic(t, "cpgroup")
	commits := map[int32]int64{0: 10, 1: 15}
	commitOnA(t, a, group, topic, commits)
	create("checkpoints", `{"connector.class": "MirrorCheckpointConnector", `+common+fmt.Sprintf(`,
  "groups": %q, "groups.exclude": "nothing.*", "emit.checkpoints.interval.seconds": "1",
  "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
  "refresh.groups.interval.seconds": "1", "checkpoints.topic.replication.factor": "1"}`, group))

	mc, err := mirrorclient.New(mirrorclient.WithSeedBrokers(b.Bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	want := map[int32]int64{}
	for p, u := range commits {
		want[p] = expectedDown(up, p, u)
	}
	checkpoints := func() map[int32][2]int64 {
		cps, err := mc.RemoteCheckpoints(ctx(t), group, src, 10*time.Second)
		if err != nil {
			return nil
		}
		out := map[int32][2]int64{}
		for tp, c := range cps {
			if tp.Topic == remote {
				out[tp.Partition] = [2]int64{c.UpstreamOffset, c.DownstreamOffset}
			}
		}
		return out
	}
	var got map[int32][2]int64
	var status string // the second worker's last answer on the connector
	defer func() {
		if t.Failed() {
			t.Logf("second worker's status: %s", status)
			t.Logf("last checkpoints of %s (partition: upstream, downstream): %v, want %v -> %v", group, got, commits, want)
		}
	}()
	waitFor(t, 45*time.Second, "checkpoints of "+group+" in "+src+".checkpoints.internal", func() bool {
		got = checkpoints()
		for p, u := range commits {
			if got[p] != [2]int64{u, want[p]} {
				return false
			}
		}
		return true
	})
	waitFor(t, 30*time.Second, "the group's offsets on the target", func() bool {
		return maps.Equal(committed(t, b, group, remote), want)
	})
	// A second worker joins; the first keeps leading, and a new commit is
	// checkpointed once.
	startConnect(t, connectWorker(t, b, workers, port2), port2)
	// The new worker reads the config topic after its REST API is up, so
	// it reports UNASSIGNED until it has started the connector's flow.
	waitFor(t, 30*time.Second, "the checkpoint connector RUNNING on the second worker", func() bool {
		code, out := rest(t, "GET", port2, "/connectors/checkpoints/status", "")
		status = fmt.Sprint(code, " ", out)
		return code == 200 && strings.Contains(out, `"state":"RUNNING"`)
	})
	// The second worker's flows join their worker groups: the source
	// connector's on the source, the checkpoint connector's (whose
	// partition 0 names the leader) on the target.
	sourceGroup, leaderGroup := "kmirror-connect-"+workers+"-source", "kmirror-connect-"+workers+"-checkpoints"
	running := time.Now()
	waitFor(t, 60*time.Second, "both workers in "+sourceGroup+" and "+leaderGroup, func() bool {
		return groupMembers(t, a, sourceGroup) == 2 && groupMembers(t, b, leaderGroup) == 2
	})
	t.Logf("both workers were in the worker groups %v after the second reported RUNNING", time.Since(running).Round(10*time.Millisecond))
	commitOnA(t, a, group, topic, map[int32]int64{0: 12, 1: 15})
	waitFor(t, 30*time.Second, "the checkpoint of the new commit", func() bool { got = checkpoints(); return got[0][0] == 12 })
	// One writer never writes an unchanged checkpoint again; two would.
	// The checkpoint of one more commit shows the writer went on after
	// writing that of 12.
	commitOnA(t, a, group, topic, map[int32]int64{0: 13, 1: 15})
	waitFor(t, 30*time.Second, "the checkpoint of the commit after", func() bool { got = checkpoints(); return got[0][0] == 13 })
	seen := map[wire.Checkpoint]int{}
	for _, r := range b.ReadAll(t, src+".checkpoints.internal") {
		c, err := wire.DecodeCheckpoint(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if c.Group == group {
			if seen[c]++; seen[c] == 2 {
				t.Errorf("checkpoint %+v written twice: two checkpoint writers", c)
			}
		}
	}

	// Without the checkpoint connector a new commit gets no checkpoint.
	if code, out := rest(t, "DELETE", port, "/connectors/checkpoints", ""); code != 204 {
		t.Fatalf("DELETE checkpoints: %d %s", code, out)
	}
	// Both workers' herders stop the flow: its leader consumers leave.
	deleted := time.Now()
	waitFor(t, 60*time.Second, "no worker left in "+leaderGroup, func() bool { return groupMembers(t, b, leaderGroup) == 0 })
	t.Logf("the checkpoint flows stopped %v after the DELETE", time.Since(deleted).Round(10*time.Millisecond))
	commitOnA(t, a, group, topic, map[int32]int64{0: 14, 1: 15})
	// The source connector would emit a checkpoint every second, were
	// it to emit any: none may come in a few of those intervals.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if got = checkpoints(); got[0][0] != 13 {
			t.Fatalf("partition 0's checkpoint is %v after the checkpoint connector was deleted, want upstream 13: a second checkpoint writer", got[0])
		}
	}
}

// groupMembers returns how many members group has on c (0 when it does
// not exist).
func groupMembers(t *testing.T, c *testkafka.Cluster, group string) int {
	t.Helper()
	gs, err := c.Admin(t).DescribeGroups(ctx(t), group)
	if err != nil {
		t.Fatal(err)
	}
	return len(gs[group].Members)
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// failbackJSON is the part of "kmirror offsets --output json" this test
// reads.
type failbackJSON struct {
	Source      string   `json:"source"`
	ReverseFlow string   `json:"reverse_flow"`
	Applied     bool     `json:"applied"`
	Notes       []string `json:"notes"`
	Partitions  []struct {
		Topic      string `json:"topic"`
		FromTopic  string `json:"from_topic"`
		Partition  int32  `json:"partition"`
		Upstream   int64  `json:"upstream_offset"`
		Downstream int64  `json:"downstream_offset"`
		Action     string `json:"action"`
	} `json:"partitions"`
}

// TestFailback replicates A->B with kmirror (exact translation), lets
// groups consume part of the remote topic on B and commit there, then
// moves each group back to A with "kmirror offsets --from B --to A
// --apply": a consumer of the original topic on A misses nothing and reads
// nothing the group had consumed on B.
func TestFailback(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "failback")
	a.CreateTopic(t, topic, 2, nil)
	// Partition 0: 200 records in batches of 25. Partition 1: 12
	// transactions of 10 (transaction k at 11k..11k+9, marker at 11k+10),
	// the fourth aborted: on B, transaction k>3 starts at 10(k-1).
	produceFailoverWorkload(t, a, topic, 200, 25, 12, 3)
	up := a.ReadAll(t, topic)

	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic))
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "every record copied to B", func() bool { return countOrZero(t, b, remote) == len(up) })
	p.stop() // as after a failover: A->B stopped, its syncs and index stay on B
	onB := b.ReadAll(t, remote)

	g := func(s string) string { return topic + "-" + s }
	// Offsets the groups committed on B (in the remote topic).
	commits := map[string]map[int32]int64{
		"mid":    {0: 37, 1: 5},    // mid-batch, mid-transaction
		"marker": {0: 50, 1: 30},   // batch boundary; first record after a marker and an aborted transaction
		"end":    {0: 200, 1: 110}, // caught up: past the newest sync
	}
	// "mid" had committed on A before the failover; --apply moves it on.
	commitOnA(t, a, g("mid"), topic, map[int32]int64{0: 10, 1: 0})
	for name, offs := range commits {
		commitOnA(t, b, g(name), remote, offs)
	}
	// "mid" also read a topic produced on B after the failover, which
	// B->A copies back: that partition comes from B->A's checkpoints, in
	// the same run of the command.
	local := testkafka.Topic(t, "local")
	b.CreateTopic(t, local, 1, nil)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: local, Key: fmt.Appendf(nil, "l-%d", i)})
	}
	b.Produce(t, recs...)
	commitOnA(t, b, g("mid"), local, map[int32]int64{0: 12})
	back := writeFile(t, "back.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic,
		dst+"->"+src+".enabled = true", dst+"->"+src+".topics = "+local, "groups = "+topic+"-.*",
		"emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1"))
	startKmirror(t, "--clusters", src, back)

	// No commit on A while the group has a member there.
	leave := member(t, a, g("marker"), topic, false)
	out, code := runKmirror(t, 60*time.Second, "offsets", "--config", cfg, "--group", g("marker"), "--from", dst, "--to", src, "--apply")
	if code == 0 || !strings.Contains(out, "refusing") || !strings.Contains(out, "active member") {
		t.Errorf("offsets --apply with an active member on A: exit %d, output:\n%s", code, out)
	}
	leave()
	out, code = runKmirror(t, 60*time.Second, "offsets", "--config", cfg, "--group", g("marker"), "--from", dst, "--to", src)
	t.Logf("kmirror offsets --from B --to A (exit %d):\n%s", code, out)
	if code != 0 || !strings.Contains(out, "translated back through the offset syncs of "+src+"->"+dst) {
		t.Errorf("offsets in text: exit %d, output:\n%s", code, out)
	}

	// B->A's checkpoint of "mid" on the local topic, once every record of
	// it is copied: a checkpoint emitted before (the offset syncs then
	// end below 12) resumes at the record after the newest sync.
	localOnA := dst + "." + local
	waitFor(t, 60*time.Second, "B->A's checkpoint of group mid at 12 -> 12", func() bool {
		out, _ := runKmirror(t, 60*time.Second, "offsets", "--config", back, "--group", g("mid"), "--from", dst, "--to", src, "--output", "json")
		var rep failbackJSON
		if i := strings.Index(out, "{"); i < 0 || json.Unmarshal([]byte(out[i:]), &rep) != nil {
			return false
		}
		for _, p := range rep.Partitions {
			if p.Topic == localOnA && p.Upstream == 12 && p.Downstream == 12 {
				return true
			}
		}
		return false
	})

	for _, name := range []string{"mid", "marker", "end"} {
		file, source := cfg, "reverse"
		if name == "mid" {
			file, source = back, "checkpoints" // mixed: the report's source is --use's
		}
		out, code := runKmirror(t, 60*time.Second, "offsets", "--config", file, "--group", g(name), "--from", dst, "--to", src, "--apply", "--output", "json")
		var rep failbackJSON
		if i := strings.Index(out, "{"); code != 0 || i < 0 || json.Unmarshal([]byte(out[i:]), &rep) != nil || !rep.Applied || rep.Source != source {
			t.Errorf("group %s: offsets --apply: exit %d, output:\n%s", name, code, out)
			continue
		}
		if name == "mid" {
			if got := committed(t, a, g(name), localOnA)[0]; got != 12 {
				t.Errorf("group mid: %s at %d on A, want 12 from B->A's checkpoint\n%s", localOnA, got, out)
			}
		}
		var moved []string
		for _, r := range rep.Partitions {
			from := r.FromTopic
			if from == "" {
				from = "(checkpoint)"
			}
			moved = append(moved, fmt.Sprintf("%s-%d %d->%s-%d %d (%s)", from, r.Partition, r.Upstream, r.Topic, r.Partition, r.Downstream, r.Action))
		}
		read := readGroupFrom(t, a, g(name), topic, up)
		missed, reread := failbackCount(up, onB, read, commits[name])
		t.Logf("group %-6s committed on B %v: %s; on A read %d, missed %d, re-read %d", name, commits[name], strings.Join(moved, ", "), len(read), missed, reread)
		if missed != 0 || reread != 0 {
			t.Errorf("group %s: a consumer on A missed %d and re-read %d records, want 0 and 0\n%s", name, missed, reread, out)
		}
	}
}

// failbackCount compares what a consumer read on A after the failback
// with what the group consumed on B (records of the remote topic below
// commit[p], matched to A's records by key): missed is records of A
// neither consumed on B nor read on A, reread is records read on A that
// were consumed on B.
func failbackCount(up, onB, readA []*kgo.Record, commit map[int32]int64) (missed, reread int) {
	consumed := make(map[string]bool)
	for _, r := range onB {
		if r.Offset < commit[r.Partition] {
			consumed[string(r.Key)] = true
		}
	}
	read := make(map[string]bool)
	for _, r := range readA {
		read[string(r.Key)] = true
	}
	for _, r := range up {
		c, rd := consumed[string(r.Key)], read[string(r.Key)]
		switch {
		case c && rd:
			reread++
		case !c && !rd:
			missed++
		}
	}
	return missed, reread
}

// readGroupFrom joins group on c as a read_committed consumer of topic and
// reads from the group's committed offsets up to the last record of each
// partition in recs (the topic's committed records; transaction markers may
// follow them), then leaves without committing.
func readGroupFrom(t *testing.T, c *testkafka.Cluster, group, topic string, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	start := committed(t, c, group, topic)
	left := map[int32]int64{} // partition -> offset of its last record
	for _, r := range recs {
		if r.Offset >= start[r.Partition] && r.Offset > left[r.Partition] {
			left[r.Partition] = r.Offset
		}
	}
	if len(left) == 0 {
		return nil
	}
	cl := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(left) > 0 {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("group %s on %s: partitions %v not read to the end", group, c.Name, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if last, ok := left[r.Partition]; ok && r.Offset >= last {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

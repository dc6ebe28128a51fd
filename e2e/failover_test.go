package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/mirrorclient"
)

// produceFailoverWorkload writes, to a two-partition topic, plain records
// in batches of batch to partition 0 and transactions of 10 records to
// partition 1 (a marker after each; the transactions listed in aborted are
// aborted). Keys are unique. It returns once the last transaction's
// marker is on partition 1.
func produceFailoverWorkload(t *testing.T, a *testkafka.Cluster, topic string, plain, batch, txns int, aborted ...int) {
	t.Helper()
	cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	for i := 0; i < plain; i += batch {
		var recs []*kgo.Record
		for j := i; j < min(i+batch, plain); j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "p0-%d", j), Value: []byte("plain")})
		}
		if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tx := a.Client(t, kgo.TransactionalID("kmirror-e2e-"+topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for n := 0; n < txns; n++ {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for j := 0; j < 10; j++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Key: fmt.Appendf(nil, "p1-%d-%d", n, j), Value: []byte("txn")})
		}
		if err := tx.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		abort := false
		for _, x := range aborted {
			abort = abort || x == n
		}
		if err := tx.EndTransaction(ctx(t), kgo.TransactionEndTry(!abort)); err != nil {
			t.Fatal(err)
		}
	}
	// EndTransaction returns once the coordinator has decided; the marker
	// reaches the partition a moment later, and until then a
	// read_committed reader (ReadAll) stops before the last transaction.
	adm := a.Admin(t)
	waitFor(t, 30*time.Second, "the last transaction's marker on "+topic, func() bool {
		hw, err1 := adm.ListEndOffsets(ctx(t), topic)
		lso, err2 := adm.ListCommittedOffsets(ctx(t), topic)
		if err1 != nil || err2 != nil || hw.Error() != nil || lso.Error() != nil {
			return false
		}
		h, _ := hw.Lookup(topic, 1)
		l, _ := lso.Lookup(topic, 1)
		return l.Offset == h.Offset
	})
}

// commitOnA commits offsets for group on c as a member of the group would:
// it joins (classic protocol), commits and leaves.
func commitOnA(t *testing.T, c *testkafka.Cluster, group, topic string, offs map[int32]int64) {
	t.Helper()
	cl := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	jctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		cl.PollRecords(jctx, 1)
		if jctx.Err() != nil {
			t.Fatalf("group %s did not join on %s", group, c.Name)
		}
		if _, gen := cl.GroupMetadata(); gen >= 0 {
			break
		}
	}
	eo := make(map[int32]kgo.EpochOffset)
	for p, o := range offs {
		eo[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var cerr error
	cl.CommitOffsetsSync(jctx, map[string]map[int32]kgo.EpochOffset{topic: eo},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
							cerr = err
						}
					}
				}
			}
		})
	if cerr != nil {
		t.Fatalf("committing %v for group %s on %s: %v", offs, group, c.Name, cerr)
	}
}

// committed returns group's committed offsets of topic on c.
func committed(t *testing.T, c *testkafka.Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	// A cluster no group has used yet makes __consumer_offsets at the
	// first FindCoordinator and answers COORDINATOR_NOT_AVAILABLE (or
	// _LOAD_IN_PROGRESS) until it is ready: that passes.
	var offs kadm.OffsetResponses
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		offs, err = c.Admin(t).FetchOffsets(ctx(t), group)
		if !errors.Is(err, kerr.CoordinatorNotAvailable) && !errors.Is(err, kerr.CoordinatorLoadInProgress) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// expectedDown is where an exact translation puts upstream offset u of
// partition p: the number of records of p below u that reached the target
// (committed records; markers and aborted records are not copied).
func expectedDown(up []*kgo.Record, p int32, u int64) int64 {
	var n int64
	for _, r := range up {
		if r.Partition == p && r.Offset < u {
			n++
		}
	}
	return n
}

// resumeCount compares what a consumer read on the target (records of the
// remote topic, keys as upstream) with what the group had left upstream:
// missed is upstream records at or after commit[p] not read, reread is
// records read whose upstream offset is below commit[p].
func resumeCount(up, read []*kgo.Record, commit map[int32]int64) (missed, reread int) {
	upOff := make(map[string]*kgo.Record, len(up))
	for _, r := range up {
		upOff[string(r.Key)] = r
	}
	seen := make(map[string]bool)
	for _, r := range read {
		u := upOff[string(r.Key)]
		if u == nil {
			continue
		}
		seen[string(r.Key)] = true
		if u.Offset < commit[u.Partition] {
			reread++
		}
	}
	for _, r := range up {
		if r.Offset >= commit[r.Partition] && !seen[string(r.Key)] {
			missed++
		}
	}
	return missed, reread
}

// readGroupOnB joins group on c as a consumer of topic, reads from the
// group's committed offsets (the start where it has none) to the end and
// leaves without committing.
func readGroupOnB(t *testing.T, c *testkafka.Cluster, group, topic string) []*kgo.Record {
	t.Helper()
	ends, err := c.Admin(t).ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	start := committed(t, c, group, topic)
	left := map[int32]int64{} // partition -> end still to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > start[o.Partition] {
			left[o.Partition] = o.Offset
		}
	})
	if len(left) == 0 {
		return nil
	}
	cl := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
			if end, ok := left[r.Partition]; ok && r.Offset >= end-1 {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// member joins group on c as a consumer of topic and stays until the
// returned function is called. KIP-848 members use the consumer protocol.
func member(t *testing.T, c *testkafka.Cluster, group, topic string, kip848 bool) func() {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit()}
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pctx, cancel := context.WithCancel(context.Background())
		go func() { <-stop; cancel() }()
		for pctx.Err() == nil {
			cl.PollFetches(pctx)
		}
	}()
	waitFor(t, 30*time.Second, "a member in group "+group, func() bool {
		_, _, members := describeGroup(t, c, group)
		return members > 0
	})
	var once bool
	leave := func() {
		if once {
			return
		}
		once = true
		close(stop)
		<-done
		cl.Close()
	}
	t.Cleanup(leave)
	return leave
}

// describeGroup returns a group's type, state and member count on c.
func describeGroup(t *testing.T, c *testkafka.Cluster, group string) (string, string, int) {
	t.Helper()
	adm := c.Admin(t)
	listed, err := adm.ListGroups(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := listed[group]
	if !ok {
		return "", "", 0
	}
	if l.GroupType == "consumer" {
		ds, err := adm.DescribeConsumerGroups(ctx(t), group)
		if err != nil {
			t.Fatal(err)
		}
		return l.GroupType, ds[group].State, len(ds[group].Members)
	}
	ds, err := adm.DescribeGroups(ctx(t), group)
	if err != nil {
		t.Fatal(err)
	}
	return l.GroupType, ds[group].State, len(ds[group].Members)
}

// offsetsJSON is the part of "kmirror offsets --output json" the tests read.
type offsetsJSON struct {
	Source     string   `json:"source"`
	Applied    bool     `json:"applied"`
	Notes      []string `json:"notes"`
	Partitions []struct {
		Topic                string `json:"topic"`
		Partition            int32  `json:"partition"`
		Upstream             int64  `json:"upstream_offset"`
		Downstream           int64  `json:"downstream_offset"`
		CheckpointDownstream *int64 `json:"checkpoint_downstream_offset"`
		FreshDownstream      *int64 `json:"translated_downstream_offset"`
		Action               string `json:"action"`
	} `json:"partitions"`
}

// TestFailoverGroupOffsets runs kmirror (exact translation) with
// checkpoints and group offset sync every second while groups sit at
// various points on A, then fails each group over to B: with the synced
// offsets, and separately with "kmirror offsets --apply", a consumer on B
// misses nothing and reads nothing twice. Offsets are never written while
// the group has an active member on B (classic or KIP-848), and never
// moved backwards.
func TestFailoverGroupOffsets(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "failover")
	a.CreateTopic(t, topic, 2, nil)
	// Partition 0: 200 records in batches of 25. Partition 1: 12
	// transactions of 10 (transaction k at 11k..11k+9, its marker at
	// 11k+10), the fourth (33..42) aborted.
	produceFailoverWorkload(t, a, topic, 200, 25, 12, 3)
	up := a.ReadAll(t, topic)

	g := func(s string) string { return topic + "-" + s }
	commits := map[string]map[int32]int64{
		"mid":    {0: 37, 1: 5},    // mid-batch, mid-transaction
		"marker": {0: 50, 1: 10},   // batch boundary, the marker offset
		"after":  {0: 199, 1: 11},  // one short of the end, first record after a marker
		"abort":  {1: 38},          // inside the aborted transaction; partition 0 not at all
		"caught": {0: 200, 1: 132}, // fully caught up
		"rewind": {0: 60, 1: 22},
	}
	for name, offs := range commits {
		commitOnA(t, a, g(name), topic, offs)
	}
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	// The group "rewind" went further on B already (a commit needs the
	// topic to exist).
	b.CreateTopic(t, remote, 2, nil)
	o := make(kadm.Offsets)
	o.Add(kadm.Offset{Topic: remote, Partition: 0, At: 180, LeaderEpoch: -1})
	waitFor(t, 30*time.Second, "a commit on B", func() bool {
		resp, err := b.Admin(t).CommitOffsets(ctx(t), g("rewind"), o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Logf("commit on B: %v", err)
		}
		return err == nil
	})

	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic,
		"groups = "+topic+"-.*",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.groups.interval.seconds = 1",
		"sync.group.offsets.enabled = true",
		"sync.group.offsets.interval.seconds = 1"))
	p := startKmirror(t, cfg)

	want := func(name string) map[int32]int64 {
		out := map[int32]int64{}
		for part, u := range commits[name] {
			out[part] = expectedDown(up, part, u)
		}
		if name == "rewind" {
			out[0] = 180 // never moved back
		}
		return out
	}
	waitFor(t, 90*time.Second, "synced offsets of every group on B", func() bool {
		for name := range commits {
			if fmt.Sprint(committed(t, b, g(name), remote)) != fmt.Sprint(want(name)) {
				return false
			}
		}
		return true
	})

	// 1. Consumers on B resume from the synced offsets.
	for _, name := range []string{"mid", "marker", "after", "abort", "caught", "none"} {
		read := readGroupOnB(t, b, g(name), remote)
		missed, reread := resumeCount(up, read, commits[name])
		t.Logf("group %-6s committed on A %v, synced on B %v: read %d, missed %d, re-read %d",
			name, commits[name], committed(t, b, g(name), remote), len(read), missed, reread)
		if missed != 0 || reread != 0 {
			t.Errorf("group %s: a consumer on B missed %d and re-read %d records, want 0 and 0", name, missed, reread)
		}
	}

	// 2. No write while the group has an active member on B.
	leaveMid := member(t, b, g("mid"), remote, false)
	leaveMarker := member(t, b, g("marker"), remote, true)
	if typ, _, _ := describeGroup(t, b, g("marker")); typ != "consumer" {
		t.Errorf("group %s on B is of type %q, want a KIP-848 consumer group", g("marker"), typ)
	}
	before := map[string]int64{"mid": committed(t, b, g("mid"), remote)[0], "marker": committed(t, b, g("marker"), remote)[0]}
	commits["mid"] = map[int32]int64{0: 120, 1: 5}
	commits["marker"] = map[int32]int64{0: 150, 1: 10}
	commitOnA(t, a, g("mid"), topic, commits["mid"])
	commitOnA(t, a, g("marker"), topic, commits["marker"])
	mc, err := mirrorclient.New(mirrorclient.WithSeedBrokers(b.Bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	waitFor(t, 30*time.Second, "checkpoints of the new commits", func() bool {
		for name, u := range map[string]int64{"mid": 120, "marker": 150} {
			cps, err := mc.RemoteCheckpoints(ctx(t), g(name), src, 10*time.Second)
			if err != nil || cps[mirrorclient.TopicPartition{Topic: remote, Partition: 0}].UpstreamOffset != u {
				return false
			}
		}
		return true
	})
	// A sync after those checkpoints: a group without members on B,
	// committed on A only now, is synced (its checkpoint comes after
	// theirs), and that sync left mid and marker alone.
	commitOnA(t, a, g("witness"), topic, map[int32]int64{0: 120})
	waitFor(t, 30*time.Second, "a sync after the new checkpoints (group witness on B)", func() bool {
		return committed(t, b, g("witness"), remote)[0] == expectedDown(up, 0, 120)
	})
	for _, name := range []string{"mid", "marker"} {
		if got := committed(t, b, g(name), remote)[0]; got != before[name] {
			t.Errorf("group %s moved from %d to %d on B while it had an active member", name, before[name], got)
		}
		out, code := runKmirror(t, 60*time.Second, "offsets", "--config", cfg, "--group", g(name), "--from", src, "--to", dst, "--apply")
		if code == 0 || !strings.Contains(out, "refusing") || !strings.Contains(out, g(name)) || !strings.Contains(out, "active member") {
			t.Errorf("offsets --apply for %s with an active member: exit %d, output:\n%s", name, code, out)
		}
	}
	leaveMid()
	leaveMarker()
	waitFor(t, 30*time.Second, "sync once the members left", func() bool {
		return committed(t, b, g("mid"), remote)[0] == expectedDown(up, 0, 120) &&
			committed(t, b, g("marker"), remote)[0] == expectedDown(up, 0, 150)
	})

	// 3. Never rewinds: "rewind" stays at 180 on B until --allow-rewind.
	if got := committed(t, b, g("rewind"), remote)[0]; got != 180 {
		t.Errorf("group rewind moved back to %d on B", got)
	}
	out, code := runKmirror(t, 60*time.Second, "offsets", "--config", cfg, "--group", g("rewind"), "--from", src, "--to", dst, "--apply")
	if code != 0 || !strings.Contains(out, "not moved backwards from 180 to 60") || !strings.Contains(out, "--allow-rewind") {
		t.Errorf("offsets --apply for a group ahead on B: exit %d, output:\n%s", code, out)
	}
	if got := committed(t, b, g("rewind"), remote)[0]; got != 180 {
		t.Errorf("offsets --apply moved group rewind back to %d", got)
	}
	p.stop()
	out, code = runKmirror(t, 60*time.Second, "offsets", "--config", cfg, "--group", g("rewind"), "--from", src, "--to", dst, "--apply", "--allow-rewind")
	if got := committed(t, b, g("rewind"), remote)[0]; code != 0 || got != 60 {
		t.Errorf("offsets --apply --allow-rewind: exit %d, group at %d, want 60; output:\n%s", code, got, out)
	}

	// 4. "kmirror offsets --apply" alone, with kmirror stopped and the
	// synced groups deleted on B.
	names := []string{"mid", "marker", "after", "abort", "caught"}
	var groups []string
	for _, n := range names {
		groups = append(groups, g(n))
	}
	if _, err := b.Admin(t).DeleteGroups(ctx(t), groups...); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		out, code := runKmirror(t, 60*time.Second, "offsets", "--config", cfg, "--group", g(name), "--from", src, "--to", dst, "--apply", "--output", "json")
		var rep offsetsJSON
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); code != 0 || err != nil || !rep.Applied || rep.Source != "checkpoints" {
			t.Errorf("offsets --apply for %s: exit %d, %v, output:\n%s", name, code, err, out)
			continue
		}
		for _, r := range rep.Partitions {
			// Exact mode: the checkpoint and a fresh translation agree.
			if r.FreshDownstream == nil || *r.FreshDownstream != r.Downstream {
				t.Errorf("group %s %s-%d: checkpoint %d, fresh translation %v", name, r.Topic, r.Partition, r.Downstream, r.FreshDownstream)
			}
		}
		read := readGroupOnB(t, b, g(name), remote)
		missed, reread := resumeCount(up, read, commits[name])
		if missed != 0 || reread != 0 {
			t.Errorf("group %s after offsets --apply: missed %d, re-read %d, want 0 and 0\n%s", name, missed, reread, out)
		}
	}

	// 5. Bad inputs fail with a clear message.
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--group", g("nosuch"), "--from", src, "--to", dst}, "unknown group"},
		// A group that read nothing on B: no reverse translation applies.
		{[]string{"--group", g("nosuch"), "--from", dst, "--to", src}, "no checkpoints"},
		{[]string{"--group", g("mid"), "--from", src, "--to", "nosuch"}, `unknown cluster alias "nosuch"`},
	}
	for _, tt := range bad {
		out, code := runKmirror(t, 60*time.Second, append([]string{"offsets", "--config", cfg}, tt.args...)...)
		if code == 0 || !strings.Contains(out, tt.want) {
			t.Errorf("offsets %v: exit %d, want non-zero and %q; output:\n%s", tt.args, code, tt.want, out)
		}
	}
}

// TestRedeliveryAfterFailover measures, on one workload, how many records
// a consumer re-reads on B when it resumes at the checkpoint of its group:
// kmirror in exact mode, kmirror in mm2 mode and Apache MM2, each
// replicating the same source topic under its own aliases at the same
// time. The table goes to docs/offset-translation.md.
func TestRedeliveryAfterFailover(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "redeliver")
	a.CreateTopic(t, topic, 2, nil)
	// Partition 0: 2000 records in batches of 100. Partition 1: 100
	// transactions of 10 (transaction k at 11k..11k+9, marker at
	// 11k+10), the 41st aborted.
	produceFailoverWorkload(t, a, topic, 2000, 100, 100, 40)
	up := a.ReadAll(t, topic)

	type point struct {
		name  string
		group string
		part  int32
		up    int64
	}
	g := func(s string) string { return topic + "-" + s }
	points := []point{
		{"plain, far behind (150 of 2000)", g("far"), 0, 150},
		{"plain, mid-batch (1037)", g("mid"), 0, 1037},
		{"plain, near the head (1990)", g("near"), 0, 1990},
		{"plain, caught up (2000)", g("caught"), 0, 2000},
		{"transactions, far behind, mid-transaction (57)", g("far"), 1, 57},
		{"transactions, at a marker (560)", g("mid"), 1, 560},
		{"transactions, first record after a marker (1001)", g("near"), 1, 1001},
		{"transactions, caught up (1100)", g("caught"), 1, 1100},
	}
	commits := map[string]map[int32]int64{}
	for _, p := range points {
		if commits[p.group] == nil {
			commits[p.group] = map[int32]int64{}
		}
		commits[p.group][p.part] = p.up
	}
	for group, offs := range commits {
		commitOnA(t, a, group, topic, offs)
	}

	type run struct {
		name, src, dst string
	}
	runs := []run{
		{"kmirror exact", alias(t, "ke"), alias(t, "kd")},
		{"kmirror mm2", alias(t, "me"), alias(t, "md")},
		{"Apache MM2", alias(t, "je"), alias(t, "jd")},
	}
	for i, r := range runs {
		extra := []string{
			r.src + "->" + r.dst + ".topics = " + topic,
			"groups = " + topic + "-.*",
			"emit.checkpoints.interval.seconds = 1",
			"refresh.groups.interval.seconds = 1",
		}
		switch i {
		case 0:
			startKmirror(t, writeFile(t, "mm2.properties", mm2Config(r.src, r.dst, a, b, extra...)))
		case 1:
			startKmirror(t, writeFile(t, "mm2.properties", mm2Config(r.src, r.dst, a, b, append(extra, "kmirror.offset.translation = mm2")...)))
		case 2:
			startMM2(t, writeFile(t, "mm2.properties", mm2Config(r.src, r.dst, a, b, append(extra,
				r.dst+".offset.flush.interval.ms = 1000",
				"offset-syncs.topic.location = target",
				"sync.topic.acls.enabled = false",
				// As kmirror always does: aborted records stay behind.
				r.src+".consumer.isolation.level = read_committed")...)), r.dst)
		}
	}

	// Checkpoints of every run, once they have stopped changing.
	mc, err := mirrorclient.New(mirrorclient.WithSeedBrokers(b.Bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	// read waits up to wait for each group's checkpoints: short while
	// polling, so a run whose checkpoints topic is not there yet (MM2
	// starting on a loaded machine) does not make one poll take minutes.
	read := func(r run, wait time.Duration) map[string]map[mirrorclient.TopicPartition]mirrorclient.Checkpoint {
		out := map[string]map[mirrorclient.TopicPartition]mirrorclient.Checkpoint{}
		for group := range commits {
			cps, err := mc.RemoteCheckpoints(ctx(t), group, r.src, wait)
			if err != nil {
				return nil
			}
			out[group] = cps
		}
		return out
	}
	last := make([]string, len(runs))
	stable := make([]int, len(runs))
	polls := 0
	waitFor(t, 240*time.Second, "checkpoints of every run to settle", func() bool {
		settled := true
		polls++
		for i, r := range runs {
			cps := read(r, 2*time.Second)
			copied := countOrZero(t, b, r.src+"."+topic)
			caught := cps != nil && len(cps[g("caught")]) == 2 && copied == len(up)
			if polls%20 == 0 {
				t.Logf("%s: copied %d of %d, checkpoints %v", r.name, copied, len(up), cps)
			}
			if s := fmt.Sprint(cps); caught && s == last[i] {
				stable[i]++
			} else {
				last[i], stable[i] = s, 0
			}
			settled = settled && stable[i] >= 4
		}
		time.Sleep(750 * time.Millisecond)
		return settled
	})

	table := make([][]string, len(points))
	for ri, r := range runs {
		remote := r.src + "." + topic
		onB := b.ReadAll(t, remote)
		cps := read(r, 10*time.Second)
		for pi, p := range points {
			cp, ok := cps[p.group][mirrorclient.TopicPartition{Topic: remote, Partition: p.part}]
			if !ok {
				table[pi] = append(table[pi], "no checkpoint")
				if ri == 0 {
					t.Errorf("%s: %s: no checkpoint", r.name, p.name)
				}
				continue
			}
			var from []*kgo.Record
			for _, rec := range onB {
				if rec.Partition == p.part && rec.Offset >= cp.DownstreamOffset {
					from = append(from, rec)
				}
			}
			var upPart []*kgo.Record
			for _, rec := range up {
				if rec.Partition == p.part {
					upPart = append(upPart, rec)
				}
			}
			missed, reread := resumeCount(upPart, from, map[int32]int64{p.part: p.up})
			cell := fmt.Sprint(reread)
			switch {
			case missed != 0 && ri < 2:
				t.Errorf("%s: %s: checkpoint %d->%d misses %d records", r.name, p.name, cp.UpstreamOffset, cp.DownstreamOffset, missed)
			case missed != 0: // Apache MM2's result is reported, not judged
				cell += fmt.Sprintf(" (missed %d)", missed)
			}
			table[pi] = append(table[pi], cell)
			if ri == 0 && reread != 0 {
				t.Errorf("%s: %s: checkpoint %d->%d re-reads %d records, want 0", r.name, p.name, cp.UpstreamOffset, cp.DownstreamOffset, reread)
			}
		}
	}
	var sb strings.Builder
	sb.WriteString("\n| group committed at | kmirror exact | kmirror mm2 | Apache MM2 |\n|---|---|---|---|\n")
	for pi, p := range points {
		fmt.Fprintf(&sb, "| %s | %s |\n", p.name, strings.Join(table[pi], " | "))
	}
	t.Logf("records re-read by a consumer resuming on B at the checkpoint:%s", sb.String())
}

// topologyJSON is the part of "kmirror topology --output json" the tests
// read.
type topologyJSON struct {
	Edges []struct {
		Source     string   `json:"source"`
		Target     string   `json:"target"`
		Configured bool     `json:"configured"`
		AgeSeconds *float64 `json:"last_heartbeat_age_seconds"`
	} `json:"replications"`
	Paths             []string `json:"paths"`
	ConfiguredNotSeen []string `json:"configured_not_seen"`
	SeenNotConfigured []string `json:"seen_not_configured"`
}

// TestTopologyChain runs kmirror A->B->C on three clusters and checks
// that "kmirror topology" finds both hops and the path from the
// heartbeats, and sets them against the flows a file configures.
func TestTopologyChain(t *testing.T) {
	t.Parallel()
	cs := testkafka.Start(t, testkafka.Options{Clusters: 3, Nodes: 1})
	base := []string{"clusters = A, B, C"}
	for i, name := range []string{"A", "B", "C"} {
		base = append(base, name+".bootstrap.servers = "+strings.Join(cs[i].Bootstrap, ","))
	}
	base = append(base,
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"refresh.topics.interval.seconds = 1",
		"emit.heartbeats.interval.seconds = 1",
		"topics = none",
	)
	conf := func(flows ...string) string {
		lines := slices.Clone(base)
		for _, f := range flows {
			lines = append(lines, f+".enabled = true")
		}
		return writeFile(t, "mm2.properties", strings.Join(lines, "\n")+"\n")
	}
	cfg := conf("A->B", "B->C")
	startKmirror(t, cfg)

	topo := func(cfg string) (topologyJSON, string) {
		out, code := runKmirror(t, 60*time.Second, "topology", "--config", cfg, "--output", "json")
		var tj topologyJSON
		if code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &tj) != nil {
			t.Fatalf("kmirror topology: exit %d, output:\n%s", code, out)
		}
		return tj, out
	}
	var got topologyJSON
	waitFor(t, 60*time.Second, "the path A->B->C in the heartbeats", func() bool {
		got, _ = topo(cfg)
		if !slices.Contains(got.Paths, "A->B->C") {
			return false
		}
		// A hop can show through a replicated heartbeats topic before its
		// own heartbeat is read: wait until every hop has one.
		for _, e := range got.Edges {
			if e.AgeSeconds == nil {
				return false
			}
		}
		return true
	})
	var edges []string
	for _, e := range got.Edges {
		edges = append(edges, fmt.Sprintf("%s->%s configured=%v", e.Source, e.Target, e.Configured))
		if e.AgeSeconds == nil || *e.AgeSeconds > 30 {
			t.Errorf("edge %s->%s: last heartbeat age %v, want under 30s", e.Source, e.Target, e.AgeSeconds)
		}
	}
	if want := []string{"A->B configured=true", "B->C configured=true"}; !slices.Equal(edges, want) {
		t.Errorf("replications %q, want %q", edges, want)
	}
	if len(got.ConfiguredNotSeen) != 0 || len(got.SeenNotConfigured) != 0 {
		t.Errorf("configured not seen %q, seen not configured %q; want none", got.ConfiguredNotSeen, got.SeenNotConfigured)
	}

	// A file that configures C->A instead of B->C.
	other, out := topo(conf("A->B", "C->A"))
	if !slices.Equal(other.ConfiguredNotSeen, []string{"C->A"}) || !slices.Equal(other.SeenNotConfigured, []string{"B->C"}) {
		t.Errorf("configured not seen %q (want [C->A]), seen not configured %q (want [B->C]):\n%s", other.ConfiguredNotSeen, other.SeenNotConfigured, out)
	}
	text, code := runKmirror(t, 60*time.Second, "topology", "--config", cfg)
	t.Logf("kmirror topology:\n%s", text)
	if code != 0 || !strings.Contains(text, "A->B->C") {
		t.Errorf("text output: exit %d:\n%s", code, text)
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/mirrorclient"
)

// cutoverRun runs "kmirror cutover ARGS..." and returns its stdout, its
// stderr and exit code.
func cutoverRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(kmirrorBin(t), append([]string{"cutover"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// cutoverJSON runs a cutover command with --output json, wants exit code
// want and decodes stdout into v.
func cutoverJSON(t *testing.T, v any, want int, args ...string) {
	t.Helper()
	out, errs, code := cutoverRun(t, append(args, "--output", "json")...)
	if code != want {
		t.Fatalf("kmirror cutover %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kmirror cutover %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The parts of the cutover reports the test reads.
type (
	cutoverGroupState struct {
		Exists  bool     `json:"exists"`
		State   string   `json:"state"`
		Members []string `json:"members"`
	}
	cutoverPlanJSON struct {
		Topics []struct {
			Topic, Remote string
			Partitions    int32 `json:"partitions"`
		} `json:"topics"`
		Groups []struct {
			Group  string            `json:"group"`
			Source cutoverGroupState `json:"source"`
		} `json:"groups"`
		Internal []struct {
			Topic, Cluster, Role string
		} `json:"internal_topics"`
	}
	cutoverStatusJSON struct {
		Ready  bool `json:"ready"`
		Topics []struct {
			Topic      string   `json:"topic"`
			LagRecords int64    `json:"lag_records"`
			Verified   string   `json:"verified"`
			Ready      bool     `json:"ready"`
			Reasons    []string `json:"not_ready_because"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Verify    *struct {
					Source  int `json:"source_records"`
					Matched int `json:"matched"`
				} `json:"verify"`
			} `json:"partitions"`
		} `json:"topics"`
		Groups []struct {
			Group         string   `json:"group"`
			CheckpointAge *float64 `json:"checkpoint_age_seconds"`
			Translation   string   `json:"translation"`
			Ready         bool     `json:"ready"`
			Reasons       []string `json:"not_ready_because"`
		} `json:"groups"`
		StillWriting []string `json:"producers_writing"`
	}
	cutoverSwitchJSON struct {
		DryRun    bool     `json:"dry_run"`
		Committed []string `json:"committed"`
		Refused   []string `json:"refused"`
		Failed    []string `json:"failed"`
		Groups    []struct {
			Group   string       `json:"group"`
			Action  string       `json:"action"`
			Reason  string       `json:"reason"`
			Offsets *offsetsJSON `json:"offsets"`
		} `json:"groups"`
	}
)

// TestCutover migrates a topic (plain records on one partition,
// transactions with an aborted one on the other) from A to B with three
// groups, one still consuming on A, through "kmirror cutover": plan names
// the remote topic and the groups, status is not ready while a producer
// writes or the group is active, switch --dry-run commits nothing, switch
// commits exactly the two idle groups' translated offsets and refuses the
// active one, consumers on B resume at the next record (nothing read
// twice, nothing skipped, keys and values as on A), and the failback B->A
// with the same command puts a group on A where it stopped on B.
func TestCutover(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	cutoverCase(t, cs[0], cs[1])
}

// cutoverCase is TestCutover from a to b (also run from old Kafka
// versions by TestLegacyCutover).
func cutoverCase(t *testing.T, a, b *testkafka.Cluster) {
	topic := testkafka.Topic(t, "cutover")
	live := topic + "-live"
	a.CreateTopic(t, topic, 2, nil)
	a.CreateTopic(t, live, 1, nil)
	produceFailoverWorkload(t, a, topic, 200, 25, 12, 3)
	up := a.ReadAll(t, topic)

	g := func(s string) string { return topic + "-" + s }
	commits := map[string]map[int32]int64{
		"mid":    {0: 37, 1: 5},   // mid-batch, mid-transaction
		"marker": {0: 100, 1: 44}, // batch boundary, after the aborted transaction
		"active": {0: 150, 1: 66},
	}
	for name, offs := range commits {
		commitOnA(t, a, g(name), topic, offs)
	}
	leaveActive := member(t, a, g("active"), topic, false)
	defer leaveActive()

	src, dst := alias(t, "a"), alias(t, "b")
	remote := src + "." + topic
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic+".*",
		"groups = "+topic+"-.*",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.groups.interval.seconds = 1",
	))
	startKmirror(t, cfg)
	flow := "--flow=" + src + "->" + dst
	back := "--flow=" + dst + "->" + src

	// plan: the topics, their remote names, the groups.
	var plan cutoverPlanJSON
	waitFor(t, 60*time.Second, "plan to list "+remote+" created", func() bool {
		cutoverJSON(t, &plan, 0, "plan", cfg, flow)
		return len(plan.Topics) == 2
	})
	if p := plan.Topics[0]; p.Topic != topic || p.Remote != remote || p.Partitions != 2 {
		t.Errorf("plan topic %+v, want %s -> %s, 2 partitions", p, topic, remote)
	}
	var groups []string
	for _, pg := range plan.Groups {
		groups = append(groups, pg.Group)
		if active := len(pg.Source.Members) > 0; active != (pg.Group == g("active")) {
			t.Errorf("plan: group %s on %s: %+v", pg.Group, src, pg.Source)
		}
	}
	if want := []string{g("active"), g("marker"), g("mid")}; !slices.Equal(groups, want) {
		t.Errorf("plan groups %v, want %v", groups, want)
	}
	if !slices.ContainsFunc(plan.Internal, func(it struct{ Topic, Cluster, Role string }) bool {
		return it.Topic == src+".checkpoints.internal" && it.Cluster == dst
	}) {
		t.Errorf("plan internal topics %+v lack %s.checkpoints.internal on %s", plan.Internal, src, dst)
	}

	// status: producers still writing to live are seen.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.Bootstrap...), kgo.DefaultProduceTopic(live))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cl.ProduceSync(pctx, &kgo.Record{Value: []byte("still writing")}).FirstErr()
			cancel()
		}
	}()
	var st cutoverStatusJSON
	cutoverJSON(t, &st, 3, "status", cfg, flow, "--window=2s", "--verify=none")
	close(stop)
	wg.Wait()
	if !slices.Equal(st.StillWriting, []string{live}) {
		t.Errorf("status: producers writing to %v, want [%s]", st.StillWriting, live)
	}

	// status of the topic and the idle groups: ready once copied and
	// checkpointed; with the active group: not ready because of it.
	only := "--topics=" + topic
	idle := "--groups=" + g("mid") + "|" + g("marker")
	waitFor(t, 60*time.Second, "status ready", func() bool {
		out, _, code := cutoverRun(t, "status", cfg, flow, only, idle, "--window=1s", "--verify=all")
		return code == 0 && strings.Contains(out, "READY")
	})
	cutoverJSON(t, &st, 3, "status", cfg, flow, only, "--window=1s", "--verify=50")
	if len(st.Topics) != 1 || !st.Topics[0].Ready || st.Topics[0].LagRecords != 0 || st.Topics[0].Verified != "ok" {
		t.Errorf("status topics: %+v", st.Topics)
	}
	for _, ps := range st.Topics[0].Partitions {
		// The last 50 offsets: 50 records on the plain partition 0,
		// fewer on partition 1 (transaction markers, aborted records).
		if v := ps.Verify; v == nil || v.Matched != v.Source || v.Source > 50 || v.Source < 40 || ps.Partition == 0 && v.Source != 50 {
			t.Errorf("status: partition %d: verify of the last 50 offsets: %+v", ps.Partition, v)
		}
	}
	for _, sg := range st.Groups {
		if sg.Ready == (sg.Group == g("active")) || sg.CheckpointAge == nil {
			t.Errorf("status group %+v", sg)
		}
		if sg.Group == g("active") && !strings.Contains(strings.Join(sg.Reasons, ";"), "active member") {
			t.Errorf("status: group %s not ready for %v, want its active member", sg.Group, sg.Reasons)
		}
	}

	// switch --dry-run commits nothing.
	var sw cutoverSwitchJSON
	cutoverJSON(t, &sw, 3, "switch", cfg, flow, "--dry-run")
	if !sw.DryRun || !slices.Equal(sw.Committed, []string{g("marker"), g("mid")}) || !slices.Equal(sw.Refused, []string{g("active")}) {
		t.Errorf("switch --dry-run: %+v", sw)
	}
	for name := range commits {
		if c := committed(t, b, g(name), remote); len(c) != 0 {
			t.Errorf("after --dry-run, group %s has offsets %v on %s", g(name), c, dst)
		}
	}

	// switch: the two idle groups, with a report kept.
	reports := t.TempDir()
	cutoverJSON(t, &sw, 3, "switch", cfg, flow, "--report-dir", reports)
	if sw.DryRun || !slices.Equal(sw.Committed, []string{g("marker"), g("mid")}) || !slices.Equal(sw.Refused, []string{g("active")}) || len(sw.Failed) != 0 {
		t.Fatalf("switch: %+v", sw)
	}
	for _, gs := range sw.Groups {
		got := committed(t, b, gs.Group, remote)
		if gs.Group == g("active") {
			if len(got) != 0 || !strings.Contains(gs.Reason, "active member") {
				t.Errorf("switch: active group %s: reason %q, offsets on %s %v", gs.Group, gs.Reason, dst, got)
			}
			continue
		}
		want := map[int32]int64{}
		for _, r := range gs.Offsets.Partitions {
			want[r.Partition] = r.Downstream
		}
		if len(want) != 2 || !mapsEqual(got, want) {
			t.Errorf("group %s on %s: committed %v, the report says %v", gs.Group, dst, got, want)
		}
	}
	checkReportFiles(t, reports)

	// Consumers on B resume at the next record.
	onB := b.ReadAll(t, remote)
	for _, name := range []string{"mid", "marker"} {
		read := readGroupFrom(t, b, g(name), remote, onB)
		sameAsUpstream(t, up, read)
		if missed, reread := resumeCount(up, read, commits[name]); missed != 0 || reread != 0 {
			t.Errorf("group %s on %s: %d records missed, %d read twice", g(name), dst, missed, reread)
		}
	}

	// Failback B->A: the group consumed on B up to D and stopped.
	d := map[int32]int64{}
	want := map[int32]int64{}
	for _, p := range []int32{0, 1} {
		var ps []*kgo.Record
		for _, r := range onB {
			if r.Partition == p {
				ps = append(ps, r)
			}
		}
		r := ps[len(ps)*2/3]
		d[p] = r.Offset
		for _, u := range up {
			if string(u.Key) == string(r.Key) {
				want[p] = u.Offset
			}
		}
	}
	commitOnA(t, b, g("mid"), remote, d)
	cutoverJSON(t, &sw, 0, "switch", cfg, back, "--groups="+g("mid"))
	if !slices.Equal(sw.Committed, []string{g("mid")}) {
		t.Fatalf("failback switch: %+v", sw)
	}
	if got := committed(t, a, g("mid"), topic); !mapsEqual(got, want) {
		t.Errorf("failback: group %s on %s at %v, want %v (the records it had not read on %s)", g("mid"), src, got, want, dst)
	}
	read := readGroupFrom(t, a, g("mid"), topic, up)
	if missed, reread := resumeCount(up, read, want); missed != 0 || reread != 0 {
		t.Errorf("failback: group %s on %s: %d records missed, %d read twice", g("mid"), src, missed, reread)
	}
}

// sameAsUpstream checks that every record read on the target has the key
// and value of the upstream record with its key.
func sameAsUpstream(t *testing.T, up, read []*kgo.Record) {
	t.Helper()
	byKey := make(map[string]*kgo.Record, len(up))
	for _, r := range up {
		byKey[string(r.Key)] = r
	}
	for _, r := range read {
		u := byKey[string(r.Key)]
		if u == nil || !bytes.Equal(u.Value, r.Value) {
			t.Errorf("record %q at %s-%d@%d is not on the source as read", r.Key, r.Topic, r.Partition, r.Offset)
		}
	}
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkReportFiles checks that switch kept its report as JSON and text.
func checkReportFiles(t *testing.T, dir string) {
	t.Helper()
	js, _ := filepath.Glob(filepath.Join(dir, "cutover-switch-*.json"))
	txt, _ := filepath.Glob(filepath.Join(dir, "cutover-switch-*.txt"))
	if len(js) != 1 || len(txt) != 1 {
		t.Fatalf("report files in %s: %v %v", dir, js, txt)
	}
	var sw cutoverSwitchJSON
	data, err := os.ReadFile(js[0])
	if err == nil {
		err = json.Unmarshal(data, &sw)
	}
	if err != nil || len(sw.Committed) != 2 {
		t.Errorf("report %s: %v\n%s", js[0], err, data)
	}
	if text, _ := os.ReadFile(txt[0]); !bytes.Contains(text, []byte("2 committed, 1 refused")) {
		t.Errorf("report %s:\n%s", txt[0], text)
	}
}

// TestLegacyCutover is TestCutover from the old Kafka versions of the
// compatibility matrix (make test-compat, KMIRROR_COMPAT_SOURCES; from
// 2.8 on, e.g. 2.8.2 on ZooKeeper) into the current Kafka: a migration
// from a self-run old cluster to a new one. It starts a cluster of its own
// per version, so make test skips it.
func TestLegacyCutover(t *testing.T) {
	t.Parallel()
	if os.Getenv(envLegacySources) == "" {
		t.Skipf("%s is not set: the compatibility matrix (make test-compat) runs this test", envLegacySources)
	}
	for _, sv := range legacyVersions(envLegacySources, "") {
		var major, minor int
		if _, err := fmt.Sscanf(sv, "%d.%d", &major, &minor); err != nil {
			t.Fatalf("%s: version %q: %v", envLegacySources, sv, err)
		}
		if major < 2 || major == 2 && minor < 8 {
			continue // migrations are tested from 2.8 on
		}
		t.Run(sv+"->"+testkafka.KafkaVersion(), func(t *testing.T) {
			t.Parallel()
			a := testkafka.Start(t, testkafka.Options{Version: sv})[0]
			cutoverCase(t, a, testkafka.Shared(t, 1)[0])
		})
	}
}

// TestCutoverSourceDown is an unplanned failover: A is gone (the file's
// address for it answers nothing), so "switch --source-down" takes the
// groups with checkpoints on B and commits their checkpointed offsets;
// without --source-down the command says what to do. A consumer on B
// resumes at the next record.
func TestCutoverSourceDown(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "cutoverdown")
	a.CreateTopic(t, topic, 2, nil)
	produceFailoverWorkload(t, a, topic, 120, 20, 6, 2)
	up := a.ReadAll(t, topic)
	group := topic + "-g"
	commit := map[int32]int64{0: 45, 1: 27}
	commitOnA(t, a, group, topic, commit)

	src, dst := alias(t, "a"), alias(t, "b")
	remote := src + "." + topic
	extra := []string{src + "->" + dst + ".topics = " + topic, "groups = " + topic + "-.*", "emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1"}
	body := mm2Config(src, dst, a, b, extra...)
	k := startKmirror(t, writeFile(t, "mm2.properties", body))
	mc, err := mirrorclient.New(mirrorclient.WithSeedBrokers(b.Bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	waitFor(t, 60*time.Second, "checkpoints of "+group, func() bool {
		cps, err := mc.RemoteCheckpoints(ctx(t), group, src, 10*time.Second)
		return err == nil && len(cps) == 2 && cps[mirrorclient.TopicPartition{Topic: remote, Partition: 0}].UpstreamOffset == commit[0]
	})
	k.stop()

	// A is gone: the same file with A's address answering nothing.
	cfg := writeFile(t, "down.properties", strings.Replace(body,
		src+".bootstrap.servers = "+strings.Join(a.Bootstrap, ","), src+".bootstrap.servers = 127.0.0.1:1", 1))
	flow := "--flow=" + src + "->" + dst
	if out, errs, code := cutoverRun(t, "switch", cfg, flow); code != 1 || !strings.Contains(errs, "--source-down") {
		t.Errorf("switch with %s down: exit %d, want 1 and a hint at --source-down\n%s\n%s", src, code, out, errs)
	}
	var st cutoverStatusJSON
	cutoverJSON(t, &st, 0, "status", cfg, flow, "--source-down")
	if len(st.Topics) != 0 || len(st.Groups) != 1 || st.Groups[0].Group != group || st.Groups[0].CheckpointAge == nil ||
		st.Groups[0].Translation != "checkpoints-only" || !st.Groups[0].Ready {
		t.Errorf("status --source-down: %+v", st)
	}
	var sw cutoverSwitchJSON
	cutoverJSON(t, &sw, 0, "switch", cfg, flow, "--source-down")
	if !slices.Equal(sw.Committed, []string{group}) || len(sw.Groups) != 1 || sw.Groups[0].Offsets.Source != "checkpoints" {
		t.Fatalf("switch --source-down: %+v", sw)
	}
	read := readGroupFrom(t, b, group, remote, b.ReadAll(t, remote))
	sameAsUpstream(t, up, read)
	if missed, reread := resumeCount(up, read, commit); missed != 0 || reread != 0 {
		t.Errorf("group %s on %s: %d records missed, %d read twice", group, dst, missed, reread)
	}
}

package cutover

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/offsetplan"
)

// flow parses a two-cluster file (A->B enabled, extra lines appended) and
// returns the flow from->to.
func flow(t *testing.T, a, b string, from, to string, extra ...string) (*config.Config, *config.Flow) {
	t.Helper()
	body := "clusters = A, B\nA.bootstrap.servers = " + a + "\nB.bootstrap.servers = " + b + "\nA->B.enabled = true\n" +
		strings.Join(extra, "\n") + "\n"
	cfg, err := config.Parse("mm2.properties", []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cfg.Pair(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, f
}

func TestExcludeReason(t *testing.T) {
	_, f := flow(t, "127.0.0.1:1", "127.0.0.1:1", "A", "B", "A->B.topics = orders.*, B\\..*", "A->B.topics.exclude = orders-test", "heartbeats.replication.enabled = false")
	sy := syncer(f, &conns{})
	for _, c := range []struct {
		topic string
		only  string
		want  string
	}{
		{"orders", "", ""},
		{"orders-eu", "", ""},
		{"orders-eu", "orders", ReasonTopics},
		{"orders", "orders", ""},
		{"orders-test", "", ReasonFilter},
		{"payments", "", ReasonFilter},
		{"__consumer_offsets", "", ReasonInternal},
		{"mm2-offset-syncs.B.internal", "", ReasonInternal},
		{"B.checkpoints.internal", "", ReasonInternal},
		{"B.orders", "", ReasonCycle}, // selected by the filter, but came from B
		{"heartbeats", "", ReasonBeats},
		{"C.heartbeats", "", ReasonBeats},
	} {
		var only *regexp.Regexp
		if c.only != "" {
			only = regexp.MustCompile("^(?:" + c.only + ")$")
		}
		if got := excludeReason(sy, only, c.topic); got != c.want {
			t.Errorf("%s (--topics %q): %q, want %q", c.topic, c.only, got, c.want)
		}
	}
}

func TestGroupReason(t *testing.T) {
	_, f := flow(t, "127.0.0.1:1", "127.0.0.1:1", "A", "B", "groups = billing.*|shipping", "groups.exclude = billing-test")
	for _, c := range []struct {
		group, only, want string
	}{
		{"billing", "", ""},
		{"billing-eu", "", ""},
		{"billing-test", "", ReasonGroups},
		{"other", "", ReasonGroups},
		{"shipping", "billing.*", ReasonGroupsRE},
		{"billing-eu", "billing.*", ""},
	} {
		var only *regexp.Regexp
		if c.only != "" {
			only = regexp.MustCompile("^(?:" + c.only + ")$")
		}
		if got := groupReason(f, only, c.group); got != c.want {
			t.Errorf("%s (--groups %q): %q, want %q", c.group, c.only, got, c.want)
		}
	}
}

func TestGroupStateActive(t *testing.T) {
	for _, c := range []struct {
		g    GroupState
		want bool
	}{
		{GroupState{}, false},
		{GroupState{Exists: true, State: "Empty"}, false},
		{GroupState{Exists: true, State: "Dead"}, false},
		{GroupState{Exists: true, State: "Stable", Members: []string{"m1"}}, true},
		{GroupState{Exists: true, State: "PreparingRebalance"}, true}, // joining, no member listed yet
		{GroupState{Exists: true, State: "Empty", Members: []string{"m1"}}, true},
	} {
		if got := c.g.Active(); got != c.want {
			t.Errorf("%+v: active %v, want %v", c.g, got, c.want)
		}
	}
}

func p(v int64) *int64 { return &v }

func TestTranslationKind(t *testing.T) {
	row := func(cp, fresh *int64) offsetplan.Row {
		return offsetplan.Row{Topic: "A.t", CheckpointDownstream: cp, FreshDownstream: fresh}
	}
	for _, c := range []struct {
		name string
		rep  offsetplan.Report
		want string
	}{
		{"no partitions", offsetplan.Report{Mode: "exact"}, TranslationNone},
		{"checkpoints agree", offsetplan.Report{Mode: "exact", Partitions: []offsetplan.Row{row(p(5), p(5)), row(p(7), p(7))}}, TranslationExact},
		{"checkpoint behind", offsetplan.Report{Mode: "exact", Partitions: []offsetplan.Row{row(p(5), p(5)), row(p(7), p(9))}}, TranslationFresh},
		{"fresh only", offsetplan.Report{Mode: "exact", Partitions: []offsetplan.Row{row(nil, p(9))}}, TranslationFresh},
		{"source gone", offsetplan.Report{Mode: "exact", Partitions: []offsetplan.Row{row(p(5), p(5)), row(p(7), nil)}}, TranslationCkpt},
		{"mm2 mode", offsetplan.Report{Mode: "mm2", Partitions: []offsetplan.Row{row(p(5), p(5))}}, TranslationApprox},
		{"failback", offsetplan.Report{Mode: "exact", Source: offsetplan.UseReverse, Partitions: []offsetplan.Row{row(nil, p(5))}}, TranslationReverse},
	} {
		if got := translationKind(&c.rep); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReadiness(t *testing.T) {
	for _, c := range []struct {
		name string
		t    TopicStatus
		want []string
	}{
		{"ready", TopicStatus{Verified: "ok"}, nil},
		{"verify skipped", TopicStatus{Verified: "skipped"}, nil},
		{"lag", TopicStatus{Verified: "ok", LagRecords: 12, LagSeconds: 3}, []string{"12 records not copied yet (oldest 3 s)"}},
		{"differs", TopicStatus{Verified: "differs"}, []string{"the copy differs from the source (see verify)"}},
		{"writing", TopicStatus{Verified: "ok", Writing: true}, []string{"producers still write to it on the source"}},
	} {
		ok, why := topicReady(c.t)
		if ok != (len(c.want) == 0) || !reflect.DeepEqual(why, c.want) {
			t.Errorf("topic %s: %v %q, want %q", c.name, ok, why, c.want)
		}
	}
}

func TestDiffConfigs(t *testing.T) {
	_, f := flow(t, "127.0.0.1:1", "127.0.0.1:1", "A", "B", "config.properties.exclude = min.insync.replicas")
	s := func(v string) *string { return &v }
	topicCfg := func(k, v string) kadm.Config {
		return kadm.Config{Key: k, Value: s(v), Source: kmsg.ConfigSourceDynamicTopicConfig}
	}
	deflt := func(k, v string) kadm.Config {
		return kadm.Config{Key: k, Value: s(v), Source: kmsg.ConfigSourceDefaultConfig}
	}
	src := []kadm.Config{topicCfg("retention.ms", "1000"), topicCfg("cleanup.policy", "compact"), topicCfg("min.insync.replicas", "2"),
		deflt("segment.bytes", "1073741824"), {Key: "secret", Value: s("x"), Source: kmsg.ConfigSourceDynamicTopicConfig, Sensitive: true}}
	tgt := []kadm.Config{topicCfg("retention.ms", "1000"), deflt("cleanup.policy", "delete"), deflt("min.insync.replicas", "1"),
		deflt("segment.bytes", "1073741824"), topicCfg("max.message.bytes", "2000000")}
	got := diffConfigs(src, tgt, &Options{Flow: f})
	want := []ConfigDiff{
		{Key: "cleanup.policy", Source: s("compact")},
		{Key: "max.message.bytes", Target: s("2000000")},
		{Key: "min.insync.replicas", Source: s("2"), Excluded: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diffs:\n%+v\nwant\n%+v", got, want)
	}
}

// fakePair starts two in-process clusters A and B: on A topics orders,
// payments, B.orders and other, an idle group billing (committed on
// orders), an idle group reader (committed on other only) and a group
// shipping with an active member; on B the remote topic A.orders with a
// config of its own. The file's A->B selects orders, payments and
// B.orders, and the three groups.
func fakePair(t *testing.T) (context.Context, *config.Config, *config.Flow) {
	t.Helper()
	ca, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ca.Close)
	cb, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cla, err := kgo.NewClient(kgo.SeedBrokers(ca.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cla.Close)
	clb, err := kgo.NewClient(kgo.SeedBrokers(cb.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clb.Close)
	adma, admb := kadm.NewClient(cla), kadm.NewClient(clb)
	for _, tp := range []string{"orders", "payments", "B.orders", "other"} {
		if _, err := adma.CreateTopic(ctx, 2, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admb.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("5000")}, "A.orders"); err != nil {
		t.Fatal(err)
	}
	// An idle group (committed, no member) and an active one on A.
	if _, err := adma.CommitOffsets(ctx, "billing", kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 0, Offset: 4})); err != nil {
		t.Fatal(err)
	}
	if _, err := adma.CommitOffsets(ctx, "reader", kadm.OffsetsFromRecords(kgo.Record{Topic: "other", Partition: 0, Offset: 4})); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(ca.ListenAddrs()...), kgo.ConsumerGroup("shipping"), kgo.ConsumeTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Close)
	go member.PollFetches(ctx)
	for {
		ds, _ := adma.DescribeGroups(ctx, "shipping")
		if len(ds["shipping"].Members) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the member of shipping did not join")
		}
		time.Sleep(50 * time.Millisecond)
	}

	cfg, f := flow(t, strings.Join(ca.ListenAddrs(), ","), strings.Join(cb.ListenAddrs(), ","), "A", "B",
		"A->B.topics = orders|payments|B\\.orders", "groups = billing|shipping|reader")
	return ctx, cfg, f
}

// TestPlanOnFakeClusters runs Plan against two in-process clusters: the
// topics that move and those that do not (with why), the groups with
// their members on either side, and the flow's internal topics.
func TestPlanOnFakeClusters(t *testing.T) {
	ctx, cfg, f := fakePair(t)
	rep, err := Plan(ctx, &Options{Config: cfg, Flow: f, Topics: regexp.MustCompile("^(?:orders|B\\.orders|other)$")})
	if err != nil {
		t.Fatal(err)
	}
	wantTopics := []TopicPlan{{Topic: "orders", Remote: "A.orders", Partitions: 2, RemotePartitions: 2,
		ConfigDiffs: []ConfigDiff{{Key: "retention.ms", Target: kadm.StringPtr("5000")}}}}
	if !reflect.DeepEqual(rep.Topics, wantTopics) {
		t.Errorf("topics %+v, want %+v", rep.Topics, wantTopics)
	}
	wantEx := map[string]string{"B.orders": ReasonCycle, "other": ReasonFilter, "payments": ReasonTopics}
	gotEx := map[string]string{}
	for _, e := range rep.Excluded {
		gotEx[e.Name] = e.Reason
	}
	for k, v := range wantEx {
		if gotEx[k] != v {
			t.Errorf("excluded %s: %q, want %q (all: %v)", k, gotEx[k], v, gotEx)
		}
	}
	if len(rep.Groups) != 3 || rep.Groups[0].Group != "billing" || rep.Groups[0].Source.Active() || rep.Groups[1].Group != "reader" ||
		rep.Groups[2].Group != "shipping" || !rep.Groups[2].Source.Active() || rep.Groups[2].Target.Exists {
		t.Errorf("groups %+v", rep.Groups)
	}
	if len(rep.Internal) != 4 || rep.Internal[2].Topic != "A.checkpoints.internal" || rep.Internal[2].Cluster != "B" {
		t.Errorf("internal topics %+v", rep.Internal)
	}
}

// TestSwitchOnFakeClusters: the active group is refused, the group that
// consumed only a topic that does not move is skipped, and billing, which
// has no checkpoints or offset syncs on these clusters, fails with why;
// nothing is committed on B.
func TestSwitchOnFakeClusters(t *testing.T) {
	ctx, cfg, f := fakePair(t)
	rep, err := Switch(ctx, &Options{Config: cfg, Flow: f, Timeout: 10 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Refused, []string{"shipping"}) || !reflect.DeepEqual(rep.Skipped, []string{"reader"}) ||
		!reflect.DeepEqual(rep.Failed, []string{"billing"}) || len(rep.Committed) != 0 {
		t.Fatalf("switch: %+v", rep)
	}
	for _, g := range rep.Groups {
		want := map[string]string{"shipping": "1 active member(s) on A", "reader": NothingToMove, "billing": "no offsets to commit"}[g.Group]
		if !strings.Contains(g.Reason, want) {
			t.Errorf("group %s: %s %q, want %q", g.Group, g.Action, g.Reason, want)
		}
	}
}

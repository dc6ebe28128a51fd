package checkpoint

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
)

func TestNewer(t *testing.T) {
	last := wire.Checkpoint{UpstreamOffset: 100, DownstreamOffset: 90}
	tests := []struct {
		name     string
		up, down int64
		had      bool
		want     bool
	}{
		{"first", 5, 5, false, true},
		{"same", 100, 90, true, false},
		{"downstream advances", 110, 95, true, true},
		{"upstream advances, downstream not", 110, 90, true, false},
		{"upstream rewind", 50, 40, true, true},
		{"downstream rewind alone", 100, 80, true, false},
	}
	for _, tt := range tests {
		c := wire.Checkpoint{UpstreamOffset: tt.up, DownstreamOffset: tt.down}
		if got := newer(c, last, tt.had); got != tt.want {
			t.Errorf("%s: newer = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPlanCommit(t *testing.T) {
	cps := []wire.Checkpoint{
		{Group: "g", Topic: "A.t", Partition: 0, DownstreamOffset: 10},
		{Group: "g", Topic: "A.t", Partition: 1, DownstreamOffset: 20},
		{Group: "g", Topic: "A.t", Partition: 2, DownstreamOffset: 30},
	}
	tests := []struct {
		name string
		g    targetGroup
		want []int32 // partitions written
	}{
		{"missing group gets everything", targetGroup{}, []int32{0, 1, 2}},
		{"active group gets nothing", targetGroup{exists: true, active: true}, nil},
		{"idle group advances only", targetGroup{exists: true, offs: map[cpKey]int64{
			{"A.t", 0}: 15, // ahead of the checkpoint: never rewound
			{"A.t", 1}: 20, // equal: nothing to do
			{"A.t", 2}: 5,
		}}, []int32{2}},
		{"idle group without offsets", targetGroup{exists: true}, []int32{0, 1, 2}},
	}
	for _, tt := range tests {
		var got []int32
		for _, c := range planCommit(tt.g, cps) {
			got = append(got, c.Partition)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: wrote %v, want %v", tt.name, got, tt.want)
		}
	}
}

// testFlow returns an A->B flow over the given bootstrap addresses.
func testFlow(src, dst []string, mode string) *config.Flow {
	props := func(addrs []string) map[string]string {
		return map[string]string{"bootstrap.servers": strings.Join(addrs, ",")}
	}
	tr, ok := config.ParseOffsetTranslation(mode)
	if !ok {
		panic("bad mode " + mode)
	}
	return built(&config.Flow{
		Source: "A", Target: "B", Enabled: true,
		OffsetTranslation:                 tr,
		Topics:                            policy.DefaultTopics,
		TopicsExclude:                     policy.DefaultTopicsExclude,
		Groups:                            policy.DefaultGroups,
		GroupsExclude:                     policy.DefaultGroupsExclude,
		InternalSeparatorEnabled:          true,
		OffsetSyncsTopicLocation:          "target",
		CheckpointsTopicReplicationFactor: 1,
		OffsetSyncsTopicReplicationFactor: 1,
		EmitOffsetSyncsEnabled:            true,
		EmitCheckpointsEnabled:            true,
		EmitCheckpointsInterval:           100 * time.Millisecond,
		RefreshGroupsEnabled:              true,
		RefreshGroupsInterval:             100 * time.Millisecond,
		SyncGroupOffsetsEnabled:           true,
		SyncGroupOffsetsInterval:          100 * time.Millisecond,
		SourceAdmin:                       props(src),
		SourceConsumer:                    props(src),
		TargetAdmin:                       props(dst),
		TargetConsumer:                    props(dst),
		TargetProducer:                    props(dst),
	})
}

// built sets what config builds at load from f's settings: the policy and
// the filters. Tests that change f's lists call it again.
func built(f *config.Flow) *config.Flow {
	var err error
	if f.Policy, err = policy.New(policy.Config{Class: f.PolicyClass, Separator: f.Separator, SeparatorSet: f.SeparatorSet,
		InternalSeparatorEnabled: f.InternalSeparatorEnabled, SourceAlias: f.Source}); err != nil {
		panic(err)
	}
	if f.TopicFilter, err = policy.NewFilter(f.Topics, f.TopicsExclude); err != nil {
		panic(err)
	}
	if f.GroupFilter, err = policy.NewFilter(f.Groups, f.GroupsExclude); err != nil {
		panic(err)
	}
	return f
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func syncRec(topic string, s wire.OffsetSync) *kgo.Record {
	k, v, _ := wire.Encode(s)
	return &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: v}
}

func readCheckpoints(t *testing.T, cl *kgo.Client, topic string) map[string]wire.Checkpoint {
	t.Helper()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.Checkpoint{}
	o, _ := ends.Lookup(topic, 0)
	if o.Offset <= 0 {
		return out
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for next := int64(0); next < o.Offset; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("timeout reading checkpoints")
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			if c, err := wire.DecodeCheckpoint(r.Key, r.Value); err == nil {
				out[c.Group+"/"+c.Topic] = c
			}
		})
	}
	return out
}

// TestTaskKfake runs the task against two fake clusters: syncs, a corrupt
// record and a foreign one in the syncs topic, a group on the source.
func TestTaskKfake(t *testing.T) {
	for _, mode := range []string{"exact", "mm2"} {
		t.Run(mode, func(t *testing.T) {
			src, srcCl := testkafka.Fake(t)
			dst, dstCl := testkafka.Fake(t)
			f := testFlow(src.ListenAddrs(), dst.ListenAddrs(), mode)
			syncs := f.OffsetSyncsTopic()
			ctx := context.Background()
			dadm := kadm.NewClient(dstCl)
			if _, err := dadm.CreateTopic(ctx, 1, 1, nil, syncs); err != nil {
				t.Fatal(err)
			}
			if _, err := dadm.CreateTopic(ctx, 1, 1, nil, "A.t"); err != nil {
				t.Fatal(err)
			}
			// A corrupt checkpoint already in the checkpoints topic.
			if _, err := dadm.CreateTopic(ctx, 1, 1, nil, "A.checkpoints.internal"); err != nil {
				t.Fatal(err)
			}
			produce(t, dstCl, &kgo.Record{Topic: "A.checkpoints.internal", Partition: 0, Key: []byte{0xff}, Value: []byte("x")})
			// Syncs: t-0 copied 0..99 -> 0..99 with a transaction
			// marker at 50 (51 -> 50), plus junk.
			produce(t, dstCl,
				syncRec(syncs, wire.OffsetSync{Topic: "t", UpstreamOffset: 0, DownstreamOffset: 0}),
				&kgo.Record{Topic: syncs, Partition: 0, Key: []byte("garbage"), Value: nil},
				syncRec(syncs, wire.OffsetSync{Topic: "t", UpstreamOffset: 51, DownstreamOffset: 50}),
				syncRec(syncs, wire.OffsetSync{Topic: "t", UpstreamOffset: 100, DownstreamOffset: 99}),
			)
			sadm := kadm.NewClient(srcCl)
			if _, err := sadm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
				t.Fatal(err)
			}
			if _, err := sadm.CreateTopic(ctx, 1, 1, nil, "u"); err != nil { // no offset syncs
				t.Fatal(err)
			}
			commitTo := func(g, topic string, at int64) {
				o := make(kadm.Offsets)
				o.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1, Metadata: "m"})
				if _, err := sadm.CommitOffsets(ctx, g, o); err != nil {
					t.Fatal(err)
				}
			}
			commit := func(g string, at int64) { commitTo(g, "t", at) }
			commit("mid", 30)
			commit("half", 40)
			commitTo("half", "u", 7)                                                  // not translatable: u has no offset syncs
			if _, err := sadm.CreateTopic(ctx, 1, 1, nil, "x.internal"); err != nil { // not replicated
				t.Fatal(err)
			}
			commitTo("elsewhere", "x.internal", 3) // no status: nothing of it is replicated
			commit("marker", 51)                   // committed right after the marker
			commit("head", 101)

			m := metrics.New()
			task, err := New(Config{Flow: f, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- task.Run(rctx) }()
			want := map[string]int64{"mid/A.t": 30, "marker/A.t": 50, "head/A.t": 100, "half/A.t": 40}
			if mode == "mm2" {
				want["mid/A.t"] = 1
				want["half/A.t"] = 1
			}
			var got map[string]wire.Checkpoint
			testwait.For(t, 15*time.Second, "checkpoints", func() bool {
				got = readCheckpoints(t, dstCl, "A.checkpoints.internal")
				return len(got) == 4
			})
			for k, w := range want {
				if got[k].DownstreamOffset != w || got[k].Metadata != "m" {
					t.Errorf("%s: checkpoint %+v, want downstream %d", k, got[k], w)
				}
			}
			// Group offsets synced into the (missing) target groups.
			testwait.For(t, 15*time.Second, "group offsets on the target", func() bool {
				o, err := dadm.FetchOffsets(ctx, "head")
				if err != nil {
					return false
				}
				r, ok := o.Lookup("A.t", 0)
				return ok && r.At == 100
			})
			// What the dashboard's cutover panel reads of each group:
			// checked, translated in full or not, synced to the target;
			// of the four with offsets in replicated topics only.
			testwait.For(t, 15*time.Second, "group status of every group synced", func() bool {
				gs := m.LastCheckpoints.Groups()
				if len(gs) != 4 {
					return false
				}
				for _, g := range gs {
					if g.SyncedAt.IsZero() {
						return false
					}
				}
				return true
			})
			for _, g := range m.LastCheckpoints.Groups() {
				wantC, wantU := 1, 0
				if g.Group == "half" {
					wantC, wantU = 2, 1
				}
				if g.Source != "A" || g.Target != "B" || g.CheckedAt.IsZero() || g.Interval != f.EmitCheckpointsInterval ||
					g.Committed != wantC || g.Untranslated != wantU || !g.Sync || g.TargetState != "Empty" || g.SyncBehind != 0 || g.SourceState != "Empty" {
					t.Errorf("group status %+v, want checked, %d committed, %d untranslated, Empty on the source, synced into an Empty target group", g, wantC, wantU)
				}
			}
			if n := testutil.ToFloat64(m.CorruptRecords.WithLabelValues("B", syncs)); n != 1 {
				t.Errorf("corrupt offset syncs counted %v, want 1", n)
			}
			if n := testutil.ToFloat64(m.CorruptRecords.WithLabelValues("B", "A.checkpoints.internal")); n != 1 {
				t.Errorf("corrupt checkpoints counted %v, want 1", n)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFlowSettings(t *testing.T) {
	tests := []struct {
		name string
		f    config.Flow
		want Settings
	}{
		{"defaults", config.Flow{Source: "A"},
			Settings{Mode: Exact, IndexTopic: offsetsync.IndexTopic("A"), IndexRetention: offsetsync.DefaultIndexRetention, MaxSyncs: DefaultMaxSyncs}},
		{"mm2", config.Flow{Source: "A", OffsetTranslation: config.TranslationMM2},
			Settings{Mode: MM2, IndexRetention: offsetsync.DefaultIndexRetention, MaxSyncs: DefaultMaxSyncs}},
		{"set", config.Flow{Source: "A", OffsetIndexRetention: -time.Millisecond, MaxSyncsPerPartition: 8},
			Settings{Mode: Exact, IndexTopic: offsetsync.IndexTopic("A"), IndexRetention: -time.Millisecond, MaxSyncs: 8}},
	}
	for _, tt := range tests {
		if got := FlowSettings(&tt.f); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestIndexThenSyncs: at start the task reads the offset index to its
// end, then the offset-syncs topic. Syncs the writer added in between
// (the index ends earlier than the syncs topic) must not be lost: with
// only the newest of them, an offset at a transaction marker past the
// index's end translated too far ahead and a consumer resuming there
// missed records.
func TestIndexThenSyncs(t *testing.T) {
	// Transactions of 10 records, each ended by a marker (transaction k
	// at 11k..11k+9, marker at 11k+10); the third is aborted and not
	// copied.
	txns := func(p *pipeline) {
		for k := int64(0); k < 20; k++ {
			if k != 2 {
				p.copy(span(11*k, 11*k+10)...)
			}
		}
	}
	cases := []struct {
		name  string
		build func(p *pipeline)
		index int  // syncs the index holds: a prefix of the syncs topic
		exact bool // nothing re-read at any committed offset
	}{
		{"index holds the first sync only", txns, 1, true},
		{"index ends mid-way", txns, 9, true},
		{"index holds every sync", txns, -1, true},
		{"empty index", txns, 0, true},
		{"restart after the index ends", func(p *pipeline) {
			p.copy(span(0, 60)...)
			p.pairs = append(p.pairs, [2]int64{-1, -1})
			for k := int64(5); k < 20; k++ {
				p.copy(span(11*k, 11*k+10)...)
			}
		}, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &pipeline{}
			tc.build(p)
			syncs := p.syncs(100, true, 0)
			n := tc.index
			if n < 0 || n > len(syncs) {
				n = len(syncs)
			}
			c, cl := testkafka.Fake(t)
			f := testFlow(c.ListenAddrs(), c.ListenAddrs(), "exact")
			index := FlowSettings(f).IndexTopic
			ctx := context.Background()
			adm := kadm.NewClient(cl)
			if _, err := adm.CreateTopics(ctx, 1, 1, nil, f.OffsetSyncsTopic(), index); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for _, s := range syncs[:n] {
				recs = append(recs, syncRec(index, s))
			}
			for _, s := range syncs {
				recs = append(recs, syncRec(f.OffsetSyncsTopic(), s))
			}
			produce(t, cl, recs...)
			task, err := New(Config{Flow: f})
			if err != nil {
				t.Fatal(err)
			}
			defer task.Close()
			if err := task.followSyncs(ctx, true); err != nil {
				t.Fatal(err)
			}
			if worst := p.check(t, task.Store(), 220, 1); tc.exact && worst != 0 {
				t.Errorf("up to %d records re-delivered, want 0", worst)
			}
		})
	}
}

// TestIndexTwoWriters is TestTranslateTwoWriters through the task's
// start: the offset index, and the syncs of indexed partitions kept while
// the offset-syncs topic is read to its end (afterIndex, ready). The owner
// (one producer) and a worker stopped past its session (another) write
// both topics, interleaved. 584 is at 595 on the target: the zombie's
// (517,588) and the owner's (586,597) must not be joined into one run,
// which gives 597, ahead of the data. Both paths used to apply the syncs
// without their producer ID.
func TestIndexTwoWriters(t *testing.T) {
	type sync struct {
		up, down int64
		zombie   bool
	}
	owner := []sync{{507, 516, false}, {521, 530, false}, {534, 543, false}, {555, 564, false}, {574, 583, false}, {577, 586, false}}
	rest := []sync{{516, 587, true}, {517, 588, true}, {586, 597, false}, {591, 602, false}}
	for _, tt := range []struct {
		name         string
		index, syncs []sync // in the order written
	}{
		// The index holds every sync (the one between, (578,589), was
		// no run boundary).
		{"index", append(append([]sync{}, owner...), rest...), nil},
		// The index ends at the owner's (577,586); the rest is in the
		// syncs topic, kept until its end is read.
		{"catch-up after the index", owner, append(append([]sync{}, owner...), rest...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, ownerCl := testkafka.Fake(t)
			zombieCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer zombieCl.Close()
			f := testFlow(c.ListenAddrs(), c.ListenAddrs(), "exact")
			index := FlowSettings(f).IndexTopic
			ctx := context.Background()
			if _, err := kadm.NewClient(ownerCl).CreateTopics(ctx, 1, 1, nil, f.OffsetSyncsTopic(), index); err != nil {
				t.Fatal(err)
			}
			write := func(topic string, ys []sync) {
				for _, y := range ys {
					cl := ownerCl
					if y.zombie {
						cl = zombieCl
					}
					produce(t, cl, syncRec(topic, wire.OffsetSync{Topic: "orders", Partition: 4, UpstreamOffset: y.up, DownstreamOffset: y.down}))
				}
			}
			write(index, tt.index)
			write(f.OffsetSyncsTopic(), tt.syncs)
			task, err := New(Config{Flow: f})
			if err != nil {
				t.Fatal(err)
			}
			defer task.Close()
			if err := task.followSyncs(ctx, true); err != nil {
				t.Fatal(err)
			}
			if got, ok := task.Store().Translate("orders", 4, 584); !ok || got > 595 {
				t.Errorf("584 translated to %d (%v), want at most 595 (584 is at 595: never past it)", got, ok)
			}
			// The owner's own run after the zombie's syncs stays exact.
			if got, ok := task.Store().Translate("orders", 4, 589); !ok || got != 600 {
				t.Errorf("589 translated to %d (%v), want 600", got, ok)
			}
		})
	}
}

package cutover

import (
	"reflect"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/offsetplan"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestDecide: every rule of the cutover decision, alone and together,
// with the words "cutover status" prints and the dashboard shows.
func TestDecide(t *testing.T) {
	n := func(v int) *int { return &v }
	d := func(v time.Duration) *time.Duration { return &v }
	active := &GroupState{Exists: true, State: "Stable", Members: []string{"m"}}
	listedActive := &GroupState{Exists: true, State: "Stable"} // state known, members not (the dashboard)
	idle := &GroupState{Exists: true, State: "Empty"}
	base := func(mod func(*GroupFacts)) GroupFacts {
		f := GroupFacts{SourceCluster: "A", TargetCluster: "B", Source: idle, Target: &GroupState{},
			Translation: TranslationExact, Committed: n(4), Untranslated: n(0)}
		if mod != nil {
			mod(&f)
		}
		return f
	}
	for _, c := range []struct {
		name    string
		f       GroupFacts
		reasons []string
		notes   []string
	}{
		{"ready", base(nil), nil, nil},
		{"not on the target yet, checkpoints behind: switch translates afresh", base(func(f *GroupFacts) { f.Translation = TranslationFresh }), nil, nil},
		{"states not known (source down)", base(func(f *GroupFacts) { f.Source, f.Committed, f.Untranslated = nil, nil, nil }), nil, nil},
		{"consumes another topic", base(func(f *GroupFacts) { f.Source, f.Translation = active, TranslationNothing }), nil, nil},
		{"active on the source", base(func(f *GroupFacts) { f.Source = active }),
			[]string{"active member(s) on A (Stable): still consuming"}, nil},
		{"active on the source, members not known", base(func(f *GroupFacts) { f.Source = listedActive }),
			[]string{"active member(s) on A (Stable): still consuming"}, nil},
		{"active on the target", base(func(f *GroupFacts) { f.Target = active }),
			[]string{"active member(s) on B (Stable): switch would be refused"}, nil},
		{"no checkpoint", base(func(f *GroupFacts) { f.Translation = TranslationNone }), []string{ReasonNoOffsets}, nil},
		{"no checkpoint: untranslated not repeated", base(func(f *GroupFacts) { f.Translation, f.Untranslated = TranslationNone, n(4) }), []string{ReasonNoOffsets}, nil},
		{"partitions not translated (checkpoint behind the committed offset)", base(func(f *GroupFacts) { f.Untranslated = n(1) }),
			[]string{"1 of 4 partitions not translated yet (no offset sync at or below the committed offset)"}, nil},
		{"describe error", base(func(f *GroupFacts) { f.Target = &GroupState{Error: "describing group: boom"} }), []string{"describing group: boom"}, nil},
		{"checked recently", base(func(f *GroupFacts) { f.CheckAge, f.StaleAfter = d(20*time.Second), 30*time.Second }), nil, nil},
		{"checked long ago", base(func(f *GroupFacts) { f.CheckAge, f.StaleAfter = d(2*time.Minute), 30*time.Second }),
			[]string{"offsets last checked 2m0s ago"}, nil},
		{"lag not zero", base(func(f *GroupFacts) { f.Lag, f.LaggingPartitions = 120, 12 }),
			[]string{"replication 120 records behind on 12 partitions"}, nil},
		{"target group behind its checkpoints: switch commits them", base(func(f *GroupFacts) { f.Sync, f.SyncBehind = true, 2 }),
			nil, []string{"2 partitions of the target group behind their checkpoint (cutover switch commits them)"}},
		{"lag unknown", base(func(f *GroupFacts) { f.LagUnknown = 3 }), nil, []string{"lag of 3 partitions unknown here (copied by another worker)"}},
		{"sync off", base(func(f *GroupFacts) { f.SyncOff = true }), nil, []string{"sync.group.offsets.enabled is off: consumers on the target start from the checkpoints"}},
		{"everything at once", base(func(f *GroupFacts) {
			f.Source, f.Target, f.Untranslated, f.Lag, f.LaggingPartitions = active, active, n(2), 5, 1
		}), []string{
			"active member(s) on A (Stable): still consuming",
			"active member(s) on B (Stable): switch would be refused",
			"2 of 4 partitions not translated yet (no offset sync at or below the committed offset)",
			"replication 5 records behind on 1 partitions",
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Decide(c.f)
			if v.Ready != (len(c.reasons) == 0) || !reflect.DeepEqual(v.Reasons, c.reasons) || !reflect.DeepEqual(v.Notes, c.notes) {
				t.Errorf("got ready %v, reasons %q, notes %q; want reasons %q, notes %q", v.Ready, v.Reasons, v.Notes, c.reasons, c.notes)
			}
		})
	}
}

// TestStatusFacts: what Status passes to Decide for a group: its
// committed partitions against those its offsets translate (a failback
// row by the topic it read), and the lag of only its partitions.
func TestStatusFacts(t *testing.T) {
	_, f := flow(t, "127.0.0.1:1", "127.0.0.1:1", "A", "B")
	row := func(topic, from string, p int32) offsetplan.Row {
		return offsetplan.Row{Topic: topic, FromTopic: from, Partition: p}
	}
	topics := []TopicStatus{{Topic: "orders", Remote: "A.orders", Partitions: []PartitionStatus{
		{Partition: 0, LagRecords: 7}, {Partition: 1, LagRecords: 0}, {Partition: 2, LagRecords: 100}}}}
	gs := &GroupStatus{Source: GroupState{Exists: true, State: "Empty"}, Translation: TranslationExact,
		Offsets: []offsetplan.Row{row("A.orders", "", 0), row("A.orders", "", 1), row("orders", "B.orders", 0)}}
	moving := []progress.TP{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 3}, {Topic: "B.orders", Partition: 0}}
	got := StatusFacts(f, gs, moving, topics)
	if got.Committed == nil || *got.Committed != 4 || got.Untranslated == nil || *got.Untranslated != 1 {
		t.Errorf("committed %v, untranslated %v; want 4, 1 (orders-3)", got.Committed, got.Untranslated)
	}
	if got.Lag != 7 || got.LaggingPartitions != 1 {
		t.Errorf("lag %d on %d; want 7 on 1 (A.orders-2 is not the group's)", got.Lag, got.LaggingPartitions)
	}
	if got.Source != &gs.Source || got.Target != &gs.Target || got.Translation != TranslationExact || got.SourceCluster != "A" || got.TargetCluster != "B" {
		t.Errorf("facts %+v", got)
	}
	if down := StatusFacts(f, gs, nil, nil); down.Committed != nil || down.Untranslated != nil {
		t.Errorf("source down: committed %v, untranslated %v; want not known", down.Committed, down.Untranslated)
	}
}

package metrics

import (
	"testing"
	"time"
)

// TestGroupStatus: updates of a group's status add to what it held, Groups
// lists them in order, DeleteGroup forgets one, and a nil Checkpoints
// takes every call.
func TestGroupStatus(t *testing.T) {
	at := time.Unix(100, 0)
	tests := []struct {
		name  string
		steps func(cs *Checkpoints)
		want  []GroupStatus
	}{
		{"none", func(*Checkpoints) {}, []GroupStatus{}},
		{"checked then synced", func(cs *Checkpoints) {
			cs.UpdateGroup("A", "B", "g", func(g *GroupStatus) { g.CheckedAt, g.Committed, g.Untranslated = at, 3, 1 })
			cs.UpdateGroup("A", "B", "g", func(g *GroupStatus) { g.Sync, g.TargetState, g.SyncBehind = true, "Empty", 0 })
		}, []GroupStatus{{Source: "A", Target: "B", Group: "g", CheckedAt: at, Committed: 3, Untranslated: 1, Sync: true, TargetState: "Empty"}}},
		{"sorted by flow and group", func(cs *Checkpoints) {
			for _, k := range [][3]string{{"B", "A", "a"}, {"A", "B", "z"}, {"A", "B", "b"}} {
				cs.UpdateGroup(k[0], k[1], k[2], func(*GroupStatus) {})
			}
		}, []GroupStatus{{Source: "A", Target: "B", Group: "b"}, {Source: "A", Target: "B", Group: "z"}, {Source: "B", Target: "A", Group: "a"}}},
		{"deleted", func(cs *Checkpoints) {
			cs.UpdateGroup("A", "B", "g", func(*GroupStatus) {})
			cs.UpdateGroup("A", "B", "h", func(*GroupStatus) {})
			cs.DeleteGroup("A", "B", "g")
		}, []GroupStatus{{Source: "A", Target: "B", Group: "h"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := &Checkpoints{}
			tc.steps(cs)
			got := cs.Groups()
			if len(got) != len(tc.want) {
				t.Fatalf("groups %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("group %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
	var cs *Checkpoints
	cs.UpdateGroup("A", "B", "g", func(*GroupStatus) { t.Error("called on nil") })
	cs.DeleteGroup("A", "B", "g")
	if cs.Groups() != nil {
		t.Error("a nil Checkpoints has groups")
	}
}

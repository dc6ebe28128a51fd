package cutover

import (
	"fmt"
	"time"
)

// GroupFacts is what is known of one consumer group when deciding whether
// it can move from the flow's source to its target. Status fills it from
// the clusters, the dashboard from the running checkpoint task; a field
// that one of them does not know is left nil (or zero), and its rule is
// then not applied.
type GroupFacts struct {
	SourceCluster, TargetCluster string
	// Source and Target are the group's state on each cluster (nil: not
	// known, e.g. the source is down).
	Source, Target *GroupState
	// Translation is how its offsets translate (Translation*; "": not
	// known). TranslationNothing makes the group ready: a cutover of the
	// flow leaves it alone.
	Translation string
	// Committed counts its partitions with a committed offset on the
	// source in topics that move, Untranslated those of them that have no
	// translated offset (nil: not known).
	Committed, Untranslated *int
	// CheckAge is how long ago its committed offsets were last translated
	// (nil: by this run, so never stale); StaleAfter is how old that may
	// be.
	CheckAge   *time.Duration
	StaleAfter time.Duration
	// Lag is the records of its partitions not copied to the target yet,
	// over LaggingPartitions of them; LagUnknown counts its partitions
	// whose lag is not known here.
	Lag               int64
	LaggingPartitions int
	LagUnknown        int
	// Sync is sync.group.offsets.enabled with the target group's state
	// known (the dashboard); SyncOff says the option is off; SyncBehind
	// counts partitions of the target group behind their checkpoint.
	Sync, SyncOff bool
	SyncBehind    int
}

// Verdict is whether a group can move now, and if not, why not.
type Verdict struct {
	Ready   bool
	Reasons []string // why it is not ready
	Notes   []string // worth knowing, not in the way
}

// Reasons a group is not ready, as words the tests and docs share.
const (
	ReasonNoOffsets    = "no translated offsets"
	reasonUntranslated = "%d of %d partitions not translated yet (no offset sync at or below the committed offset)"
	reasonStale        = "offsets last checked %s ago"
	reasonLag          = "replication %d records behind on %d partitions"
	reasonSourceActive = "still consuming"
	reasonTargetActive = "switch would be refused"
)

// Decide says whether a group can move from the source to the target:
// the one rule behind both "kmirror cutover status" and the dashboard's
// cutover panel. A group is ready when it has no active member on either
// cluster (switch refuses those), both describe without an error, its
// offsets translate (every committed partition), the translation is
// recent, and its partitions are copied up to the source's end.
func Decide(f GroupFacts) Verdict {
	var v Verdict
	if f.Translation == TranslationNothing {
		return Verdict{Ready: true} // a cutover of the flow leaves it alone
	}
	if f.Source != nil && f.Source.Active() {
		v.Reasons = append(v.Reasons, activeReason(*f.Source, f.SourceCluster, reasonSourceActive))
	}
	if f.Target != nil && f.Target.Active() {
		v.Reasons = append(v.Reasons, activeReason(*f.Target, f.TargetCluster, reasonTargetActive))
	}
	switch {
	case f.Translation == TranslationNone:
		v.Reasons = append(v.Reasons, ReasonNoOffsets)
	case f.Untranslated != nil && *f.Untranslated > 0:
		v.Reasons = append(v.Reasons, fmt.Sprintf(reasonUntranslated, *f.Untranslated, *f.Committed))
	}
	for _, s := range []*GroupState{f.Source, f.Target} {
		if s != nil && s.Error != "" {
			v.Reasons = append(v.Reasons, s.Error)
		}
	}
	if f.CheckAge != nil && *f.CheckAge > f.StaleAfter {
		v.Reasons = append(v.Reasons, fmt.Sprintf(reasonStale, f.CheckAge.Round(time.Second)))
	}
	if f.LaggingPartitions > 0 {
		v.Reasons = append(v.Reasons, fmt.Sprintf(reasonLag, f.Lag, f.LaggingPartitions))
	}
	if f.Sync && f.SyncBehind > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("%d partitions of the target group behind their checkpoint (cutover switch commits them)", f.SyncBehind))
	}
	if f.LagUnknown > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("lag of %d partitions unknown here (copied by another worker)", f.LagUnknown))
	}
	if f.SyncOff {
		v.Notes = append(v.Notes, "sync.group.offsets.enabled is off: consumers on the target start from the checkpoints")
	}
	v.Ready = len(v.Reasons) == 0
	return v
}

// activeReason says that a group is active on cluster. The member count
// is left out: the dashboard knows only the state (from the group
// listing), and status prints the members next to it.
func activeReason(s GroupState, cluster, why string) string {
	return fmt.Sprintf("active member(s) on %s (%s): %s", cluster, s.State, why)
}

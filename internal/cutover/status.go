package cutover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/offsetplan"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/verify"
	"github.com/kmirror/kmirror/internal/wire"
)

// PartitionStatus is one source partition of a topic that moves.
type PartitionStatus struct {
	Partition int32 `json:"partition"`
	// SourceEnd is the partition's last stable offset on the source;
	// Copied the saved progress of the flow (the next offset to copy, -1:
	// nothing copied yet).
	SourceEnd int64 `json:"source_end"`
	Copied    int64 `json:"copied_up_to"`
	// LagRecords counts the source records not copied yet (transaction
	// markers and aborted records left out; above lagReadCap it is the
	// offset difference). LagSeconds is the age of the oldest of them.
	LagRecords int64          `json:"lag_records"`
	LagSeconds float64        `json:"lag_seconds"`
	Verify     *verify.Result `json:"verify,omitempty"`
}

// TopicStatus is the readiness of one topic.
type TopicStatus struct {
	Topic      string            `json:"topic"`
	Remote     string            `json:"remote"`
	LagRecords int64             `json:"lag_records"`
	LagSeconds float64           `json:"lag_seconds"`
	Verified   string            `json:"verified"` // ok, differs, skipped
	Writing    bool              `json:"producers_writing"`
	Partitions []PartitionStatus `json:"partitions"`
	Ready      bool              `json:"ready"`
	Reasons    []string          `json:"not_ready_because,omitempty"`
}

// Translation kinds of a group's offsets.
const (
	TranslationExact   = "exact"            // checkpoints agree with a fresh exact translation
	TranslationFresh   = "fresh"            // the checkpoints are behind; switch translates afresh
	TranslationCkpt    = "checkpoints-only" // the source does not give a fresh translation
	TranslationApprox  = "approximate"      // translation mode mm2: may re-read records
	TranslationReverse = "reverse"          // failback through the reverse flow's offset syncs
	TranslationNone    = "none"
	TranslationNothing = "nothing-to-move" // the group consumed no topic that moves
)

// GroupStatus is the readiness of one group.
type GroupStatus struct {
	Group  string     `json:"group"`
	Source GroupState `json:"source"`
	Target GroupState `json:"target"`
	// CheckpointAgeSeconds is the age of the group's newest checkpoint on
	// the target (nil: none).
	CheckpointAgeSeconds *float64         `json:"checkpoint_age_seconds,omitempty"`
	Translation          string           `json:"translation"`
	Offsets              []offsetplan.Row `json:"offsets,omitempty"`
	Notes                []string         `json:"notes,omitempty"`
	Ready                bool             `json:"ready"`
	Reasons              []string         `json:"not_ready_because,omitempty"`
}

// StatusReport is what "kmirror cutover status" prints.
type StatusReport struct {
	Flow           string        `json:"flow"`
	Time           time.Time     `json:"time"`
	Ready          bool          `json:"ready"`
	WindowSeconds  float64       `json:"producer_window_seconds"`
	VerifyTail     int64         `json:"verify_tail"` // 0: every record, -1: none
	Topics         []TopicStatus `json:"topics"`
	Groups         []GroupStatus `json:"groups"`
	StillWriting   []string      `json:"producers_writing,omitempty"` // source topics whose end moved in the window
	CheckpointsErr string        `json:"checkpoints_error,omitempty"`
	Notes          []string      `json:"notes,omitempty"`
}

// lagReadCap bounds how many uncopied offsets of a partition Status reads
// to count the records exactly.
const lagReadCap = 10000

// Status checks whether it is safe to switch the flow's consumers and
// producers over: per topic and group, see the report's fields.
func Status(ctx context.Context, o *Options) (*StatusReport, error) {
	f := o.Flow
	c, sel, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.close()
	srcOpts, err := clients.Build(clients.ID(f.Name(), "cutover-source-consumer"), clients.Consumer, f.SourceConsumer)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", f.Source, err)
	}
	tgtOpts, err := clients.Build(clients.ID(f.Name(), "cutover-target-consumer"), clients.Consumer, f.TargetConsumer)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", f.Target, err)
	}
	rep := &StatusReport{Flow: f.Name(), Time: o.now().UTC(), WindowSeconds: o.Window.Seconds(), VerifyTail: max(o.VerifyTail, -1)}

	// Producers: the source's log ends, watched over the window, while
	// the rest is read.
	var moved map[string]bool
	var movedErr error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		moved, movedErr = endsMoved(ctx, c.src, sel.topics, o.Window)
	}()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	saved, results := readCopy(ctx, o, tgtOpts, sel.topics, rep, quiet)
	ends, err := sourceEnds(ctx, c.src, f.Source, sel.topics)
	if err != nil {
		return nil, err
	}
	now := o.now()
	for _, t := range sel.topics {
		ts, err := topicStatus(ctx, o, srcOpts, t, sel.partitions[t], ends, saved, results, now)
		if err != nil {
			return nil, err
		}
		rep.Topics = append(rep.Topics, ts)
	}

	ages, cerr := checkpointAges(ctx, tgtOpts, f.Policy.CheckpointsTopic(f.Source), now)
	if cerr != nil {
		rep.CheckpointsErr = cerr.Error()
	}
	for _, g := range sel.groups {
		rep.Groups = append(rep.Groups, groupStatus(ctx, o, c, sel, g, ages, rep.Topics, quiet))
	}

	<-watched
	finishReport(rep, moved, movedErr)
	return rep, nil
}

// readCopy reads the flow's saved progress and, unless o.VerifyTail < 0,
// compares the copy of topics; what it cannot read is noted in rep.
func readCopy(ctx context.Context, o *Options, tgtOpts []kgo.Opt, topics []string, rep *StatusReport, log *slog.Logger) (map[progress.TP]int64, map[progress.TP]verify.Result) {
	f := o.Flow
	saved, err := progress.Read(ctx, tgtOpts, f.OffsetStorageTopic, f.Source, log)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("progress of %s not read from %s on %s: %v", f.Name(), f.OffsetStorageTopic, f.Target, err))
	}
	var results map[progress.TP]verify.Result
	if o.VerifyTail >= 0 && len(topics) > 0 {
		results, err = verifyTopics(ctx, o, topics)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("verify: %v", err))
		}
	}
	return saved, results
}

// sourceEnds lists the end offsets of topics on the source cluster.
func sourceEnds(ctx context.Context, adm *kadm.Client, source string, topics []string) (kadm.ListedOffsets, error) {
	if len(topics) == 0 { // none would list every topic's
		return nil, nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets on %s: %w", source, err)
	}
	return ends, nil
}

// topicStatus is the lag and verify verdict of source topic t, which has
// parts partitions; its readiness waits for the producers watch.
func topicStatus(ctx context.Context, o *Options, srcOpts []kgo.Opt, t string, parts int32, ends kadm.ListedOffsets,
	saved map[progress.TP]int64, results map[progress.TP]verify.Result, now time.Time) (TopicStatus, error) {
	f := o.Flow
	ts := TopicStatus{Topic: t, Remote: f.Policy.FormatRemoteTopic(f.Source, t), Verified: "skipped"}
	if o.VerifyTail >= 0 {
		ts.Verified = "ok"
	}
	for p := range parts {
		ps := PartitionStatus{Partition: p, Copied: -1}
		if e, ok := ends.Lookup(t, p); ok {
			ps.SourceEnd = e.Offset
		}
		if off, ok := saved[progress.TP{Topic: t, Partition: p}]; ok && off >= 0 {
			ps.Copied = off + 1
		}
		if err := partitionLag(ctx, srcOpts, t, &ps, now); err != nil {
			return TopicStatus{}, fmt.Errorf("cluster %s: %w", f.Source, err)
		}
		if r, ok := results[progress.TP{Topic: t, Partition: p}]; ok {
			ps.Verify = &r
			if !r.OK() {
				ts.Verified = "differs"
			}
		} else if o.VerifyTail >= 0 && ps.SourceEnd > 0 {
			ts.Verified = "differs" // nothing to compare: not copied
		}
		ts.LagRecords += ps.LagRecords
		ts.LagSeconds = max(ts.LagSeconds, ps.LagSeconds)
		ts.Partitions = append(ts.Partitions, ps)
	}
	return ts, nil
}

// groupStatus is the state, offset translation and readiness of group g;
// ages are the groups' checkpoint ages and topics the topics' statuses.
func groupStatus(ctx context.Context, o *Options, c *conns, sel *selection, g string, ages map[string]float64, topics []TopicStatus, log *slog.Logger) GroupStatus {
	f := o.Flow
	gs := GroupStatus{Group: g, Source: sourceState(ctx, o, c, g), Target: groupState(ctx, c.tgt, g)}
	if a, ok := ages[g]; ok {
		gs.CheckpointAgeSeconds = &a
	}
	pl := offsetplan.New(f, g, offsetplan.UseCheckpoints, log, o.Timeout)
	nothing, moving, nerr := movesNothing(ctx, o, c, sel, g, gs.Source.Active())
	var or *offsetplan.Report
	var err error
	if nerr == nil && !nothing {
		or, err = pl.Plan(ctx, o.Config)
	}
	switch {
	case nerr != nil:
		gs.Translation = TranslationNone
		gs.Notes = append(gs.Notes, nerr.Error())
	case nothing:
		gs.Translation = TranslationNothing
		gs.Notes = append(gs.Notes, NothingToMove)
	case err != nil:
		gs.Translation = TranslationNone
		gs.Notes = append(gs.Notes, err.Error())
	default:
		gs.Translation = translationKind(or)
		gs.Offsets, gs.Notes = or.Partitions, or.Notes
	}
	v := Decide(StatusFacts(f, &gs, moving, topics))
	gs.Ready, gs.Reasons = v.Ready, v.Reasons
	gs.Notes = append(gs.Notes, v.Notes...)
	return gs
}

// finishReport adds the producers watch (moved: the topics whose end
// moved; movedErr: why it failed) to rep and decides each topic's and the
// report's readiness.
func finishReport(rep *StatusReport, moved map[string]bool, movedErr error) {
	if movedErr != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("producers not watched: %v", movedErr))
	}
	for i := range rep.Topics {
		ts := &rep.Topics[i]
		ts.Writing = moved[ts.Topic]
		if ts.Writing {
			rep.StillWriting = append(rep.StillWriting, ts.Topic)
		}
		ts.Ready, ts.Reasons = topicReady(*ts)
	}
	rep.Ready = movedErr == nil
	for _, t := range rep.Topics {
		rep.Ready = rep.Ready && t.Ready
	}
	for _, g := range rep.Groups {
		rep.Ready = rep.Ready && g.Ready
	}
}

// topicReady is the gate of one topic.
func topicReady(t TopicStatus) (bool, []string) {
	var why []string
	if t.LagRecords > 0 {
		why = append(why, fmt.Sprintf("%d records not copied yet (oldest %.0f s)", t.LagRecords, t.LagSeconds))
	}
	if t.Verified == "differs" {
		why = append(why, "the copy differs from the source (see verify)")
	}
	if t.Writing {
		why = append(why, "producers still write to it on the source")
	}
	return len(why) == 0, why
}

// StatusFacts is what Status knows of gs, a group of flow f, for Decide:
// its state on both clusters, how its offsets translate, its committed
// partitions on topics that move (moving, source names; nil: not known)
// against the partitions its offsets translate, and the lag of those
// partitions in topics.
func StatusFacts(f *config.Flow, gs *GroupStatus, moving []progress.TP, topics []TopicStatus) GroupFacts {
	facts := GroupFacts{SourceCluster: f.Source, TargetCluster: f.Target, Source: &gs.Source, Target: &gs.Target, Translation: gs.Translation}
	translated := make(map[progress.TP]bool, len(gs.Offsets))
	for _, r := range gs.Offsets {
		translated[progress.TP{Topic: r.Topic, Partition: r.Partition}] = true
		if r.FromTopic != "" {
			translated[progress.TP{Topic: r.FromTopic, Partition: r.Partition}] = true
		}
	}
	if moving != nil {
		n := 0
		for _, tp := range moving {
			remote := progress.TP{Topic: f.Policy.FormatRemoteTopic(f.Source, tp.Topic), Partition: tp.Partition}
			if !translated[remote] && !translated[tp] {
				n++
			}
		}
		committed := len(moving)
		facts.Committed, facts.Untranslated = &committed, &n
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.LagRecords > 0 && translated[progress.TP{Topic: t.Remote, Partition: p.Partition}] {
				facts.Lag += p.LagRecords
				facts.LaggingPartitions++
			}
		}
	}
	return facts
}

// translationKind says how exactly the group's offsets translate.
func translationKind(r *offsetplan.Report) string {
	switch {
	case len(r.Partitions) == 0:
		return TranslationNone
	case r.Source == offsetplan.UseReverse || r.ReverseFlow != "":
		return TranslationReverse
	case r.Mode != checkpoint.Exact.String():
		return TranslationApprox
	}
	kind := TranslationExact
	for _, row := range r.Partitions {
		switch {
		case row.FreshDownstream == nil:
			kind = TranslationCkpt
		case row.CheckpointDownstream == nil || *row.CheckpointDownstream != *row.FreshDownstream:
			if kind == TranslationExact {
				kind = TranslationFresh
			}
		}
	}
	return kind
}

// partitionLag fills the lag of ps: the committed source records from
// ps.Copied to ps.SourceEnd.
func partitionLag(ctx context.Context, opts []kgo.Opt, topic string, ps *PartitionStatus, now time.Time) error {
	first := max(ps.Copied, 0)
	if first >= ps.SourceEnd {
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var n int64
	var oldest time.Time
	big := ps.SourceEnd-first > lagReadCap
	err := readlog.Range(rctx, opts, topic, ps.Partition, first, -1, func(r *kgo.Record) {
		if n == 0 {
			oldest = r.Timestamp
		}
		n++
		if big {
			cancel() // the age is all that is read
		}
	})
	if big {
		n = ps.SourceEnd - first
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	ps.LagRecords = n
	if n > 0 {
		ps.LagSeconds = max(now.Sub(oldest).Seconds(), 0)
	}
	return nil
}

// endsMoved returns the topics whose log-end offset on the source moved
// within window.
func endsMoved(ctx context.Context, adm *kadm.Client, topics []string, window time.Duration) (map[string]bool, error) {
	if window <= 0 || len(topics) == 0 {
		return nil, nil
	}
	before, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = before.Error()
	}
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	after, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = after.Error()
	}
	if err != nil {
		return nil, err
	}
	moved := make(map[string]bool)
	after.Each(func(o kadm.ListedOffset) {
		if b, ok := before.Lookup(o.Topic, o.Partition); ok && o.Offset != b.Offset {
			moved[o.Topic] = true
		}
	})
	return moved, nil
}

// checkpointAges reads the checkpoints topic and returns the age in
// seconds of each group's newest checkpoint.
func checkpointAges(ctx context.Context, opts []kgo.Opt, topic string, now time.Time) (map[string]float64, error) {
	newest := make(map[string]time.Time)
	skip := wire.Skipper[wire.Checkpoint]{Decode: wire.DecodeCheckpoint}
	err := readlog.ToEnd(ctx, opts, topic, func(r *kgo.Record) {
		if cp, ok := skip.Record(r); ok && r.Timestamp.After(newest[cp.Group]) {
			newest[cp.Group] = r.Timestamp
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", topic, err)
	}
	out := make(map[string]float64, len(newest))
	for g, t := range newest {
		out[g] = max(now.Sub(t).Seconds(), 0)
	}
	return out, nil
}

// verifyTopics compares the copy of the given source topics record by
// record (the last o.VerifyTail records of each partition, 0: all).
func verifyTopics(ctx context.Context, o *Options, topics []string) (map[progress.TP]verify.Result, error) {
	quoted := make([]string, len(topics))
	for i, t := range topics {
		quoted[i] = regexp.QuoteMeta(t)
	}
	only := regexp.MustCompile("^(?:" + strings.Join(quoted, "|") + ")$")
	rs, err := verify.Flow(ctx, o.Flow, only, o.VerifyTail)
	if err != nil {
		return nil, err
	}
	out := make(map[progress.TP]verify.Result, len(rs))
	for _, r := range rs {
		out[progress.TP{Topic: r.Topic, Partition: r.Partition}] = r
	}
	return out, nil
}

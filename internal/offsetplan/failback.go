package offsetplan

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/checkpoint"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/mirrorclient"
)

// Failback: "kmirror offsets --from B --to A" for a group that read, on B,
// the remote copies of A's topics (A.orders, written by the flow A->B).
// No flow B->A has offset syncs for them, so the group's offsets on B are
// translated back through A->B's offset syncs read in reverse
// (checkpoint.TranslateBack).

// UseReverse is the report source of a reverse translation.
const UseReverse = "reverse"

// enabledFlow returns the flow source->target if the file enables it.
func enabledFlow(cfg *config.Config, source, target string) *config.Flow {
	for _, f := range cfg.Flows {
		if f.Source == source && f.Target == target {
			return f
		}
	}
	return nil
}

// Plan builds the report: a reverse translation through the enabled flow
// to->from for the group's partitions of remote topics from --to, the
// usual report (checkpoints or a fresh translation of from->to) for the
// rest, or the usual report alone when the group read no such topic.
func (o *Planner) Plan(ctx context.Context, cfg *config.Config) (*Report, error) {
	rf := enabledFlow(cfg, o.f.Target, o.f.Source)
	if rf == nil {
		return o.report(ctx)
	}
	fromTo, other, err := o.classify(ctx, rf)
	if err != nil {
		rep, rerr := o.report(ctx)
		note := fmt.Sprintf("no reverse translation through %s: %v", rf.Name(), err)
		if rerr != nil {
			return rep, fmt.Errorf("%w (%s)", rerr, note)
		}
		rep.Notes = append([]string{note}, rep.Notes...)
		return rep, nil
	}
	if !fromTo {
		return o.report(ctx)
	}
	backs, err := checkpoint.TranslateBack(ctx, rf, o.group, o.log)
	if err != nil {
		return nil, fmt.Errorf("reverse translation through %s: %w", rf.Name(), err)
	}
	set := checkpoint.FlowSettings(rf)
	rep := &Report{Group: o.group, From: o.f.Source, To: o.f.Target, Source: UseReverse,
		ReverseFlow: rf.Name(), Mode: set.Mode.String()}
	rows, notes := reverseRows(backs, rf, set.Mode)
	rep.Partitions, rep.Notes = rows, notes
	if len(other) > 0 {
		// Topics the group read on B that did not come from A: the usual
		// way (B->A's checkpoints or a fresh translation).
		fwd, err := o.report(ctx)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s: %v", strings.Join(other, ", "), o.f.Source, err))
		} else {
			rep.Source = o.use
			rep.CheckpointsTopic = fwd.CheckpointsTopic
			rep.Partitions, rep.Notes = mergeReverse(rep.Partitions, fwd.Partitions), append(rep.Notes, fwd.Notes...)
		}
	}
	if len(rep.Partitions) == 0 {
		return nil, fmt.Errorf("group %q: no partition of it could be translated back from %s to %s: %s",
			o.group, o.f.Source, o.f.Target, strings.Join(rep.Notes, "; "))
	}
	return rep, nil
}

// classify reads the group's committed offsets on --from (the target of rf)
// within probeTimeout: fromTo reports a partition of a remote topic that
// rf copied (its source is rf.Source); other lists the remaining topics.
func (o *Planner) classify(ctx context.Context, rf *config.Flow) (fromTo bool, other []string, err error) {
	pol := rf.Policy
	adm, closeAdm, err := admin(rf.TargetAdmin, "offsets-failback")
	if err != nil {
		return false, nil, fmt.Errorf("cluster %s: %w", rf.Target, err)
	}
	defer closeAdm()
	pctx, cancel := context.WithTimeout(ctx, min(probeTimeout, o.timeout))
	defer cancel()
	offs, err := adm.FetchOffsets(pctx, o.group)
	if err != nil {
		return false, nil, fmt.Errorf("cluster %s did not answer: %w", rf.Target, err)
	}
	fromTo, other = splitTopics(pol, offs, rf.Source)
	return fromTo, other, nil
}

// splitTopics sorts a group's committed offsets: fromTo reports a partition
// of a remote copy of a topic of source; other lists the remaining topics.
func splitTopics(pol policy.Policy, offs kadm.OffsetResponses, source string) (fromTo bool, other []string) {
	seen := make(map[string]bool)
	offs.Each(func(r kadm.OffsetResponse) {
		switch {
		case r.Err != nil || r.At < 0:
		case remoteOf(pol, r.Topic, source):
			fromTo = true
		case !seen[r.Topic]:
			seen[r.Topic] = true
			other = append(other, r.Topic)
		}
	})
	sort.Strings(other)
	return fromTo, other
}

// remoteOf reports whether topic is a remote copy of a topic of source
// under pol, as checkpoint.TranslateBack selects them.
func remoteOf(pol policy.Policy, topic, source string) bool {
	src, ok := pol.TopicSource(topic)
	return ok && src == source && !pol.IsInternalTopic(topic)
}

// reverseRows turns a reverse translation into report rows (the command's
// --from is the flow's target: Upstream is the group's offset there,
// Downstream where it resumes on the flow's source) and notes.
func reverseRows(backs []checkpoint.Back, rf *config.Flow, mode checkpoint.Mode) ([]Row, []string) {
	var rows []Row
	var notes []string
	if mode == checkpoint.Exact {
		notes = append(notes, fmt.Sprintf("reverse translation through the offset syncs of %s (mode exact; there are no checkpoints in this direction): "+
			"inside a run between two syncs the offset on %s is exact; an offset on %s past the newest sync of its partition resumes on %s "+
			"at the record after that sync's, re-reading at most the records between them (none once %s has copied everything and saved its progress)",
			rf.Name(), rf.Source, rf.Target, rf.Source, rf.Name()))
	} else {
		notes = append(notes, fmt.Sprintf("reverse translation through the offset syncs of %s (mode mm2; there are no checkpoints in this direction): "+
			"an offset on %s that is not at a sync resumes on %s at the record after the sync before it; it re-reads at most the records between them",
			rf.Name(), rf.Target, rf.Source))
	}
	topics := make(map[string]string)
	for _, b := range backs {
		if b.Upstream < 0 {
			notes = append(notes, fmt.Sprintf("%s-%d on %s: not translated (%s); the group resumes on %s from its own commit on %s or its auto.offset.reset",
				b.RemoteTopic, b.Partition, rf.Target, b.Reason, rf.Source, b.Topic))
			continue
		}
		topics[b.Topic] = b.RemoteTopic
		rows = append(rows, Row{Topic: b.Topic, Partition: b.Partition, FromTopic: b.RemoteTopic,
			Upstream: b.Downstream, Downstream: b.Upstream, FreshUpstream: ptr(b.Downstream), FreshDownstream: ptr(b.Upstream)})
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		notes = append(notes, fmt.Sprintf("%s on %s: read on %s as %s", t, rf.Source, rf.Target, topics[t]))
	}
	return rows, notes
}

// mergeReverse adds the usual rows to the reverse ones; a partition both
// cover keeps the reverse translation.
func mergeReverse(rev, fwd []Row) []Row {
	have := make(map[mirrorclient.TopicPartition]bool)
	for _, r := range rev {
		have[mirrorclient.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = true
	}
	out := append([]Row(nil), rev...)
	for _, r := range fwd {
		if !have[mirrorclient.TopicPartition{Topic: r.Topic, Partition: r.Partition}] {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

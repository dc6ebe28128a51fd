package cutover

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPlan is one source topic that moves.
type TopicPlan struct {
	Topic            string       `json:"topic"`
	Remote           string       `json:"remote"`
	Partitions       int32        `json:"partitions"`
	RemotePartitions int32        `json:"remote_partitions"` // 0: no remote topic yet
	ConfigDiffs      []ConfigDiff `json:"config_diffs,omitempty"`
}

// ConfigDiff is a topic config set differently on the source topic and
// its remote topic.
type ConfigDiff struct {
	Key    string  `json:"key"`
	Source *string `json:"source"` // nil: not set on the topic (default)
	Target *string `json:"target"`
	// Excluded: config.properties.exclude keeps it from being synced.
	Excluded bool `json:"excluded"`
}

// GroupPlan is one consumer group that moves.
type GroupPlan struct {
	Group  string     `json:"group"`
	Source GroupState `json:"source"`
	Target GroupState `json:"target"`
}

// InternalTopic is a topic of the replication itself: it stays where it is.
type InternalTopic struct {
	Topic   string `json:"topic"`
	Cluster string `json:"cluster"`
	Role    string `json:"role"`
}

// PlanReport is what "kmirror cutover plan" prints.
type PlanReport struct {
	Flow           string          `json:"flow"`
	Source         string          `json:"source"`
	Target         string          `json:"target"`
	Topics         []TopicPlan     `json:"topics"`
	Excluded       []Excluded      `json:"excluded_topics"`
	Groups         []GroupPlan     `json:"groups"`
	ExcludedGroups []Excluded      `json:"excluded_groups"`
	Internal       []InternalTopic `json:"internal_topics"`
	ACLs           []string        `json:"acls,omitempty"`         // ACLs the remote topics get
	MissingACLs    []string        `json:"missing_acls,omitempty"` // of those, not on the target yet
	Notes          []string        `json:"notes,omitempty"`
}

// Plan says what moves from the flow's source to its target and what does
// not.
func Plan(ctx context.Context, o *Options) (*PlanReport, error) {
	f := o.Flow
	c, sel, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.close()
	rep := &PlanReport{Flow: f.Name(), Source: f.Source, Target: f.Target,
		Excluded: sel.excluded, ExcludedGroups: sel.excludedGroups, Internal: internalTopics(o)}
	if len(sel.topics) > 0 {
		remotes := make([]string, len(sel.topics))
		for i, t := range sel.topics {
			remotes[i] = f.Policy.FormatRemoteTopic(f.Source, t)
		}
		rtd, err := c.tgt.ListTopics(ctx, remotes...)
		if err != nil {
			return nil, fmt.Errorf("listing topics of %s: %w", f.Target, err)
		}
		srcCfg, serr := c.src.DescribeTopicConfigs(ctx, sel.topics...)
		if serr != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("topic configs of %s not read: %v", f.Source, serr))
		}
		var existing []string
		for _, r := range remotes {
			if d, ok := rtd[r]; ok && d.Err == nil {
				existing = append(existing, r)
			}
		}
		var tgtCfg kadm.ResourceConfigs
		if len(existing) > 0 {
			var terr error
			if tgtCfg, terr = c.tgt.DescribeTopicConfigs(ctx, existing...); terr != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("topic configs of %s not read: %v", f.Target, terr))
			}
		}
		for i, t := range sel.topics {
			tp := TopicPlan{Topic: t, Remote: remotes[i], Partitions: sel.partitions[t]}
			if d, ok := rtd[remotes[i]]; ok && d.Err == nil {
				tp.RemotePartitions = int32(len(d.Partitions))
				if sc, err := srcCfg.On(t, nil); err == nil {
					if tc, err := tgtCfg.On(remotes[i], nil); err == nil {
						tp.ConfigDiffs = diffConfigs(sc.Configs, tc.Configs, o)
					}
				}
			}
			rep.Topics = append(rep.Topics, tp)
		}
	}
	want, missing, err := syncer(f, c).ACLPlan(ctx)
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		rep.Notes = append(rep.Notes, fmt.Sprintf("topic ACLs not compared: %v", err))
	case err != nil:
		rep.Notes = append(rep.Notes, fmt.Sprintf("topic ACLs not read: %v", err))
	default:
		rep.ACLs, rep.MissingACLs = want, missing
		if !f.SyncTopicACLsEnabled && len(missing) > 0 {
			rep.Notes = append(rep.Notes, "sync.topic.acls.enabled = false: the missing ACLs are not created by the flow")
		}
	}
	for _, g := range sel.groups {
		rep.Groups = append(rep.Groups, GroupPlan{Group: g, Source: sourceState(ctx, o, c, g), Target: groupState(ctx, c.tgt, g)})
	}
	return rep, nil
}

// diffConfigs compares the topic-level settings of a source topic and its
// remote topic: keys set on the topic (not broker or default values) on
// either side whose values differ.
func diffConfigs(src, tgt []kadm.Config, o *Options) []ConfigDiff {
	set := func(cs []kadm.Config) map[string]kadm.Config {
		m := make(map[string]kadm.Config)
		for _, c := range cs {
			m[c.Key] = c
		}
		return m
	}
	sm, tm := set(src), set(tgt)
	keys := make(map[string]bool)
	for _, cs := range [][]kadm.Config{src, tgt} {
		for _, c := range cs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.Sensitive {
				keys[c.Key] = true
			}
		}
	}
	var out []ConfigDiff
	for k := range keys {
		s, t := sm[k], tm[k]
		if eqValue(s.Value, t.Value) {
			continue
		}
		d := ConfigDiff{Key: k, Source: s.Value, Target: t.Value}
		if s.Source != kmsg.ConfigSourceDynamicTopicConfig {
			d.Source = nil
		}
		if t.Source != kmsg.ConfigSourceDynamicTopicConfig {
			d.Target = nil
		}
		d.Excluded = o.Flow.ConfigExclude != nil && o.Flow.ConfigExclude.MatchString(k)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func eqValue(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// internalTopics lists the topics the flow itself uses; none of them
// moves.
func internalTopics(o *Options) []InternalTopic {
	f := o.Flow
	syncsOn := f.Target
	if f.OffsetSyncsTopicLocation == "source" {
		syncsOn = f.Source
	}
	return []InternalTopic{
		{f.OffsetStorageTopic, f.Target, "progress of the copy (offset.storage.topic)"},
		{f.OffsetSyncsTopic(), syncsOn, "offset syncs (offset translation)"},
		{f.Policy.CheckpointsTopic(f.Source), f.Target, "checkpoints of the groups' offsets"},
		{f.Policy.HeartbeatsTopic(), f.Target, "heartbeats"},
	}
}

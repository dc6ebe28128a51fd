package topicsync

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncConfigs makes the configs of every remote topic that exists follow its
// source topic, as MM2's periodic topic config sync does: a config the
// source sets is SET on the remote topic; a config at its default on the
// source is DELETEd from the remote topic, so that the target's own default
// applies (unless DefaultsFromSource, then it is SET too). Sensitive,
// static-broker and excluded configs are never touched. Only what differs
// from the remote topic's current configs is sent.
func (s *Syncer) SyncConfigs(ctx context.Context) error {
	pairs, err := s.existingRemotes(ctx)
	if err != nil || len(pairs) == 0 {
		return err
	}
	srcNames := make([]string, 0, len(pairs))
	remotes := make([]string, 0, len(pairs))
	for src, remote := range pairs {
		srcNames = append(srcNames, src)
		remotes = append(remotes, remote)
	}
	sort.Strings(srcNames)
	srcCfg, err := s.describeConfigs(ctx, s.Source, s.SourceAlias, srcNames)
	if err != nil {
		return fmt.Errorf("describing configs of source topics on %s: %w", s.SourceAlias, err)
	}
	tgtCfg, err := s.describeConfigs(ctx, s.Target, s.TargetAlias, remotes)
	if err != nil {
		return fmt.Errorf("describing configs of remote topics on %s: %w", s.TargetAlias, err)
	}
	known := s.targetKnown(ctx)
	var cs []change
	for _, name := range srcNames {
		remote := pairs[name]
		sc, ok := srcCfg[name]
		if !ok {
			continue // gone meanwhile
		}
		tc, ok := tgtCfg[remote]
		if !ok {
			continue
		}
		if ops := s.configChanges(s.translate(name, sc, known), tc); len(ops) > 0 {
			cs = append(cs, change{remote, ops})
		}
	}
	for _, b := range batches(cs, func(c change) int { return len(c.ops) }) {
		errs, err := s.alterConfigs(ctx, b)
		for _, c := range b {
			if e := resultOf(errs, err, c.remote, "IncrementalAlterConfigs"); e != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.logs.Warn(s.Log, "alter configs|"+e.Error(), "cannot sync remote topic configs", "topic", c.remote, "cluster", s.TargetAlias, "changes", describeOps(c.ops), "err", e)
				continue
			}
			s.Log.Info("synced remote topic configs", "topic", c.remote, "cluster", s.TargetAlias, "changes", describeOps(c.ops))
		}
	}
	return nil
}

// configChanges returns the incremental operations that make a remote
// topic's configs tgt follow its source topic's configs src, both as
// described. Configs already as wanted are left out.
func (s *Syncer) configChanges(src, tgt []kadm.Config) []kadm.AlterConfig {
	// A topic override on the target shows as a dynamic topic config.
	override := make(map[string]*string, len(tgt))
	for _, c := range tgt {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			override[c.Key] = c.Value
		}
	}
	var ops []kadm.AlterConfig
	for _, c := range src {
		if c.Sensitive || c.Source == kmsg.ConfigSourceStaticBrokerConfig ||
			(s.ConfigExclude != nil && s.ConfigExclude.MatchString(c.Key)) {
			continue
		}
		have, set := override[c.Key]
		if c.Source == kmsg.ConfigSourceDefaultConfig && !s.DefaultsFromSource {
			if set {
				ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c.Key})
			}
			continue
		}
		if c.Value == nil || (set && have != nil && *have == *c.Value) {
			continue
		}
		v := *c.Value
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: c.Key, Value: &v})
	}
	return ops
}

// existingRemotes maps each replicated source topic whose remote topic
// exists to that remote topic.
func (s *Syncer) existingRemotes(ctx context.Context) (map[string]string, error) {
	src, err := s.Source.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics of source cluster %s: %w", s.SourceAlias, err)
	}
	want := make(map[string]string)
	var remotes []string
	for _, d := range src {
		if d.Err != nil || !s.ShouldReplicate(d.Topic) {
			continue
		}
		r := s.Policy.FormatRemoteTopic(s.SourceAlias, d.Topic)
		want[d.Topic] = r
		remotes = append(remotes, r)
	}
	if len(remotes) == 0 {
		return nil, nil
	}
	tgt, err := s.Target.ListTopics(ctx, remotes...)
	if err != nil {
		return nil, fmt.Errorf("listing topics of target cluster %s: %w", s.TargetAlias, err)
	}
	for name, r := range want {
		if d, ok := tgt[r]; !ok || d.Err != nil {
			delete(want, name)
		}
	}
	return want, nil
}

// describeConfigs returns the described configs of each topic that could
// be described; a topic gone meanwhile is left out, other failures are
// logged.
func (s *Syncer) describeConfigs(ctx context.Context, adm *kadm.Client, cluster string, topics []string) (map[string][]kadm.Config, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]kadm.Config, len(rcs))
	for _, rc := range rcs {
		switch {
		case rc.Err == nil:
			out[rc.Name] = rc.Configs
		case errors.Is(rc.Err, kerr.UnknownTopicOrPartition):
		default:
			s.logs.Warn(s.Log, "describe configs|"+cluster+"|"+rc.Err.Error(), "cannot describe topic configs", "topic", rc.Name, "cluster", cluster, "err", rc.Err)
		}
	}
	return out, nil
}

// describeOps renders operations for a log line: "k=v" for SET, "-k" for
// DELETE.
func describeOps(ops []kadm.AlterConfig) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		if op.Op == kadm.DeleteConfig {
			out[i] = "-" + op.Name
		} else {
			out[i] = op.Name + "=" + *op.Value
		}
	}
	return out
}

// Package topicsync chooses which source topics a flow replicates and makes
// their remote topics exist on the target with the source's partition count
// and configs, as MM2's MirrorSourceConnector does.
package topicsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/policy"
)

// Syncer keeps the remote topics of one flow in step with the source.
type Syncer struct {
	Source, Target *kadm.Client
	// TargetClient is the client behind Target. Topics are created,
	// grown and altered through it many to a request (see batch.go).
	TargetClient kmsg.Requestor
	// SourceClient is the client behind Source. With it, Sync lists the
	// source's topics with one metadata request straight to a broker and
	// skips the rest while nothing changed (see TargetCheckInterval);
	// without it, Sync does everything every time.
	SourceClient *kgo.Client
	SourceAlias  string
	TargetAlias  string
	Policy       policy.Policy
	Topics       *policy.Filter
	// HeartbeatsReplication replicates heartbeat topics even when Topics
	// does not select them (heartbeats.replication.enabled).
	HeartbeatsReplication bool
	ReplicationFactor     int16          // for new remote topics; -1 is the broker default
	ConfigExclude         *regexp.Regexp // config.properties.exclude; nil excludes nothing
	DefaultsFromSource    bool           // use.defaults.from=source
	Log                   *slog.Logger

	aclsOff atomic.Bool // a cluster has no authorizer: SyncACLs does nothing
	syncState
}

// Topic is a source topic chosen for replication.
type Topic struct {
	Name       string // on the source
	Remote     string // on the target
	Partitions int32  // source partition count
	ID         string // source topic ID, hex; "" when the broker has none
	Ready      bool   // the remote topic exists with enough partitions, hosted
}

// ShouldReplicate reports whether topic t of the source belongs to the flow.
func (s *Syncer) ShouldReplicate(t string) bool {
	p := s.Policy
	selected := s.Topics.Match(t) || (s.HeartbeatsReplication && p.IsHeartbeatsTopic(t))
	return selected && !p.IsInternalTopic(t) && !policy.IsCycle(p, t, s.TargetAlias)
}

// Sync lists the source topics, creates missing remote topics, adds missing
// partitions, and returns every selected source topic, sorted by name. A
// topic whose remote topic could not be made ready is logged and not Ready;
// it is tried again on the next Sync. So is a new remote topic whose
// partitions the target does not host yet (see Pending). While the source
// lists the same topics as at the last Sync, and that Sync left every
// topic Ready, Sync returns what it did then without asking the target,
// except every TargetCheckInterval.
func (s *Syncer) Sync(ctx context.Context) ([]Topic, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	want, listed, same, err := s.sourceTopics(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if same && now.Sub(s.last.checked) < TargetCheckInterval {
		return slices.Clone(s.last.topics), nil
	}
	if same {
		want = slices.Clone(s.last.topics)
		for i := range want {
			want[i].Ready = false
		}
		listed = s.last.listed
	}
	s.last = nil
	if len(want) == 0 {
		s.settle(listed, nil, now)
		return nil, nil
	}
	remotes := make([]string, len(want))
	for i, t := range want {
		remotes[i] = t.Remote
	}
	tgt, err := s.Target.ListTopics(ctx, remotes...)
	if err != nil {
		return nil, fmt.Errorf("listing topics of target cluster %s: %w", s.TargetAlias, err)
	}
	var missing []*Topic
	var short []grow
	for i := range want {
		t := &want[i]
		d, ok := tgt[t.Remote]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			if !s.isUnhosted(t.Remote) { // else created, not in the metadata yet
				missing = append(missing, t)
			}
			continue
		}
		if d.Err != nil {
			s.Log.Error("cannot describe remote topic", "topic", t.Remote, "cluster", s.TargetAlias, "err", d.Err)
			continue
		}
		have := int32(len(d.Partitions))
		switch {
		case have < t.Partitions:
			short = append(short, grow{t, have})
			continue
		case have > t.Partitions:
			s.Log.Warn("remote topic has more partitions than its source; the extra partitions get no data", "topic", t.Remote, "remote_partitions", have, "source_partitions", t.Partitions)
		}
		t.Ready = true
	}
	// A grown topic is Ready at once, as it was: the group mode would
	// stop consuming a topic that is not.
	grown, err := s.grow(ctx, short)
	if err != nil {
		return nil, err
	}
	for _, t := range grown {
		t.Ready = true
	}
	var made []*Topic
	if len(missing) > 0 {
		if made, err = s.create(ctx, missing); err != nil {
			return nil, err
		}
	}
	s.checkHosted(ctx, want, made)
	s.settle(listed, want, now)
	return want, nil
}

// grow adds the missing partitions of remote topics, many to a request,
// and returns those grown.
func (s *Syncer) grow(ctx context.Context, gs []grow) ([]*Topic, error) {
	var grown []*Topic
	for _, b := range batches(gs, func(g grow) int { return int(g.t.Partitions - g.have) }) {
		errs, err := s.addPartitions(ctx, b)
		for _, g := range b {
			if e := resultOf(errs, err, g.t.Remote, "CreatePartitions"); e != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				s.Log.Error("cannot add partitions to remote topic", "topic", g.t.Remote, "have", g.have, "want", g.t.Partitions, "err", e)
				continue
			}
			s.Log.Info("added partitions to remote topic", "topic", g.t.Remote, "from", g.have, "to", g.t.Partitions)
			grown = append(grown, g.t)
		}
	}
	return grown, nil
}

// create makes the remote topics of ts with the source's configs and
// returns those made.
func (s *Syncer) create(ctx context.Context, ts []*Topic) ([]*Topic, error) {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	rcs, err := s.Source.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("describing configs of source topics: %w", err)
	}
	configs := make(map[string]map[string]*string, len(rcs))
	known := s.targetKnown(ctx)
	for _, rc := range rcs {
		if rc.Err != nil {
			s.Log.Warn("cannot describe source topic configs; creating the remote topic with the target's defaults", "topic", rc.Name, "err", rc.Err)
			continue
		}
		configs[rc.Name] = s.TargetConfigs(s.translate(rc.Name, rc.Configs, known))
	}
	return s.createAll(ctx, ts, configs)
}

// createAll creates the remote topics of ts, many to a request, each with
// its entry of configs (by source topic name), and returns those that exist
// afterwards. A topic refused for its configs is created again alone
// without the configs the target refuses (createDroppingInvalid).
func (s *Syncer) createAll(ctx context.Context, ts []*Topic, configs map[string]map[string]*string) ([]*Topic, error) {
	weight := func(t *Topic) int { return 1 + int(t.Partitions) + len(configs[t.Name]) }
	var made []*Topic
	for _, b := range batches(ts, weight) {
		errs, err := s.createTopics(ctx, b, configs)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			for _, t := range b {
				s.Log.Error("cannot create remote topic", "topic", t.Remote, "cluster", s.TargetAlias, "err", err)
			}
			continue
		}
		for _, t := range b {
			cs := configs[t.Name]
			n := len(cs)
			err := resultOf(errs, nil, t.Remote, "CreateTopics")
			if errors.Is(err, kerr.InvalidConfig) && n > 0 {
				n, err = s.createDroppingInvalid(ctx, t, cs)
			}
			switch {
			case err == nil:
				s.Log.Info("created remote topic", "topic", t.Remote, "cluster", s.TargetAlias, "partitions", t.Partitions, "replication_factor", s.ReplicationFactor, "configs", n)
			case errors.Is(err, kerr.TopicAlreadyExists):
				// Created meanwhile; its partitions are checked next round.
			case errors.Is(err, kerr.InvalidReplicationFactor):
				return nil, fmt.Errorf("creating remote topic %s on %s with replication factor %d (key replication.factor): %w", t.Remote, s.TargetAlias, s.ReplicationFactor, err)
			default:
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				s.Log.Error("cannot create remote topic", "topic", t.Remote, "cluster", s.TargetAlias, "err", err)
				continue
			}
			made = append(made, t)
		}
	}
	return made, nil
}

// TargetConfigs returns the configs a new remote topic gets from its source
// topic's described configs: no sensitive, static-broker or excluded entries,
// and defaults only when DefaultsFromSource is set.
func (s *Syncer) TargetConfigs(cs []kadm.Config) map[string]*string {
	out := make(map[string]*string)
	for _, c := range cs {
		switch {
		case c.Sensitive, c.Value == nil,
			c.Source == kmsg.ConfigSourceStaticBrokerConfig,
			c.Source == kmsg.ConfigSourceDefaultConfig && !s.DefaultsFromSource,
			s.ConfigExclude != nil && s.ConfigExclude.MatchString(c.Key):
			continue
		}
		v := *c.Value
		out[c.Key] = &v
	}
	return out
}

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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/lograte"
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
	// skips the rest while nothing changed (see Sync);
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

	// Recreated, if set, is called with the remote topics that Sync
	// found deleted and created again, or re-created behind its back
	// (a new topic ID): a kgo producer keeps the ID of a topic it wrote
	// to and fails with UNKNOWN_TOPIC_ID until the topic is purged from
	// it (kgo.Client.PurgeTopicsFromProducing).
	Recreated func(remotes []string)

	// logs limits the warnings and errors that repeat at every sync,
	// per cause (what failed and why), with counts.
	logs    lograte.Limiter
	aclsOff atomic.Bool // a cluster has no authorizer: SyncACLs does nothing
	recheck atomic.Bool // the next Sync checks the target fully (Recheck)
	syncState
}

// Topic is a source topic chosen for replication.
type Topic struct {
	Name       string // on the source
	Remote     string // on the target
	Partitions int32  // source partition count
	ID         string // source topic ID, hex; "" when the broker has none
	// Hosted is how many partitions of the remote topic, from partition
	// 0 on, the target hosts: those may be copied. The others wait for
	// the target to host them (a new topic, partitions just added) or
	// for the remote topic to be created or grown (Err says why not).
	Hosted int32
	Ready  bool   // Hosted == Partitions: every partition may be copied
	Err    string // why the remote topic could not be created, grown or described
}

// ShouldReplicate reports whether topic t of the source belongs to the flow.
func (s *Syncer) ShouldReplicate(t string) bool {
	p := s.Policy
	selected := s.Topics.Match(t) || (s.HeartbeatsReplication && p.IsHeartbeatsTopic(t))
	return selected && !p.IsInternalTopic(t) && !policy.IsCycle(p, t, s.TargetAlias)
}

// Sync lists the source topics, creates missing remote topics, adds missing
// partitions, and returns every selected source topic, sorted by name. A
// topic whose remote topic could not be made ready is logged and not Ready,
// with Err; it is tried again on the next Sync. So are new remote topics
// and partitions the target does not host yet (see Hosted and Pending).
// While the source lists the same topics as at the last Sync, and that
// Sync left every topic Ready, Sync only checks with one metadata request
// that the remote topics are still there as they were (targetUnchanged)
// and returns what it did then; a remote topic deleted, re-created or
// shrunk on the target behind the flow's back is made again at once, so
// within refresh.topics.interval.seconds as in MM2.
func (s *Syncer) Sync(ctx context.Context) ([]Topic, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	want, listed, same, err := s.sourceTopics(ctx)
	if err != nil {
		return nil, err
	}
	if same && s.targetUnchanged(ctx) {
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
		s.settle(listed, nil, nil)
		return nil, nil
	}
	remotes := make([]string, len(want))
	for i, t := range want {
		remotes[i] = t.Remote
	}
	// Listed afresh: kadm serves ListTopics from the client's metadata
	// cache (MetadataMinAge), which can still hold a remote topic deleted
	// a moment ago; asking for authorized operations makes it ask the
	// broker.
	tgt, err := s.Target.ListTopics(kadm.WithAuthorizedOps(ctx), remotes...)
	if err != nil {
		return nil, fmt.Errorf("listing topics of target cluster %s: %w", s.TargetAlias, err)
	}
	var missing []*Topic
	var short []grow
	for i := range want {
		t := &want[i]
		d, ok := tgt[t.Remote]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			if !s.waiting(t.Remote) { // else created, not in the metadata yet
				missing = append(missing, t)
			}
			continue
		}
		if d.Err == nil {
			s.noteID(t.Remote, d.ID)
		}
		if d.Err != nil {
			s.logs.Log(s.Log, slog.LevelError, "describe remote|"+d.Err.Error(), "cannot describe remote topic", "topic", t.Remote, "cluster", s.TargetAlias, "err", d.Err)
			t.Err = "cannot describe the remote topic: " + d.Err.Error()
			continue
		}
		have := int32(len(d.Partitions))
		s.seen(t.Remote, have)
		switch {
		case have < t.Partitions:
			short = append(short, grow{t, have})
		case have > t.Partitions:
			s.logs.Warn(s.Log, "more partitions|"+t.Remote, "remote topic has more partitions than its source; the extra partitions get no data", "topic", t.Remote, "remote_partitions", have, "source_partitions", t.Partitions)
		}
	}
	if err := s.grow(ctx, short); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		s.warnDeleted(missing)
		if err := s.create(ctx, missing); err != nil {
			return nil, err
		}
	}
	s.checkHosted(ctx, want)
	s.settle(listed, want, s.remotesOf(want))
	return want, nil
}

// grow adds the missing partitions of remote topics, many to a request.
// The new partitions wait for the target to host them (checkHosted).
func (s *Syncer) grow(ctx context.Context, gs []grow) error {
	for _, b := range batches(gs, func(g grow) int { return int(g.t.Partitions - g.have) }) {
		errs, err := s.addPartitions(ctx, b)
		for _, g := range b {
			if e := resultOf(errs, err, g.t.Remote, "CreatePartitions"); e != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.logs.Log(s.Log, slog.LevelError, "add partitions|"+e.Error(), "cannot add partitions to remote topic", "topic", g.t.Remote, "have", g.have, "want", g.t.Partitions, "err", e)
				g.t.Err = "cannot add partitions to the remote topic: " + e.Error()
				continue
			}
			s.Log.Info("added partitions to remote topic; each is copied once the target hosts it", "topic", g.t.Remote, "from", g.have, "to", g.t.Partitions)
			s.added(g.t.Remote, g.t.Partitions, false)
		}
	}
	return nil
}

// create makes the remote topics of ts with the source's configs; they
// wait for the target to host them (checkHosted).
func (s *Syncer) create(ctx context.Context, ts []*Topic) error {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	rcs, err := s.Source.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return fmt.Errorf("describing configs of source topics: %w", err)
	}
	configs := make(map[string]map[string]*string, len(rcs))
	known := s.targetKnown(ctx)
	for _, rc := range rcs {
		if rc.Err != nil {
			s.logs.Warn(s.Log, "describe source configs|"+rc.Err.Error(), "cannot describe source topic configs; creating the remote topic with the target's defaults", "topic", rc.Name, "err", rc.Err)
			continue
		}
		configs[rc.Name] = s.TargetConfigs(s.translate(rc.Name, rc.Configs, known))
	}
	_, err = s.createAll(ctx, ts, configs)
	return err
}

// createAll creates the remote topics of ts, many to a request, each with
// its entry of configs (by source topic name), and returns those that exist
// afterwards, which wait for the target to host them; the others get Err.
// A topic refused for its configs is created again alone without the
// configs the target refuses (createDroppingInvalid).
func (s *Syncer) createAll(ctx context.Context, ts []*Topic, configs map[string]map[string]*string) ([]*Topic, error) {
	weight := func(t *Topic) int { return 1 + int(t.Partitions) + len(configs[t.Name]) }
	failed := func(t *Topic, err error) {
		s.logs.Log(s.Log, slog.LevelError, "create remote|"+err.Error(), "cannot create remote topic", "topic", t.Remote, "cluster", s.TargetAlias, "err", err)
		t.Err = "cannot create the remote topic: " + err.Error()
	}
	var made []*Topic
	for _, b := range batches(ts, weight) {
		errs, err := s.createTopics(ctx, b, configs)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			for _, t := range b {
				failed(t, err)
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
			case errors.Is(err, kerr.InvalidReplicationFactor) && !internaltopic.RefusedForNow(ctx, s.Target, s.ReplicationFactor):
				// A factor refused while the target has the brokers
				// for it (one in controlled shutdown) is retried
				// next round, as other failures are (default).
				return nil, fmt.Errorf("creating remote topic %s on %s with replication factor %d (key replication.factor): %w", t.Remote, s.TargetAlias, s.ReplicationFactor, err)
			default:
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				failed(t, err)
				continue
			}
			s.added(t.Remote, t.Partitions, true)
			s.created(t.Remote)
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

// Recheck makes the next Sync check the remote topics on the target fully,
// even if nothing changed since the last one: call it when producing found
// a remote topic gone (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID).
func (s *Syncer) Recheck() { s.recheck.Store(true) }

// noteID records the topic ID the target lists for remote; a different ID
// than the last one seen means the topic was deleted and created again
// behind the flow's back, reported through Recreated.
func (s *Syncer) noteID(remote string, id kadm.TopicID) {
	s.hostMu.Lock()
	if s.ids == nil {
		s.ids = make(map[string][16]byte)
	}
	old, had := s.ids[remote]
	s.ids[remote] = id
	s.hostMu.Unlock()
	if had && old != ([16]byte{}) && old != [16]byte(id) && id != (kadm.TopicID{}) {
		s.Log.Warn("remote topic was deleted and created again on the target behind the flow; the records it held are gone there and are not copied again",
			"topic", remote, "cluster", s.TargetAlias)
		if s.Recreated != nil {
			s.Recreated([]string{remote})
		}
	}
}

// warnDeleted logs the missing remote topics this Syncer had seen before:
// deleted on the target behind the flow's back.
func (s *Syncer) warnDeleted(missing []*Topic) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	for _, t := range missing {
		if _, had := s.ids[t.Remote]; had {
			s.Log.Warn("remote topic was deleted on the target; creating it again. The records it held are gone there and are not copied again: copying goes on from the flow's progress",
				"topic", t.Remote, "cluster", s.TargetAlias)
		}
	}
}

// created notes that Sync created remote; if it had seen the topic before,
// producers must forget its old ID (Recreated).
func (s *Syncer) created(remote string) {
	s.hostMu.Lock()
	_, had := s.ids[remote]
	if s.ids == nil {
		s.ids = make(map[string][16]byte)
	}
	s.ids[remote] = [16]byte{} // learnt at the next listing
	s.hostMu.Unlock()
	if had && s.Recreated != nil {
		s.Recreated([]string{remote})
	}
}

// remotesOf returns the IDs seen of the remote topics of ts.
func (s *Syncer) remotesOf(ts []Topic) map[string]remote {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	out := make(map[string]remote, len(ts))
	for _, t := range ts {
		if id, ok := s.ids[t.Remote]; ok && id != ([16]byte{}) {
			out[t.Remote] = remote{id: id, parts: t.Partitions}
		}
	}
	return out
}

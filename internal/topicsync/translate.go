package topicsync

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic configs removed or renamed between Kafka versions. A source topic
// config the target does not know is translated when a rule says how, or
// else dropped; either way with one warning per topic and key.

// renamed maps an old topic config to the configs that replaced it, each
// given the old value. message.timestamp.difference.max.ms (gone in Kafka
// 4.0) bounded the distance of a timestamp from now on both sides; KIP-937
// split it into before and after.
var renamed = map[string][]string{
	"message.timestamp.difference.max.ms": {"message.timestamp.before.max.ms", "message.timestamp.after.max.ms"},
}

// targetKnown returns the topic config names the target knows, learnt once
// from describing one of its topics (a described topic lists every config,
// defaults included). It returns nil while the target has no topic to ask.
func (s *Syncer) targetKnown(ctx context.Context) map[string]bool {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	if s.known != nil {
		return s.known
	}
	topics, err := s.Target.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil
	}
	names := topics.Names()
	sort.Strings(names)
	for _, name := range names {
		rcs, err := s.Target.DescribeTopicConfigs(ctx, name)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil || len(rcs[0].Configs) == 0 {
			continue
		}
		known := make(map[string]bool, len(rcs[0].Configs))
		s.defaults = make(map[string]string)
		for _, c := range rcs[0].Configs {
			known[c.Key] = true
			if c.Value != nil && c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				s.defaults[c.Key] = *c.Value
			}
		}
		s.known = known
		return known
	}
	return nil
}

// translate returns the source topic configs cs as the target can take
// them: keys the target does not know are renamed by the rules above or
// dropped. A renamed key's value overrides the new key's default entry but
// not a value the source sets for the new key itself. known nil (not
// learnt yet) keeps cs as it is.
func (s *Syncer) translate(topic string, cs []kadm.Config, known map[string]bool) []kadm.Config {
	if known == nil {
		return cs
	}
	out := make([]kadm.Config, 0, len(cs))
	index := make(map[string]int, len(cs))
	var moved []kadm.Config
	for _, c := range cs {
		if c.Source == sourceV0 {
			c.Source = s.guessSource(c)
		}
		if known[c.Key] {
			index[c.Key] = len(out)
			out = append(out, c)
			continue
		}
		if s.ConfigExclude != nil && s.ConfigExclude.MatchString(c.Key) {
			continue // not replicated at all (config.properties.exclude)
		}
		news := renamed[c.Key]
		var usable []string
		for _, k := range news {
			if known[k] {
				usable = append(usable, k)
			}
		}
		if c.Source == kmsg.ConfigSourceDefaultConfig && !s.DefaultsFromSource {
			continue // never sent: nothing to warn about
		}
		if c.Sensitive || c.Source == kmsg.ConfigSourceStaticBrokerConfig {
			continue
		}
		if len(usable) == 0 {
			s.warnOnce(topic, c.Key, "the target does not know this topic config; dropped", "")
			continue
		}
		s.warnOnce(topic, c.Key, "the target does not know this topic config; translated", usable...)
		for _, k := range usable {
			n := c
			n.Key = k
			moved = append(moved, n)
		}
	}
	for _, n := range moved {
		i, ok := index[n.Key]
		switch {
		case !ok:
			index[n.Key] = len(out)
			out = append(out, n)
		case out[i].Source == kmsg.ConfigSourceDefaultConfig || out[i].Source == kmsg.ConfigSourceStaticBrokerConfig:
			out[i] = n
		}
	}
	return out
}

// sourceV0 is the Source of a config described by a broker that answers
// only DescribeConfigs v0 (Kafka 0.11 to 1.0): its is_default flag is lost
// on the way through kadm.
const sourceV0 kmsg.ConfigSource = -1

// guessSource tells, for a config described without its source, whether it
// is a default: when its value is the target's default for that key it is
// taken as one, otherwise as set on the topic.
func (s *Syncer) guessSource(c kadm.Config) kmsg.ConfigSource {
	if d, ok := s.defaults[c.Key]; ok && c.Value != nil && *c.Value == d {
		return kmsg.ConfigSourceDefaultConfig
	}
	return kmsg.ConfigSourceDynamicTopicConfig
}

// warnOnce logs that topic's config key was dropped or translated (to),
// once per Syncer.
func (s *Syncer) warnOnce(topic, key, msg string, to ...string) {
	if _, seen := s.warned.LoadOrStore(topic+"\x00"+key, true); seen {
		return
	}
	args := []any{"topic", topic, "key", key, "cluster", s.TargetAlias}
	if len(to) > 0 && to[0] != "" {
		args = append(args, "to", to)
	}
	s.Log.Warn(msg, args...)
}

// createDroppingInvalid creates the remote topic of t after the target
// refused configs as invalid: it checks each config alone with a
// validate-only creation, drops those refused (one warning each, with the
// broker's reason) and creates the topic with the rest, so one key never
// stops the whole creation. It returns the number of configs kept.
func (s *Syncer) createDroppingInvalid(ctx context.Context, t *Topic, configs map[string]*string) (int, error) {
	kept := make(map[string]*string, len(configs))
	for _, k := range sortedKeys(configs) {
		one := map[string]*string{k: configs[k]}
		r, verr := s.Target.ValidateCreateTopics(ctx, t.Partitions, s.ReplicationFactor, one, t.Remote)
		if verr == nil {
			if tr, ok := r[t.Remote]; ok {
				verr = withMessage(tr.Err, &tr.ErrMessage)
			}
		}
		switch {
		case verr == nil:
			kept[k] = configs[k]
		case errors.Is(verr, kerr.TopicAlreadyExists), ctx.Err() != nil:
			return 0, verr // created meanwhile, or stopping: no key is to blame
		default:
			if _, seen := s.warned.LoadOrStore(t.Name+"\x00"+k, true); !seen {
				s.Log.Warn("the target refuses this topic config; dropped", "topic", t.Name, "key", k, "cluster", s.TargetAlias, "err", verr)
			}
		}
	}
	resp, err := s.Target.CreateTopic(ctx, t.Partitions, s.ReplicationFactor, kept, t.Remote)
	if resp.Err != nil {
		err = withMessage(resp.Err, &resp.ErrMessage)
	}
	return len(kept), err
}

// syncState is the part of Syncer that keeps state between calls.
type syncState struct {
	knownMu  sync.Mutex
	known    map[string]bool   // topic config names of the target
	defaults map[string]string // and their values that are not topic overrides
	warned   sync.Map          // topic+"\x00"+key already warned about

	hostMu     sync.Mutex
	hosts      map[string]*hosting // by remote topic
	ids        map[string][16]byte // remote topic -> its ID last seen on the target; zero: created, not seen yet
	hostReport time.Time           // when to log the partitions waiting next

	syncMu sync.Mutex // one Sync at a time
	last   *settled   // the last Sync, if it left every topic Ready
}

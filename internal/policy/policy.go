// Package policy implements MirrorMaker 2's replication policies (how remote
// topics are named and recognised), the topic and group filters built from
// regex lists, and the cycle check that keeps active/active setups from
// replicating a topic back to where it came from.
//
// Behaviour follows the Java classes in org.apache.kafka.connect.mirror
// exactly, including their quirks: Java's String.split dropping trailing
// empty strings, the internal-separator flag that only counts when a
// separator was configured explicitly, and IdentityReplicationPolicy treating
// any topic that ends in "heartbeats" as a heartbeats topic.
package policy

import (
	"fmt"
	"strings"
)

// Class names accepted by New.
const (
	DefaultClass  = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
	IdentityClass = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

	// DefaultSeparator is the value of replication.policy.separator when unset.
	DefaultSeparator = "."

	heartbeats = "heartbeats"
)

// Config selects and configures a replication policy. Its fields mirror the
// connector keys replication.policy.class, replication.policy.separator,
// replication.policy.internal.topic.separator.enabled and
// source.cluster.alias.
type Config struct {
	// Class is a fully qualified MM2 class name or its simple name; empty
	// means DefaultReplicationPolicy.
	Class string
	// Separator is used when SeparatorSet is true or Separator is non-empty;
	// otherwise the separator is ".". Set SeparatorSet to configure an empty
	// separator.
	Separator    string
	SeparatorSet bool
	// InternalSeparatorEnabled controls whether internal topic names use the
	// separator. MM2's default is true; callers must set it themselves. It is
	// only consulted when the separator was set explicitly.
	InternalSeparatorEnabled bool
	// SourceAlias is the source cluster alias (IdentityReplicationPolicy
	// reports it as the source of every non-heartbeats topic). Empty means
	// unset.
	SourceAlias string
}

// Policy mirrors Java's ReplicationPolicy. Methods that return null in Java
// return ok=false here.
type Policy interface {
	// FormatRemoteTopic names the copy of topic replicated from source.
	FormatRemoteTopic(source, topic string) string
	// TopicSource returns the alias of the cluster topic was replicated from.
	TopicSource(topic string) (string, bool)
	// UpstreamTopic returns the name of topic on its source cluster.
	UpstreamTopic(topic string) (string, bool)
	// OriginalTopic follows UpstreamTopic to the topic's first cluster.
	OriginalTopic(topic string) string
	HeartbeatsTopic() string
	OffsetSyncsTopic(alias string) string
	CheckpointsTopic(alias string) string
	IsHeartbeatsTopic(topic string) bool
	IsCheckpointsTopic(topic string) bool
	IsMM2InternalTopic(topic string) bool
	IsInternalTopic(topic string) bool
}

// New builds the policy named by c.Class.
func New(c Config) (Policy, error) {
	d := &defaultPolicy{sep: DefaultSeparator, isep: DefaultSeparator}
	if c.SeparatorSet || c.Separator != "" {
		d.sep = c.Separator
		if c.InternalSeparatorEnabled {
			d.isep = c.Separator
		}
	}
	d.self = d
	switch strings.TrimSpace(c.Class) {
	case "", DefaultClass, "DefaultReplicationPolicy":
		return d, nil
	case IdentityClass, "IdentityReplicationPolicy":
		p := &identityPolicy{defaultPolicy: d, alias: c.SourceAlias}
		d.self = p
		return p, nil
	default:
		return nil, fmt.Errorf("unsupported replication policy class %q (supported: %s, %s)", c.Class, DefaultClass, IdentityClass)
	}
}

// defaultPolicy is DefaultReplicationPolicy: remote topics are "source" +
// sep + "topic".
type defaultPolicy struct {
	sep  string // replication separator
	isep string // separator used inside internal topic names
	self Policy // the outermost policy, for Java-style virtual dispatch
}

func (p *defaultPolicy) FormatRemoteTopic(source, topic string) string {
	return source + p.sep + topic
}

func (p *defaultPolicy) TopicSource(topic string) (string, bool) {
	parts := javaSplit(topic, p.sep)
	if len(parts) < 2 {
		return "", false
	}
	return parts[0], true
}

func (p *defaultPolicy) UpstreamTopic(topic string) (string, bool) {
	src, ok := p.self.TopicSource(topic)
	if !ok {
		return "", false
	}
	n := len(src) + len(p.sep)
	if n > len(topic) {
		// Only reachable through a subclass reporting a foreign alias.
		return "", false
	}
	return topic[n:], true
}

func (p *defaultPolicy) OriginalTopic(topic string) string {
	return originalTopic(p.self, topic)
}

func (p *defaultPolicy) HeartbeatsTopic() string { return heartbeats }

func (p *defaultPolicy) OffsetSyncsTopic(alias string) string {
	return "mm2-offset-syncs" + p.isep + alias + p.isep + "internal"
}

func (p *defaultPolicy) CheckpointsTopic(alias string) string {
	return alias + p.isep + "checkpoints" + p.isep + "internal"
}

func (p *defaultPolicy) IsHeartbeatsTopic(topic string) bool {
	return p.self.OriginalTopic(topic) == p.self.HeartbeatsTopic()
}

func (p *defaultPolicy) IsCheckpointsTopic(topic string) bool {
	return strings.HasSuffix(topic, p.isep+"checkpoints"+p.isep+"internal")
}

func (p *defaultPolicy) IsMM2InternalTopic(topic string) bool {
	return strings.HasSuffix(topic, p.isep+"internal")
}

func (p *defaultPolicy) IsInternalTopic(topic string) bool {
	return p.self.IsMM2InternalTopic(topic) ||
		strings.HasPrefix(topic, "__") || strings.HasPrefix(topic, ".") ||
		strings.HasSuffix(topic, "-internal") || strings.HasSuffix(topic, ".internal")
}

// identityPolicy is IdentityReplicationPolicy: topics keep their names,
// except heartbeats-like topics, which are renamed as by the default policy.
type identityPolicy struct {
	*defaultPolicy
	alias string
}

// looksLikeHeartbeat reproduces Java's endsWith("heartbeats") test, so
// "myheartbeats" qualifies too.
func looksLikeHeartbeat(topic string) bool { return strings.HasSuffix(topic, heartbeats) }

func (p *identityPolicy) FormatRemoteTopic(source, topic string) string {
	if looksLikeHeartbeat(topic) {
		return p.defaultPolicy.FormatRemoteTopic(source, topic)
	}
	return topic
}

func (p *identityPolicy) TopicSource(topic string) (string, bool) {
	if looksLikeHeartbeat(topic) {
		return p.defaultPolicy.TopicSource(topic)
	}
	return p.alias, p.alias != ""
}

func (p *identityPolicy) UpstreamTopic(topic string) (string, bool) {
	if looksLikeHeartbeat(topic) {
		return p.defaultPolicy.UpstreamTopic(topic)
	}
	return topic, true
}

// originalTopic is the interface default: follow upstream names until there
// is none or a name maps to itself.
func originalTopic(p Policy, topic string) string {
	for {
		up, ok := p.UpstreamTopic(topic)
		if !ok || up == topic {
			return topic
		}
		topic = up
	}
}

// javaSplit emulates Java's s.split(Pattern.quote(sep)): a leading empty
// string is kept, trailing empty strings are dropped, and a string without a
// match yields itself.
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	if sep == "" && s == "" {
		parts = []string{""}
	}
	if len(parts) == 1 {
		return parts // no match: Java returns the input, even if empty
	}
	n := len(parts)
	for n > 0 && parts[n-1] == "" {
		n--
	}
	return parts[:n]
}

// IsCycle reports whether replicating topic to the cluster targetAlias would
// send it back to a cluster it already came from (MirrorSourceConnector's
// isCycle). With IdentityReplicationPolicy no cycle can be seen.
func IsCycle(p Policy, topic, targetAlias string) bool {
	for {
		src, ok := p.TopicSource(topic)
		if !ok {
			return false
		}
		if src == targetAlias {
			return true
		}
		up, ok := p.UpstreamTopic(topic)
		if !ok || up == topic {
			return false
		}
		topic = up
	}
}

package mirrorclient

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/policy"
)

// Property keys read by WithProperties, besides the Java client
// connection and security keys (bootstrap.servers, security.protocol,
// ssl.*, sasl.*).
const (
	PolicyClassKey       = "replication.policy.class"
	SeparatorKey         = "replication.policy.separator"
	InternalSeparatorKey = "replication.policy.internal.topic.separator.enabled"
	SourceAliasKey       = "source.cluster.alias"
)

// Option configures a Client. Options apply in order, so a later option
// overrides what an earlier one (WithProperties included) set.
type Option struct{ apply func(*settings) error }

func option(f func(*settings) error) Option { return Option{apply: f} }

// settings collects the options.
type settings struct {
	admin, consumer []kgo.Opt
	policy          policy.Config
	log             *slog.Logger
}

// WithClientOpts adds franz-go options (seed brokers, TLS, SASL, ...) used
// to connect to the cluster, for both metadata requests and the checkpoint
// reader.
func WithClientOpts(opts ...kgo.Opt) Option {
	return option(func(s *settings) error {
		s.admin = append(s.admin, opts...)
		s.consumer = append(s.consumer, opts...)
		return nil
	})
}

// WithSeedBrokers sets the addresses ("host:port") used to bootstrap the
// connection.
func WithSeedBrokers(addrs ...string) Option {
	return WithClientOpts(kgo.SeedBrokers(addrs...))
}

// WithProperties configures the client from Java MirrorClientConfig
// properties, as found in mm2.properties or passed to RemoteClusterUtils:
// bootstrap.servers and the security keys; replication.policy.class (the
// Default or Identity policy), replication.policy.separator,
// replication.policy.internal.topic.separator.enabled and
// source.cluster.alias; and keys prefixed "admin." or "consumer.", which
// override the unprefixed ones for metadata requests and the checkpoint
// reader respectively. Keys with no effect are ignored.
func WithProperties(props map[string]string) Option {
	return option(func(s *settings) error {
		base := make(map[string]string)
		for k, v := range props {
			if !strings.HasPrefix(k, "admin.") && !strings.HasPrefix(k, "consumer.") && !strings.HasPrefix(k, "producer.") {
				base[k] = v
			}
		}
		adm, err := clients.RoleOptions(clients.Admin, withPrefix(base, props, "admin."))
		if err != nil {
			return err
		}
		con, err := clients.RoleOptions(clients.Consumer, withPrefix(base, props, "consumer."))
		if err != nil {
			return err
		}
		s.admin = append(s.admin, adm...)
		s.consumer = append(s.consumer, con...)
		if v, ok := props[PolicyClassKey]; ok {
			s.policy.Class = strings.TrimSpace(v)
		}
		if v, ok := props[SeparatorKey]; ok {
			s.policy.Separator, s.policy.SeparatorSet = v, true
		}
		if v, ok := props[InternalSeparatorKey]; ok {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				s.policy.InternalSeparatorEnabled = true
			case "false":
				s.policy.InternalSeparatorEnabled = false
			default:
				return fmt.Errorf("%s: %q is not a boolean", InternalSeparatorKey, v)
			}
		}
		if v, ok := props[SourceAliasKey]; ok {
			s.policy.SourceAlias = strings.TrimSpace(v)
		}
		return nil
	})
}

// withPrefix returns base overlaid with the keys of props that start with
// prefix, prefix removed.
func withPrefix(base, props map[string]string, prefix string) map[string]string {
	m := make(map[string]string, len(base))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range props {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			m[rest] = v
		}
	}
	return m
}

// WithSeparator sets the separator of the default replication policy
// (replication.policy.separator; "." when not set).
func WithSeparator(sep string) Option {
	return option(func(s *settings) error {
		s.policy.Separator, s.policy.SeparatorSet = sep, true
		return nil
	})
}

// WithInternalTopicSeparator says whether internal topic names such as
// "<alias>.checkpoints.internal" use the custom separator (true, MM2's
// default since 3.5) or always "." (false, MM2 before 3.1).
// It matters only with WithSeparator.
func WithInternalTopicSeparator(enabled bool) Option {
	return option(func(s *settings) error {
		s.policy.InternalSeparatorEnabled = enabled
		return nil
	})
}

// WithIdentityPolicy selects IdentityReplicationPolicy, under which
// replicated topics keep their names (heartbeats topics are still
// prefixed). sourceAlias is the cluster this one replicates from: every
// non-internal topic is then reported as remote from it. With an empty
// sourceAlias no topic is remote.
func WithIdentityPolicy(sourceAlias string) Option {
	return option(func(s *settings) error {
		s.policy.Class = policy.IdentityClass
		s.policy.SourceAlias = sourceAlias
		return nil
	})
}

// WithDefaultPolicy selects DefaultReplicationPolicy (the default), under
// which the copy of topic t from cluster A is named "A.t".
func WithDefaultPolicy() Option {
	return option(func(s *settings) error {
		s.policy.Class = policy.DefaultClass
		return nil
	})
}

// WithLogger sets the logger; by default nothing is logged.
func WithLogger(log *slog.Logger) Option {
	return option(func(s *settings) error {
		s.log = log
		return nil
	})
}

// Client queries one cluster. It is safe for concurrent use. Close it when
// done.
type Client struct {
	cl       *kgo.Client
	adm      *kadm.Client
	consumer []kgo.Opt
	pol      policy.Policy
	log      *slog.Logger

	skipped atomic.Int64
}

// New returns a Client for the cluster that the options connect to. It
// does not contact the cluster.
func New(opts ...Option) (*Client, error) {
	s := &settings{policy: policy.Config{InternalSeparatorEnabled: true}}
	for _, o := range opts {
		if o.apply == nil {
			continue
		}
		if err := o.apply(s); err != nil {
			return nil, fmt.Errorf("mirrorclient: %w", err)
		}
	}
	pol, err := policy.New(s.policy)
	if err != nil {
		return nil, fmt.Errorf("mirrorclient: %w", err)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	cl, err := kgo.NewClient(s.admin...)
	if err != nil {
		return nil, fmt.Errorf("mirrorclient: %w", err)
	}
	return &Client{cl: cl, adm: kadm.NewClient(cl), consumer: s.consumer, pol: pol, log: s.log}, nil
}

// Close releases the client's connections.
func (c *Client) Close() { c.cl.Close() }

// listTopics returns the cluster's topics, without Kafka's internal ones
// (such as __consumer_offsets), as Java's Admin.listTopics does.
func (c *Client) listTopics(ctx context.Context) ([]string, error) {
	td, err := c.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	// Per-topic errors (say, a topic being created) do not matter here:
	// only names are used.
	return td.Names(), nil
}

// HeartbeatTopics returns the heartbeats topics of the cluster, sorted:
// "heartbeats" and its replicas such as "A.heartbeats" or
// "B.A.heartbeats".
func (c *Client) HeartbeatTopics(ctx context.Context) ([]string, error) {
	ts, err := c.listTopics(ctx)
	if err != nil {
		return nil, err
	}
	return heartbeatTopics(c.pol, ts), nil
}

// CheckpointTopics returns the checkpoints topics of the cluster
// ("<alias>.checkpoints.internal"), sorted.
func (c *Client) CheckpointTopics(ctx context.Context) ([]string, error) {
	ts, err := c.listTopics(ctx)
	if err != nil {
		return nil, err
	}
	return checkpointTopics(c.pol, ts), nil
}

// UpstreamClusters returns, sorted, the aliases of the clusters that
// replicate into this one directly or through other clusters, as seen
// from its heartbeats topics: "B.A.heartbeats" names both B and A.
func (c *Client) UpstreamClusters(ctx context.Context) ([]string, error) {
	ts, err := c.listTopics(ctx)
	if err != nil {
		return nil, err
	}
	return upstreamClusters(c.pol, ts), nil
}

// ReplicationHops returns the number of replication hops from the cluster
// upstreamAlias to this one (1 if it replicates directly into it), or -1
// if upstreamAlias is not upstream. Like MM2 it counts through heartbeats
// topics, so it needs heartbeats to be emitted and replicated.
func (c *Client) ReplicationHops(ctx context.Context, upstreamAlias string) (int, error) {
	ts, err := c.listTopics(ctx)
	if err != nil {
		return -1, err
	}
	return replicationHops(c.pol, ts, upstreamAlias), nil
}

// RemoteTopics returns, sorted, the topics of the cluster that were
// replicated from another cluster, at any distance.
func (c *Client) RemoteTopics(ctx context.Context) ([]string, error) {
	ts, err := c.listTopics(ctx)
	if err != nil {
		return nil, err
	}
	return remoteTopics(c.pol, ts, ""), nil
}

// RemoteTopicsFrom returns, sorted, the topics replicated directly from
// the cluster source: with the default policy, "A.t" is from A but
// "B.A.t" is from B.
func (c *Client) RemoteTopicsFrom(ctx context.Context, source string) ([]string, error) {
	ts, err := c.listTopics(ctx)
	if err != nil {
		return nil, err
	}
	return remoteTopics(c.pol, ts, source), nil
}

// CheckpointsTopic returns the name of the topic holding the checkpoints
// replicated from the cluster remoteAlias, e.g. "A.checkpoints.internal".
func (c *Client) CheckpointsTopic(remoteAlias string) string {
	return c.pol.CheckpointsTopic(remoteAlias)
}

// RemoteTopic returns the name, on this cluster, of the copy of topic
// replicated from the cluster source, e.g. "A.orders".
func (c *Client) RemoteTopic(source, topic string) string {
	return c.pol.FormatRemoteTopic(source, topic)
}

// SkippedRecords returns how many checkpoint records this client could not
// decode and skipped so far.
func (c *Client) SkippedRecords() int64 { return c.skipped.Load() }

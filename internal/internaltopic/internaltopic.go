// Package internaltopic creates the internal topics kmirror writes (Connect
// offsets, offset syncs, offset index, checkpoints, heartbeats) the way MM2
// does: create unless present, name the setting behind a bad replication
// factor, and go on when the cluster forbids creating topics.
package internaltopic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/kafkaerr"
)

// Spec describes one internal topic.
type Spec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16             // -1 is the broker default
	RFKey             string            // the setting ReplicationFactor came from, for errors
	Configs           map[string]string // e.g. cleanup.policy
}

// Compacted is a single-partition compacted topic, as MM2 creates its
// offset-syncs, checkpoints and heartbeats topics.
func Compacted(name string, rf int16, rfKey string) Spec {
	return Spec{Name: name, Partitions: 1, ReplicationFactor: rf, RFKey: rfKey, Configs: map[string]string{"cleanup.policy": "compact"}}
}

// createWait bounds how long Create retries errors that may pass by
// themselves: a broker restarting, a controller being elected.
const createWait = 2 * time.Minute

// Create makes the topic unless it exists. Missing authorization or an
// unsupported CreateTopics API is not an error, as in MM2: an administrator
// may have created the topic, and writing to it will tell. Errors that may
// pass by themselves (kafkaerr.Transient) are retried for up to two
// minutes, and so is a replication factor refused while brokersFor says
// the cluster has the brokers for it (a rolling restart); a refusal
// returns at once. It reports whether kmirror created
// the topic.
func Create(ctx context.Context, adm *kadm.Client, s Spec) (bool, error) {
	var created bool
	err := backoff.Retry(ctx, backoff.Policy{First: 200 * time.Millisecond, Max: 5 * time.Second, For: createWait},
		func(err error) bool { return ctx.Err() == nil && Passing(ctx, adm, s, err) },
		func() (err error) {
			created, err = CreateOnce(ctx, adm, s)
			return err
		})
	return created, err
}

// Passing reports whether err, from creating s, may pass by itself: an
// error kafkaerr.Transient says so of, or a replication factor refused
// while the cluster has the brokers for it (brokersFor).
func Passing(ctx context.Context, adm *kadm.Client, s Spec, err error) bool {
	if errors.Is(err, kerr.InvalidReplicationFactor) {
		return RefusedForNow(ctx, adm, s.ReplicationFactor)
	}
	return kafkaerr.Transient(err)
}

// RefusedForNow reports whether the cluster of adm refused a topic of rf
// replicas (INVALID_REPLICATION_FACTOR) only for now: it has the brokers
// for it (brokersFor). Topic sync asks it of remote topics too.
func RefusedForNow(ctx context.Context, adm *kadm.Client, rf int16) bool {
	m, err := adm.Metadata(ctx)
	return err == nil && brokersFor(m, rf)
}

// brokersFor reports whether a refusal of a topic of rf replicas with
// INVALID_REPLICATION_FACTOR can only be for now: the cluster of m knows
// rf or more brokers, those that answer and those that hold replicas of
// its topics. The controller places no replica on a broker in controlled
// shutdown, so during a rolling restart of a cluster of rf brokers it
// refuses such a topic for some seconds (a robustness run: a worker
// starting then exited). A replication factor larger than the cluster, or
// -1 (the broker's default), is not waited for.
func brokersFor(m kadm.Metadata, rf int16) bool {
	known := make(map[int32]bool)
	for _, b := range m.Brokers {
		known[b.NodeID] = true
	}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				known[r] = true
			}
		}
	}
	return rf > 0 && int(rf) <= len(known)
}

// CreateOnce is one attempt of Create, for callers that retry on their
// own schedule or must not wait (a repair under a lock).
func CreateOnce(ctx context.Context, adm *kadm.Client, s Spec) (bool, error) {
	configs := make(map[string]*string, len(s.Configs))
	for k, v := range s.Configs {
		configs[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, s.Partitions, s.ReplicationFactor, configs, s.Name)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kerr.TopicAlreadyExists),
		errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.UnsupportedVersion):
		return false, nil
	case errors.Is(err, kerr.InvalidReplicationFactor):
		return false, fmt.Errorf("creating %s with replication factor %d (key %s): %w", s.Name, s.ReplicationFactor, s.RFKey, err)
	default:
		return false, fmt.Errorf("creating %s: %w", s.Name, err)
	}
}

// metadataWait bounds how long a topic created a moment ago may take to
// show in the metadata; a loaded cluster can take seconds.
const metadataWait = 30 * time.Second

// errNotYet: the topic is not in the metadata yet.
var errNotYet = errors.New("not in the metadata yet")

// Partitions returns the partition count of an existing topic, waiting
// briefly for a topic created a moment ago to reach the brokers' metadata.
func Partitions(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	var n int32
	var notYet error // the topic's error while it is not in the metadata
	err := backoff.Retry(ctx, backoff.Policy{First: 50 * time.Millisecond, Max: time.Second, For: metadataWait},
		func(err error) bool { return err == errNotYet },
		func() error {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return fmt.Errorf("describing %s: %w", topic, err)
			}
			d := td[topic]
			if d.Err == nil && len(d.Partitions) > 0 {
				n = int32(len(d.Partitions))
				return nil
			}
			notYet = d.Err
			return errNotYet
		})
	switch {
	case err == errNotYet:
		return 0, fmt.Errorf("describing %s, %v after creating it: %v", topic, metadataWait, notYet)
	case errors.Is(err, errNotYet):
		return 0, ctx.Err()
	}
	return n, err
}

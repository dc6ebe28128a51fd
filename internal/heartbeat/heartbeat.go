// Package heartbeat emits MirrorMaker 2 heartbeats: for a flow
// source->target, a record (source, target, now) is written to partition 0 of
// the target cluster's heartbeats topic at a fixed interval. Replicated
// downstream as "<source>.heartbeats", these records are how MM2 tools (and
// the mirrorclient package) discover which clusters are upstream.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/lograte"
	"github.com/kmirror/kmirror/internal/wire"
)

// RFKey is the MM2 setting that holds the heartbeats topic's replication
// factor; errors about the replication factor name it.
const RFKey = "heartbeats.topic.replication.factor"

// errWrongPartition means the producer chose the partition itself.
var errWrongPartition = errors.New("heartbeat not written to partition 0: the producer must use kgo.ManualPartitioner")

// Emitter writes the heartbeats of one flow. Create it with New.
type Emitter struct {
	cl       *kgo.Client
	adm      *kadm.Client
	topic    string
	source   string
	target   string
	rf       int16
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	sent, failed atomic.Int64
	logs         lograte.Limiter // failed writes, per cause with counts
}

// New returns an Emitter for the flow source->target. cl produces to and adm
// administers the target cluster; cl should use kgo.ManualPartitioner so that
// every heartbeat goes to partition 0 even if the topic has more partitions
// (Run fails otherwise). topic is the policy's heartbeats topic, rf the
// replication factor used if Run has to create it (-1 is the broker
// default), interval the time between two heartbeats. log may be nil.
func New(cl *kgo.Client, adm *kadm.Client, topic, source, target string, rf int16, interval time.Duration, log *slog.Logger) *Emitter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Emitter{
		cl: cl, adm: adm, topic: topic, source: source, target: target,
		rf: rf, interval: interval, now: time.Now,
		log: log.With("heartbeats_topic", topic, "source", source, "target", target),
	}
}

// Sent returns how many heartbeats the target acknowledged so far.
func (e *Emitter) Sent() int64 { return e.sent.Load() }

// Failed returns how many heartbeats could not be written so far.
func (e *Emitter) Failed() int64 { return e.failed.Load() }

// CreateTopic creates the heartbeats topic as a single-partition compacted
// topic unless it exists. As in MM2, a missing authorization or an
// unsupported CreateTopics API is logged and ignored: the topic may have
// been created by an administrator.
func (e *Emitter) CreateTopic(ctx context.Context) error {
	created, err := internaltopic.Create(ctx, e.adm, internaltopic.Compacted(e.topic, e.rf, RFKey))
	if created {
		e.log.Info("created heartbeats topic", "replication_factor", e.rf)
	}
	return err
}

// Emit writes one heartbeat stamped with the current time and waits for the
// target to acknowledge it, or for ctx to end.
func (e *Emitter) Emit(ctx context.Context) error {
	h := wire.Heartbeat{SourceAlias: e.source, TargetAlias: e.target, Timestamp: e.now().UnixMilli()}
	key, value, err := wire.Encode(h)
	if err != nil {
		return fmt.Errorf("encoding heartbeat: %w", err)
	}
	r := &kgo.Record{
		Topic:     e.topic,
		Partition: 0,
		Key:       key,
		Value:     value,
		Timestamp: time.UnixMilli(h.Timestamp),
	}
	// The wait ends with ctx: a stopping flow must not wait on a
	// heartbeat the target does not acknowledge.
	err = clients.ProduceWait(ctx, e.cl, r)
	if ctx.Err() != nil {
		// Stopping is no failure: the record may still land.
		return ctx.Err()
	}
	if err != nil {
		e.failed.Add(1)
		return fmt.Errorf("writing heartbeat to %s: %w", e.topic, err)
	}
	if r.Partition != 0 {
		return fmt.Errorf("%w: went to %s partition %d", errWrongPartition, e.topic, r.Partition)
	}
	e.sent.Add(1)
	return nil
}

// Run creates the heartbeats topic if needed, then emits a heartbeat every
// interval (the first one after one interval, as MM2 does) until ctx ends.
// A failed write is logged and retried at the next interval; Run returns
// nil when ctx ends, or an error if the topic cannot be created or the
// producer is misconfigured.
func (e *Emitter) Run(ctx context.Context) error {
	if e.interval <= 0 {
		return fmt.Errorf("heartbeat interval must be positive, got %v", e.interval)
	}
	if err := e.CreateTopic(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	t := time.NewTicker(e.interval)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := e.Emit(ctx)
		switch {
		case err == nil:
			if warned {
				e.log.Info("heartbeats flowing again")
				warned = false
			}
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errWrongPartition):
			return err
		default:
			// Per cause, the first failure and then a few lines that
			// count the others.
			e.logs.Warn(e.log, err.Error(), "heartbeat not written; retrying at the next interval", "err", err)
			warned = true
		}
	}
}

// Package readlog reads a topic from its start to the end it had when the
// read began: how kmirror loads its compacted internal topics.
package readlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/backoff"
)

// ToEnd calls fn for every committed record of topic, in offset order within
// each partition, from the log start up to the last stable offset each
// partition had when ToEnd began. connect holds the client options (bootstrap,
// TLS, SASL) of the cluster that has the topic.
func ToEnd(ctx context.Context, connect []kgo.Opt, topic string, fn func(*kgo.Record)) error {
	_, err := From(ctx, connect, topic, nil, fn)
	return err
}

// From is ToEnd from given offsets: partition p is read from starts[p] (its
// log start when absent or below it). It returns where each partition
// ended, to start the next read from.
func From(ctx context.Context, connect []kgo.Opt, topic string, starts map[int32]int64, fn func(*kgo.Record)) (map[int32]int64, error) {
	ends, err := committedEnds(ctx, connect, topic)
	if err != nil {
		return nil, err
	}
	from := make(map[int32]kgo.Offset)
	left := make(map[int32]int64)
	done := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		done[o.Partition] = o.Offset
		if o.Offset > starts[o.Partition] {
			from[o.Partition] = kgo.NewOffset().AtStart()
			if s := starts[o.Partition]; s > 0 {
				// Below the log start (compaction, retention) this
				// resets to the start.
				from[o.Partition] = kgo.NewOffset().At(s)
			}
			left[o.Partition] = o.Offset
		}
	})
	if len(left) == 0 {
		return done, nil
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Control records are kept (and not passed to fn) so that a
		// partition ending in a transaction marker is seen to be done.
		kgo.KeepControlRecords(),
	}, connect...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			ferr = fmt.Errorf("reading %s partition %d: %w", topic, p, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			end, ok := left[p.Partition]
			if !ok {
				return
			}
			for _, r := range p.Records {
				if r.Offset < end && !r.Attrs.IsControl() {
					fn(r)
				}
			}
			if n := len(p.Records); n > 0 && p.Records[n-1].Offset >= end-1 {
				delete(left, p.Partition)
			}
		})
	}
	return done, nil
}

// Partition calls fn for every committed record of one partition, in offset
// order, from the log start up to and including offset last, or up to the
// last stable offset the partition had when Partition began if that comes
// first (last < 0 means no bound).
func Partition(ctx context.Context, connect []kgo.Opt, topic string, partition int32, last int64, fn func(*kgo.Record)) error {
	return Range(ctx, connect, topic, partition, -1, last, fn)
}

// Range is Partition from offset first instead of the log start (first < 0,
// or below the log start: from the log start).
func Range(ctx context.Context, connect []kgo.Opt, topic string, partition int32, first, last int64, fn func(*kgo.Record)) error {
	ends, err := committedEnds(ctx, connect, topic)
	if err != nil {
		return err
	}
	lo, ok := ends.Lookup(topic, partition)
	if !ok {
		return fmt.Errorf("%s has no partition %d", topic, partition)
	}
	end := lo.Offset // exclusive
	if last >= 0 && last+1 < end {
		end = last + 1
	}
	if end <= 0 || first >= end {
		return nil
	}
	from := kgo.NewOffset().AtStart()
	if first > 0 {
		from = kgo.NewOffset().At(first)
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: from}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords(),
	}, connect...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s partition %d: %w", topic, partition, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("reading %s partition %d: %w", topic, partition, ferr)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end && !r.Attrs.IsControl() {
				fn(r)
			}
			if r.Offset >= end-1 {
				done = true
			}
		})
		if done {
			return nil
		}
	}
}

// Ends lists the last stable offset of every partition of topic, as the
// reads of this package bound them.
func Ends(ctx context.Context, connect []kgo.Opt, topic string) (kadm.ListedOffsets, error) {
	return committedEnds(ctx, connect, topic)
}

// endsRetryFor bounds how long committedEnds retries errors that mean a
// leader is moving or not yet known, as right after a topic is created or
// while a broker restarts.
const endsRetryFor = 30 * time.Second

// committedEnds lists the last stable offset of every partition of topic,
// retrying errors that mean a leader moves for up to endsRetryFor.
func committedEnds(ctx context.Context, connect []kgo.Opt, topic string) (kadm.ListedOffsets, error) {
	cl, err := kgo.NewClient(connect...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// A missing topic is the caller's to handle (kerr calls it
	// retriable), at once. So is no answer at all (a broker down, or
	// behind a proxy that closes connections): an API caller wants an
	// answer while the cluster is down, and a flow's start waits for
	// the cluster itself (flow.startRetry).
	retry := func(err error) bool {
		return kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition)
	}
	var ends kadm.ListedOffsets
	err = backoff.Retry(ctx, backoff.Policy{First: 50 * time.Millisecond, Max: time.Second, For: endsRetryFor}, retry, func() (err error) {
		if ends, err = adm.ListCommittedOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	return ends, nil
}

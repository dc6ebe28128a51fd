// Package readlog reads a topic from its start to the end it had when the
// read began: how kmirror loads its compacted internal topics.
package readlog

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ToEnd calls fn for every committed record of topic, in offset order within
// each partition, from the log start up to the last stable offset each
// partition had when ToEnd began. connect holds the client options (bootstrap,
// TLS, SASL) of the cluster that has the topic.
func ToEnd(ctx context.Context, connect []kgo.Opt, topic string, fn func(*kgo.Record)) error {
	adm, err := kgo.NewClient(connect...)
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	starts := make(map[int32]kgo.Offset)
	left := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			starts[o.Partition] = kgo.NewOffset().AtStart()
			left[o.Partition] = o.Offset
		}
	})
	if len(left) == 0 {
		return nil
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records are kept (and not passed to fn) so that a
		// partition ending in a transaction marker is seen to be done.
		kgo.KeepControlRecords(),
	}, connect...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			ferr = fmt.Errorf("reading %s partition %d: %w", topic, p, err)
		})
		if ferr != nil {
			return ferr
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
	return nil
}

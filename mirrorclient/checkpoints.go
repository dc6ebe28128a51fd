package mirrorclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/wire"
)

// ErrIncomplete is wrapped by the error returned when the checkpoints topic
// could not be read to its end within the timeout. The offsets read until
// then are returned with it: Java's MirrorClient returns them silently.
var ErrIncomplete = errors.New("checkpoints topic not read to its end")

// TopicPartition names a partition of a topic on this cluster.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Checkpoint is MM2's record of a consumer group's committed offset on a
// remote cluster and its translation to this cluster.
type Checkpoint struct {
	Group     string
	Topic     string // name on this cluster (already renamed, e.g. "A.orders")
	Partition int32
	// UpstreamOffset is the offset the group committed on the remote
	// cluster.
	UpstreamOffset int64
	// DownstreamOffset is where the group can resume on this cluster.
	DownstreamOffset int64
	// Metadata is the metadata of the remote commit ("" if none).
	Metadata string
}

// RemoteConsumerOffsets returns, for the consumer group, the offsets on
// this cluster that correspond to the group's commits on the cluster
// remoteAlias, keyed by this cluster's topic names. They come from the
// checkpoints MM2 replicated into "<remoteAlias>.checkpoints.internal";
// see RemoteCheckpoints for how it is read and what timeout means.
func (c *Client) RemoteConsumerOffsets(ctx context.Context, group, remoteAlias string, timeout time.Duration) (map[TopicPartition]int64, error) {
	cps, err := c.RemoteCheckpoints(ctx, group, remoteAlias, timeout)
	if cps == nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(cps))
	for tp, cp := range cps {
		out[tp] = cp.DownstreamOffset
	}
	return out, err
}

// RemoteCheckpoints returns the latest checkpoint of each partition for
// the consumer group, read from the checkpoints topic of remoteAlias.
//
// As in MM2, partition 0 of the topic is read from its start to the end it
// had when reading began, the last checkpoint of a partition wins, and
// records that do not decode are skipped (they are logged and counted, see
// SkippedRecords). A timeout > 0 bounds the read: when it expires, the
// checkpoints read so far are returned with an error wrapping
// ErrIncomplete. A missing checkpoints topic is an error.
func (c *Client) RemoteCheckpoints(ctx context.Context, group, remoteAlias string, timeout time.Duration) (map[TopicPartition]Checkpoint, error) {
	topic := c.pol.CheckpointsTopic(remoteAlias)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	out := make(map[TopicPartition]Checkpoint)
	skip := wire.Skipper[wire.Checkpoint]{
		Decode: wire.DecodeCheckpoint,
		OnSkip: func(e *wire.DecodeError) {
			c.skipped.Add(1)
			c.log.Warn("skipping checkpoint record that does not decode", "err", e)
		},
	}
	read := 0
	err := c.readPartition0(ctx, topic, func(r *kgo.Record) {
		read++
		cp, ok := skip.Record(r)
		if !ok || cp.Group != group {
			return
		}
		tp := TopicPartition{Topic: cp.Topic, Partition: cp.Partition}
		out[tp] = Checkpoint(cp)
	})
	c.log.Debug("read checkpoints", "topic", topic, "group", group, "records", read, "skipped", skip.Skipped(), "partitions", len(out))
	if err != nil {
		if errors.Is(err, ErrIncomplete) {
			return out, err
		}
		return nil, err
	}
	return out, nil
}

// readPartition0 calls fn for the records of topic's partition 0, from its
// start to the last stable offset it had when the read began. If ctx ends
// first, the error wraps ErrIncomplete (or is ctx's error if ctx was
// canceled rather than timed out).
func (c *Client) readPartition0(ctx context.Context, topic string, fn func(*kgo.Record)) error {
	ends, err := c.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("checkpoints topic %s does not exist: %w", topic, err)
		}
		return incomplete(ctx, fmt.Errorf("listing end offsets of %s: %w", topic, err))
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Offset <= 0 {
		return nil
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return incomplete(ctx, fmt.Errorf("listing start offsets of %s: %w", topic, err))
	}
	if s, ok := starts.Lookup(topic, 0); ok && s.Offset >= end.Offset {
		return nil // everything was deleted
	}

	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records are kept so that a log ending in a transaction
		// marker is seen to be read.
		kgo.KeepControlRecords(),
	}, c.consumer...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return incomplete(ctx, fmt.Errorf("reading %s: %w", topic, ctx.Err()))
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			ferr = fmt.Errorf("reading %s partition %d: %w", topic, p, err)
		})
		if ferr != nil {
			return ferr
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition != 0 || r.Offset >= end.Offset {
				return
			}
			if !r.Attrs.IsControl() {
				fn(r)
			}
			if r.Offset >= end.Offset-1 {
				done = true
			}
		})
		if done {
			return nil
		}
	}
}

// incomplete marks err as a timeout if ctx's deadline passed.
func incomplete(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	return err
}

// TranslateOffsets connects with the Java MirrorClientConfig properties
// props (see WithProperties) and returns the consumer group's offsets on
// that cluster translated from its commits on the cluster remoteAlias, as
// Java's RemoteClusterUtils.translateOffsets does. It is the usual call
// when a consumer fails over from remoteAlias to the cluster of props.
func TranslateOffsets(ctx context.Context, props map[string]string, remoteAlias, group string, timeout time.Duration) (map[TopicPartition]int64, error) {
	c, err := New(WithProperties(props))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.RemoteConsumerOffsets(ctx, group, remoteAlias, timeout)
}

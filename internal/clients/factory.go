package clients

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultFetchMaxBytes bounds one fetch response when fetch.max.bytes is
// not set.
const DefaultFetchMaxBytes = 16 << 20

// DefaultPartitionFetchMaxBytes bounds one partition of a fetch response
// when max.partition.fetch.bytes is not set. Java's 1 MiB binds a partition
// to 1 MiB per round trip, which over a WAN link with few partitions is the
// whole throughput; franz-go rotates the partitions of its fetches, so a
// larger share per partition starves none.
const DefaultPartitionFetchMaxBytes = DefaultFetchMaxBytes / 2

// ID is the client ID of kmirror's client for role (e.g.
// "replication-consumer") in scope, usually a flow name: SCOPE|kmirror|ROLE.
func ID(scope, role string) string { return scope + "|kmirror|" + role }

// Build returns the options of a client called name (its client ID, see
// ID) for role: kmirror's role defaults, then props mapped by RoleOptions,
// then the client ID, prefixed by props' client.id when that is set.
func Build(name string, role Role, props map[string]string) ([]kgo.Opt, error) {
	conn, err := RoleOptions(role, props)
	if err != nil {
		return nil, err
	}
	if v := props["client.id"]; v != "" {
		name = v + "|" + name
	}
	return append(append(roleDefaults(role, props), conn...), kgo.ClientID(name)), nil
}

// New builds a client as Build says, with extra options last. It also
// returns Build's options (without extra), for short-lived readers of the
// same cluster.
func New(name string, role Role, props map[string]string, extra ...kgo.Opt) (*kgo.Client, []kgo.Opt, error) {
	opts, err := Build(name, role, props)
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), extra...)...)
	if err != nil {
		return nil, nil, err
	}
	return cl, opts, nil
}

// MaxDecompressedBatchBytes bounds what one fetched batch may decompress
// to (franz-go's default is 1 GiB): a batch crafted to decompress to
// gigabytes (a zstd bomb) stops its partition instead of the process.
const MaxDecompressedBatchBytes = 128 << 20

// roleDefaults are kmirror's own defaults, which the Java properties of the
// role override. A replicator's memory is mostly fetched data, so fetches are
// smaller than Java's 50 MiB unless fetch.max.bytes says otherwise; a
// partition may fill half of one (see DefaultPartitionFetchMaxBytes).
//
// Metadata may be asked for again after half a second instead of franz-go's
// five: remote topics are created by the flow itself and the data paths
// must see them at once.
func roleDefaults(role Role, props map[string]string) []kgo.Opt {
	opts := []kgo.Opt{kgo.MetadataMinAge(500 * time.Millisecond)}
	if role == Consumer {
		opts = append(opts, kgo.MaxDecompressBatchBytes(MaxDecompressedBatchBytes))
		if _, ok := props["fetch.max.bytes"]; !ok {
			opts = append(opts, kgo.FetchMaxBytes(DefaultFetchMaxBytes))
		}
		if _, ok := props["max.partition.fetch.bytes"]; !ok {
			opts = append(opts, kgo.FetchMaxPartitionBytes(DefaultPartitionFetchMaxBytes))
		}
	}
	return opts
}

package testkafka

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// Helpers for fault injection on dedicated clusters (robustness/): which
// node to hit, and where a proxy in front of each node forwards to.

// ProxyTargets maps each address of ProxyBootstrap to the PROXIED listener
// it must forward to. Empty unless the cluster was started with
// Options.Proxied.
func (c *Cluster) ProxyTargets() map[string]string {
	m := map[string]string{}
	for _, n := range c.info.Nodes {
		if n.ProxyPort != 0 {
			m[fmt.Sprintf("127.0.0.1:%d", n.ProxyPort)] = fmt.Sprintf("127.0.0.1:%d", n.ProxiedPort)
		}
	}
	return m
}

// ActiveController returns the node id of the KRaft quorum's leader (the
// active controller), asked with DescribeQuorum through cl, a client of
// this cluster.
func (c *Cluster) ActiveController(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("DescribeQuorum of cluster %s: no partition in the answer", c.Name)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return -1, err
	}
	return p.LeaderID, nil
}

// Leader returns the node id leading partition p of topic, asked without
// the client's metadata cache; -1 while it has none.
func (c *Cluster) Leader(ctx context.Context, cl *kgo.Client, topic string, p int32) (int32, error) {
	md, err := directMetadata(ctx, cl, topic)
	if err != nil {
		return -1, err
	}
	for _, t := range md.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, err
		}
		for _, mp := range t.Partitions {
			if mp.Partition == p {
				return mp.Leader, nil
			}
		}
	}
	return -1, fmt.Errorf("cluster %s: no partition %d of %s in the metadata", c.Name, p, topic)
}

// FreeAddr returns a 127.0.0.1 address free now for a process the test
// starts later (a REST or metrics listener), from kafkalocal.FreePorts:
// outside the ephemeral range, so no outgoing connection takes it first.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ports, err := kafkalocal.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
}

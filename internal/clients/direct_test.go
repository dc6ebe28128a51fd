package clients

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadata: the first answer comes through the client (which knows no
// broker yet), the next ones straight from a broker; both list the topic.
func TestMetadata(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	for _, known := range []int{0, 2, 2} {
		if n := len(cl.DiscoveredBrokers()); n != known {
			t.Errorf("client knows %d brokers, want %d", n, known)
		}
		resp, err := Metadata(ctx, cl, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 || len(resp.Brokers) != 2 {
			t.Errorf("answer lists %d topics, %d brokers; want t with 3 partitions, 2 brokers", len(resp.Topics), len(resp.Brokers))
		}
	}
}

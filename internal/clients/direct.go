package clients

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata sends req straight to one broker cl knows and returns the
// answer. Sent through the client itself (Request, kadm), a metadata
// answer is also copied into the client's cache, partition by partition,
// which for thousands of partitions costs as much again as reading it;
// periodic readers that keep what they need themselves send it here.
// Before cl knows a broker, or when that broker fails, it goes through
// cl. The client learns nothing from an answer sent straight (new
// brokers, say): whoever then fails to reach a broker asks through the
// client.
func Metadata(ctx context.Context, cl *kgo.Client, req *kmsg.MetadataRequest) (*kmsg.MetadataResponse, error) {
	if bs := cl.DiscoveredBrokers(); len(bs) > 0 {
		resp, err := req.RequestWith(ctx, bs[0])
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
	}
	return req.RequestWith(ctx, cl)
}

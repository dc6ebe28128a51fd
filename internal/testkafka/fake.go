package testkafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fake starts an in-process kfake cluster (one broker unless opts say
// otherwise) and a client of it that produces to the partitions records
// name, both closed at cleanup. It is for fast unit tests; features are
// also tested on real brokers (Shared, Start).
func Fake(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// FailProduce makes the fake cluster c answer the next n produce requests
// (every one when n < 0) with err for each partition, as a broker that
// refuses the writes (an ACL revoked) does; then it answers as usual.
func FailProduce(c *kfake.Cluster, err *kerr.Error, n int) {
	left := n
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if left == 0 {
			return nil, nil, false
		}
		left--
		if left != 0 {
			c.KeepControl()
		}
		req := kr.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, err.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// ListOffsetsAnswer answers req, for a fake cluster's ControlKey, with the
// error code and offset that each gives each partition asked.
func ListOffsetsAnswer(req *kmsg.ListOffsetsRequest, each func(topic string, partition int32) (code int16, offset int64)) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode, sp.Offset = each(rt.Topic, rp.Partition)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

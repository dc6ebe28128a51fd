package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// batchCodecs fetches the raw record batches of topic partition 0 and
// counts their compression codecs (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func batchCodecs(t *testing.T, c *testkafka.Cluster, topic string) map[int8]int {
	t.Helper()
	cl := c.Client(t)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MaxBytes = 50 << 20
	td, err := c.Admin(t).ListTopics(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = td[topic].ID // newer fetch versions name topics by ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.PartitionMaxBytes = 50 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int8]int{}
	for _, tr := range resp.Topics {
		for _, pr := range tr.Partitions {
			if pr.ErrorCode != 0 {
				t.Fatalf("fetching %s: error code %d", topic, pr.ErrorCode)
			}
			b := pr.RecordBatches
			for len(b) >= 61 {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(b); err != nil {
					break
				}
				out[int8(batch.Attributes&0x07)]++
				b = b[12+int(batch.Length):]
			}
		}
	}
	return out
}

// TestCodecFollowsSource: with no compression.type set for the target
// producer, each record reaches the target compressed with its source
// batch's codec.
func TestCodecFollowsSource(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "codec")
	a.CreateTopic(t, topic, 1, nil)
	for _, codec := range []kgo.CompressionCodec{kgo.ZstdCompression(), kgo.Lz4Compression()} {
		cl := a.Client(t, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := 0; i < 50; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("a value that compresses well, a value that compresses well")})
		}
		if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic))
	p := startKmirror(t, cfg)
	remote := src + "." + topic
	waitFor(t, 60*time.Second, "records", func() bool { return countOrZero(t, b, remote) == 100 })
	p.stop()
	got := batchCodecs(t, b, remote)
	if got[4] == 0 || got[3] == 0 || got[0]+got[1]+got[2] != 0 {
		t.Errorf("target batch codecs %v, want only zstd (4) and lz4 (3) as at the source %v", got, batchCodecs(t, a, topic))
	}
}

package e2e

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestOversizedRecordStopsPartition: a record the target refuses as too
// large stops its partition loudly (topic, partition, offset named); the
// records after it are not skipped onto the target, and other partitions
// go on.
func TestOversizedRecordStopsPartition(t *testing.T) {
	t.Parallel()
	// The engine checks batches against the topic's max.message.bytes
	// before it sends them, forwarded or re-encoded.
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		oversized(t, "the target accepts 20000", reencodeAll)
	})
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		oversized(t, "the target accepts 20000")
	})
}

func oversized(t *testing.T, reason string, extra ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "big")
	a.CreateTopic(t, topic, 2, nil)
	src, dst := alias(t, "src"), alias(t, "dst")
	remote := src + "." + topic
	small := "20000"
	b.CreateTopic(t, remote, 2, map[string]*string{"max.message.bytes": &small})

	cl := a.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		v := []byte("small")
		if i == 5 {
			v = make([]byte, 100000) // random, so no codec shrinks it
			rand.Read(v)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: v}, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("ok")})
	}
	if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Config sync would copy the source's max.message.bytes over the small
	// one set here; this test is about a target that refuses the record.
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{src + "->" + dst + ".topics = " + topic, "sync.topic.configs.enabled = false"}, extra...)...))
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "the stop to be reported", func() bool {
		return strings.Contains(p.log.String(), "partition stopped")
	})
	waitFor(t, 30*time.Second, "partition 1 to be copied", func() bool {
		n := 0
		for _, r := range b.ReadAll(t, remote) {
			if r.Partition == 1 {
				n++
			}
		}
		return n == 10
	})
	p.stop()
	var p0 int
	for _, r := range b.ReadAll(t, remote) {
		if r.Partition == 0 {
			p0++
		}
	}
	if p0 != 5 {
		t.Errorf("target partition 0 holds %d records, want the 5 before the oversized one", p0)
	}
	log := p.log.String()
	for _, want := range []string{"topic=" + topic, "partition=0", "offset=5", reason} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

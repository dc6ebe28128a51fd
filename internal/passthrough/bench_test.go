package passthrough

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchBatch returns a source batch of n records with 1 KiB values of
// text-like (compressible) data, and the payload size in bytes.
func benchBatch(b *testing.B, codec kgo.CompressionCodecType, n int) ([]byte, int) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"kafka", "mirror", "record", "batch", "offset", "partition", "topic", "replica", "leader", "commit"}
	recs := make([]*kgo.Record, n)
	payload := 0
	for i := range recs {
		var v []byte
		for len(v) < 1024 {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
			v = fmt.Appendf(v, "%d ", rng.IntN(100000))
		}
		v = v[:1024]
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: v, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Offset: int64(i)}
		payload += len(v) + len(recs[i].Key)
	}
	return sourceBatch(b, recs, codec, 0, false), payload
}

// BenchmarkForward is the passthrough cost of one batch: check the source
// CRC, copy it out of the fetch buffer, rewrite the producer fields and
// the CRC.
func BenchmarkForward(b *testing.B) {
	for _, codec := range codecs {
		b.Run(codecName(codec), func(b *testing.B) {
			raw, payload := benchBatch(b, codec, 100)
			b.SetBytes(int64(payload))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseHeader(raw); err != nil {
					b.Fatal(err)
				}
				out := append([]byte(nil), raw...)
				if err := stamp(out, 1, 0, 0, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReencode is the record path's cost for the same batch:
// decompress and decode the records, encode and compress them again with
// the same codec, and stamp the result.
func BenchmarkReencode(b *testing.B) {
	dec := kgo.DefaultDecompressor()
	enc := newEncoder(true)
	for _, codec := range codecs {
		b.Run(codecName(codec), func(b *testing.B) {
			raw, payload := benchBatch(b, codec, 100)
			b.SetBytes(int64(payload))
			b.ReportAllocs()
			for b.Loop() {
				recs, err := decode(raw, 0, "t", 0, dec)
				if err != nil {
					b.Fatal(err)
				}
				out, err := enc.batch(recs, codec)
				if err != nil {
					b.Fatal(err)
				}
				if err := stamp(out, 1, 0, 0, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func codecName(c kgo.CompressionCodecType) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// BenchmarkProduceRequestAppend serializes a produce request of 32
// partitions with a 256 KiB batch each into a fresh buffer, as franz-go
// does after a GC emptied its buffer pool: kmsg's plain AppendTo grows the
// buffer by doubling, produceRequest sizes it once.
func BenchmarkProduceRequestAppend(b *testing.B) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	req.SetVersion(9)
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	size := 64 + 32 + len(t.Topic)
	for p := range int32(32) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, make([]byte, 256<<10)
		t.Partitions = append(t.Partitions, rp)
		size += 16 + len(rp.Records)
	}
	req.Topics = append(req.Topics, t)
	for _, tc := range []struct {
		name string
		r    kmsg.Request
	}{
		{"kmsg", req},
		{"presized", &produceRequest{ProduceRequest: req, size: size, queued: func() {}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				_ = tc.r.AppendTo(make([]byte, 0, 4096))
			}
		})
	}
}

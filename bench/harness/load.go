package harness

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// codec maps a workload's compression name to franz-go's codec.
func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown compression %q", name)
}

// letters fills b with random upper-case letters, as ProducerPerformance
// does for its payloads: compressible by entropy coding (zstd), hardly by
// lz4's match finding.
func letters(rng *rand.ChaCha8, b []byte) {
	for i := 0; i < len(b); i += 8 {
		u := rng.Uint64()
		for j := i; j < i+8 && j < len(b); j++ {
			b[j] = 'A' + byte(u%26)
			u >>= 8
		}
	}
}

// vocabulary is 1024 words of 3 to 9 random capital letters, the same in
// every run.
var vocabulary = func() [][]byte {
	rng := rand.NewChaCha8([32]byte{'w', 'o', 'r', 'd', 's'})
	ws := make([][]byte, 1024)
	for i := range ws {
		ws[i] = make([]byte, 3+rng.Uint64()%7)
		letters(rng, ws[i])
	}
	return ws
}()

// words fills b with random words of the vocabulary separated by spaces:
// text that lz4 compresses to about half.
func words(rng *rand.ChaCha8, b []byte) {
	b = b[:0:len(b)]
	for len(b) < cap(b) {
		w := vocabulary[rng.Uint64()%uint64(len(vocabulary))]
		n := min(len(w), cap(b)-len(b))
		b = append(b, w[:n]...)
		if len(b) < cap(b) {
			b = append(b, ' ')
		}
	}
}

// Load creates the source topics of w on bootstrap and writes n records
// to them, spread evenly over the topics, with linger 20 ms and 256 KiB
// batches compressed with w's codec. It checks that the topics' end offsets
// add up to n.
func Load(ctx context.Context, bootstrap string, w Workload, n int64, log io.Writer) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := w.TopicNames()
	resp, err := adm.CreateTopics(ctx, w.Partitions, 1, nil, topics...)
	if err != nil {
		return err
	}
	if err := resp.Error(); err != nil {
		return err
	}
	cc, err := codec(w.Compression)
	if err != nil {
		return err
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.ProducerBatchCompression(cc),
		kgo.ProducerLinger(20*time.Millisecond),
		kgo.ProducerBatchMaxBytes(256<<10),
		kgo.MaxBufferedRecords(1<<17),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	rng := rand.NewChaCha8([32]byte{'k', 'b', 'e', 'n', 'c', 'h'})
	var failed atomic.Int64
	var firstErr atomic.Value
	done := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	for i := range n {
		r := &kgo.Record{Topic: topics[int(i)%len(topics)], Value: make([]byte, w.ValueBytes)}
		if w.Text {
			words(rng, r.Value)
		} else {
			letters(rng, r.Value)
		}
		if w.KeyBytes > 0 {
			r.Key = make([]byte, w.KeyBytes)
			letters(rng, r.Key)
		}
		for h := range w.Headers {
			shape := headerShapes[h%len(headerShapes)]
			v := make([]byte, shape.value)
			switch shape.key {
			case "content-type":
				copy(v, "application/json")
			case "seq":
				copy(v, fmt.Sprintf("%08d", i%100_000_000))
			default:
				letters(rng, v)
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: shape.key, Value: v})
		}
		p.Produce(ctx, r, done)
		if failed.Load() > 0 {
			break
		}
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	if failed.Load() > 0 {
		return fmt.Errorf("load %s: %d records failed: %v", w.Name, failed.Load(), firstErr.Load())
	}
	got, err := endOffsetSum(ctx, adm, topics)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("load %s: topics hold %d records, want %d", w.Name, got, n)
	}
	el := time.Since(start)
	fmt.Fprintf(log, "kbench: loaded %s: %d records (%.0f MB) in %v, %.0f records/s\n", w.DataName(), n,
		float64(n)*float64(w.RecordBytes())/1e6, el.Round(time.Millisecond), float64(n)/el.Seconds())
	return nil
}

// endOffsetSum adds the end offsets of every partition of topics. Topics
// that do not exist yet count as empty.
func endOffsetSum(ctx context.Context, adm *kadm.Client, topics []string) (int64, error) {
	offs, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, err
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			sum += o.Offset
		}
	})
	return sum, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

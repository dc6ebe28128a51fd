package harness

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
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

// codecCount counts the batches the loader's producer wrote, by the codec
// they were written with: franz-go writes a batch uncompressed when the
// codec does not make it smaller.
type codecCount struct {
	mu sync.Mutex
	n  map[uint8]int64
}

func (c *codecCount) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[m.CompressionType]++
}

// String is e.g. "lz4 100 %" or "none 100 % (asked for lz4)".
func (c *codecCount) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := map[uint8]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
	var total int64
	for _, v := range c.n {
		total += v
	}
	var parts []string
	for k := range uint8(5) {
		if v := c.n[k]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f %%", names[k], 100*float64(v)/float64(total)))
		}
	}
	return strings.Join(parts, ", ")
}

// Load creates the source topics of w on bootstrap and writes n records
// to them, spread evenly over the topics, with linger 20 ms and 256 KiB
// batches compressed with w's codec. It checks that the topics' end offsets
// add up to n, and returns how the batches were written (codecs).
func Load(ctx context.Context, bootstrap string, w Workload, n int64, log io.Writer) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := w.TopicNames()
	resp, err := adm.CreateTopics(ctx, w.Partitions, 1, nil, topics...)
	if err != nil {
		return "", err
	}
	if err := resp.Error(); err != nil {
		return "", err
	}
	cc, err := codec(w.Compression)
	if err != nil {
		return "", err
	}
	codecs := &codecCount{n: map[uint8]int64{}}
	p, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.WithHooks(codecs),
		kgo.ProducerBatchCompression(cc),
		kgo.ProducerLinger(20*time.Millisecond),
		kgo.ProducerBatchMaxBytes(256<<10),
		kgo.MaxBufferedRecords(1<<17),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return "", err
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
		return "", err
	}
	if failed.Load() > 0 {
		return "", fmt.Errorf("load %s: %d records failed: %v", w.Name, failed.Load(), firstErr.Load())
	}
	got, err := endOffsetSum(ctx, adm, topics)
	if err != nil {
		return "", err
	}
	if got != n {
		return "", fmt.Errorf("load %s: topics hold %d records, want %d", w.Name, got, n)
	}
	el := time.Since(start)
	fmt.Fprintf(log, "kbench: loaded %s: %d records (%.0f MB) in %v, %.0f records/s; batches written: %s\n", w.DataName(), n,
		float64(n)*float64(w.RecordBytes())/1e6, el.Round(time.Millisecond), float64(n)/el.Seconds(), codecs)
	return codecs.String(), nil
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

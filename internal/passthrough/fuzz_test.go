package passthrough

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// FuzzSplit feeds split (and through it checkEntry, parseHeader, the
// read_committed filter, decode and the re-encoder) the record bytes of a
// fetched partition as a broker could send them: v2 batches, v0/v1
// message sets, or anything. It must never panic, never move the position
// back, and every batch it hands on must be a readable v2 batch.
func FuzzSplit(f *testing.F) {
	recs := testRecords(3, 10, 30)
	f.Add(sourceBatch(f, recs, kgo.CodecNone, 10, false), int64(10), false)
	f.Add(sourceBatch(f, recs, kgo.CodecZstd, 10, false), int64(11), true)
	f.Add(sourceBatch(f, recs, kgo.CodecGzip, 10, true), int64(10), false)
	f.Add(append(messageV1(23, "a", "one", 1_600_000_000_000), messageV1(24, "b", "two", 1_600_000_000_001)...), int64(23), false)
	f.Add(legacyEntry(7, 17, 0), int64(7), false)
	f.Add(legacyEntry(7, legacyMinV0, 0), int64(0), false)
	f.Fuzz(func(t *testing.T, in []byte, from int64, origin bool) {
		pl := New(Config{SourceAlias: "A", TargetAlias: "B", AddOrigin: origin, Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = in
		rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 1, FirstOffset: from}}
		items, next, _ := pl.split(p, fetchAsk{p: p, offset: from, maxBytes: defaultMaxMessageBytes}, &rp)
		if next < from {
			t.Fatalf("next fetch at %d, before %d", next, from)
		}
		for i, it := range items {
			if it.batch == nil {
				continue
			}
			if _, err := parseHeader(it.batch.raw); err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
		}
	})
}

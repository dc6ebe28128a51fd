package passthrough

import (
	"context"
	"encoding/binary"
	"hash/crc32"
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
// back, and every batch it hands on must be a readable v2 batch. With
// fixCRC the CRC of every complete entry is made to match first, so that
// the fuzzer reaches what lies behind the check: the decoding of records
// (compressed or not) and their re-encoding.
func FuzzSplit(f *testing.F) {
	recs := testRecords(3, 10, 30)
	f.Add(sourceBatch(f, recs, kgo.CodecNone, 10, false), int64(10), false, false)
	f.Add(sourceBatch(f, recs, kgo.CodecZstd, 10, false), int64(11), true, true)
	f.Add(sourceBatch(f, recs, kgo.CodecGzip, 10, true), int64(10), false, true)
	f.Add(sourceBatch(f, recs, kgo.CodecLz4, 10, false), int64(10), false, true)
	f.Add(sourceBatch(f, recs, kgo.CodecSnappy, 10, false), int64(12), true, true)
	f.Add(append(messageV1(23, "a", "one", 1_600_000_000_000), messageV1(24, "b", "two", 1_600_000_000_001)...), int64(23), false, true)
	f.Add(legacyEntry(7, 17, 0), int64(7), false, false)
	f.Add(legacyEntry(7, legacyMinV0, 0), int64(0), false, true)
	// Made once: a Pipeline's encoders are costly to make.
	var pls [2]*Pipeline
	for i := range pls {
		pls[i] = New(Config{SourceAlias: "A", TargetAlias: "B", AddOrigin: i == 1, Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	f.Fuzz(func(t *testing.T, in []byte, from int64, origin, fixCRC bool) {
		if fixCRC {
			in = withFixedCRCs(in)
		}
		pl := pls[0]
		if origin {
			pl = pls[1]
		}
		p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = in
		rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 1, FirstOffset: from}}
		items, next, _ := pl.split(context.Background(), p, fetchAsk{p: p, offset: from, maxBytes: defaultMaxMessageBytes}, &rp)
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

// withFixedCRCs returns a copy of in in which every complete entry's CRC
// matches its bytes (CRC-32C for v2 batches, CRC-32 for v0/v1 messages).
func withFixedCRCs(in []byte) []byte {
	out := append([]byte(nil), in...)
	for rest := out; ; {
		raw, next, ok := nextBatch(rest)
		if !ok {
			return out
		}
		switch magic(raw) {
		case 0, 1:
			binary.BigEndian.PutUint32(raw[legacyCRCAt:], crc32.ChecksumIEEE(raw[magicAt:]))
		case 2:
			if len(raw) >= headerSize {
				binary.BigEndian.PutUint32(raw[crcAt:], crc32.Checksum(raw[attrsAt:], castagnoli))
			}
		}
		rest = next
	}
}

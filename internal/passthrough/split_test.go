package passthrough

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// messageV1 encodes a legacy (magic 1) uncompressed message at offset.
func messageV1(offset int64, key, value string, ts int64) []byte {
	m := kmsg.MessageV1{Offset: offset, Magic: 1, Timestamp: ts, Key: []byte(key), Value: []byte(value)}
	raw := m.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[12:], crc32.ChecksumIEEE(raw[16:]))
	return raw
}

// withAttrs returns a copy of a v2 batch with extra attribute bits and a
// fixed CRC.
func withAttrs(t *testing.T, raw []byte, bits int16, pid int64) []byte {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	b.Attributes |= bits
	b.ProducerID = pid
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[crcAt:], crc32.Checksum(out[attrsAt:], castagnoli))
	return out
}

// TestSplit runs the fetch side of the pipeline on crafted fetch responses:
// which batches are forwarded as they are, which are re-encoded, which
// skipped, and where the next fetch starts.
func TestSplit(t *testing.T) {
	lz4 := sourceBatch(t, testRecords(5, 10, 30), kgo.CodecLz4, 10, false)
	zstd := sourceBatch(t, testRecords(3, 15, 30), kgo.CodecZstd, 15, false)
	txn := withAttrs(t, sourceBatch(t, testRecords(2, 18, 30), kgo.CodecSnappy, 18, false), attrTransactional, 5)
	abortMarker := func(off int64) []byte {
		h := hdr{pid: 5, first: off, last: off, marker: "abort"}
		b := h.batch(t)
		b.Magic = 2
		b.Length = int32(headerSize - lengthExtra + len(b.Records))
		out := b.AppendTo(nil)
		binary.BigEndian.PutUint32(out[crcAt:], crc32.Checksum(out[attrsAt:], castagnoli))
		return out
	}
	logAppend := withAttrs(t, sourceBatch(t, testRecords(2, 21, 30), kgo.CodecGzip, 21, false), attrLogAppendTime, -1)
	legacy := append(messageV1(23, "a", "one", 1_600_000_000_000), messageV1(24, "b", "two", 1_600_000_000_001)...)
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	type want struct {
		forward bool  // as it is, else re-encoded
		first   int64 // first source offset of the batch, or skip offset
		skip    bool
		count   int32
	}
	for _, tc := range []struct {
		name    string
		from    int64
		in      []byte
		aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
		origin  bool
		want    []want
		next    int64
	}{
		{
			name: "forwarded as they are",
			from: 10, in: cat(lz4, zstd),
			want: []want{{forward: true, first: 10, count: 5}, {forward: true, first: 15, count: 3}},
			next: 18,
		},
		{
			name: "resume inside a batch re-encodes its tail",
			from: 12, in: cat(lz4, zstd),
			want: []want{{first: 12, count: 3}, {skip: true, first: 14}, {forward: true, first: 15, count: 3}},
			next: 18,
		},
		{
			name: "batches below the position are dropped",
			from: 15, in: cat(lz4, zstd),
			want: []want{{forward: true, first: 15, count: 3}},
			next: 18,
		},
		{
			name: "partial batch at the end waits for the next fetch",
			from: 10, in: cat(lz4, zstd[:len(zstd)-5]),
			want: []want{{forward: true, first: 10, count: 5}},
			next: 15,
		},
		{
			name: "aborted transaction and its marker are skipped",
			from: 15, in: cat(zstd, txn, abortMarker(20)),
			aborted: []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 18}},
			want:    []want{{forward: true, first: 15, count: 3}, {skip: true, first: 19}, {skip: true, first: 20}},
			next:    21,
		},
		{
			name: "committed transactional batch is forwarded",
			from: 18, in: cat(txn),
			want: []want{{forward: true, first: 18, count: 2}},
			next: 20,
		},
		{
			name: "LogAppendTime and legacy messages are re-encoded",
			from: 21, in: cat(logAppend, legacy),
			want: []want{{first: 21, count: 2}, {skip: true, first: 22}, {first: 23, count: 1}, {skip: true, first: 23}, {first: 24, count: 1}, {skip: true, first: 24}},
			next: 25,
		},
		{
			name: "provenance forces re-encoding",
			from: 10, in: cat(lz4), origin: true,
			want: []want{{first: 10, count: 5}, {skip: true, first: 14}},
			next: 15,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(Config{SourceAlias: "A", TargetAlias: "B", AddOrigin: tc.origin, Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches, rp.AbortedTransactions = tc.in, tc.aborted
			items, next, bad := pl.split(p, fetchAsk{p: p, offset: tc.from, maxBytes: defaultMaxMessageBytes}, &rp)
			if bad != nil {
				t.Fatalf("split: %v", bad)
			}
			if next != tc.next {
				t.Errorf("next fetch at %d, want %d", next, tc.next)
			}
			if len(items) != len(tc.want) {
				t.Fatalf("%d items, want %d: %+v", len(items), len(tc.want), items)
			}
			for i, w := range tc.want {
				it := items[i]
				if it.stop != nil {
					t.Fatalf("item %d: stop %v", i, it.stop)
				}
				if w.skip {
					if it.batch != nil || it.skip != w.first {
						t.Errorf("item %d: %+v, want a skip to %d", i, it, w.first)
					}
					continue
				}
				b := it.batch
				if b == nil {
					t.Fatalf("item %d: skip to %d, want a batch", i, it.skip)
				}
				if (b.offsets == nil) != w.forward || b.first != w.first || b.count != w.count {
					t.Errorf("item %d: forwarded %v, first %d, count %d; want %v, %d, %d", i, b.offsets == nil, b.first, b.count, w.forward, w.first, w.count)
				}
				recs, err := decode(b.raw, 0, "t", 0, kgo.DefaultDecompressor())
				if err != nil || len(recs) != int(b.count) {
					t.Fatalf("item %d: decoded %d records (%v), want %d", i, len(recs), err, b.count)
				}
				for _, r := range recs {
					if v, ok := datapath.Origin(r.Headers); ok != tc.origin || (ok && v != "A") {
						t.Errorf("item %d: origin header %q present %v, want present %v", i, v, ok, tc.origin)
					}
					if r.Attrs.TimestampType() != 0 {
						t.Errorf("item %d: timestamp type %d, want CreateTime", i, r.Attrs.TimestampType())
					}
				}
			}
		})
	}
}

// TestSplitSkipsLoopedRecords drops records whose origin is the target.
func TestSplitSkipsLoopedRecords(t *testing.T) {
	recs := testRecords(4, 0, 10)
	recs[1].Headers = append(recs[1].Headers, kgo.RecordHeader{Key: datapath.OriginHeader, Value: []byte("B")})
	recs[3].Headers = []kgo.RecordHeader{{Key: datapath.OriginHeader, Value: []byte("B")}}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", AddOrigin: true, Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = sourceBatch(t, recs, kgo.CodecNone, 0, false)
	items, next, bad := pl.split(p, fetchAsk{p: p, offset: 0, maxBytes: defaultMaxMessageBytes}, &rp)
	if bad != nil {
		t.Fatalf("split: %v", bad)
	}
	if next != 4 || len(items) != 2 || items[0].batch == nil || items[1].skip != 3 {
		t.Fatalf("next %d, items %+v; want one batch then a skip to 3", next, items)
	}
	if got := items[0].batch.offsets; len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("source offsets %v, want [0 2]", got)
	}
}

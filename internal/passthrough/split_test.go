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
		codec   kgo.CompressionCodecType // of the batch sent; checked when forward is false
	}
	for _, tc := range []struct {
		name    string
		from    int64
		in      []byte
		aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
		origin  bool
		all     bool   // Config.ReencodeAll
		codec   string // Config.Codec
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
			want: []want{{first: 12, count: 3, codec: kgo.CodecLz4}, {skip: true, first: 14}, {forward: true, first: 15, count: 3}},
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
			want: []want{{first: 21, count: 2, codec: kgo.CodecGzip}, {skip: true, first: 22}, {first: 23, count: 1}, {skip: true, first: 23}, {first: 24, count: 1}, {skip: true, first: 24}},
			next: 25,
		},
		{
			name: "provenance forces re-encoding",
			from: 10, in: cat(lz4), origin: true,
			want: []want{{first: 10, count: 5, codec: kgo.CodecLz4}, {skip: true, first: 14}},
			next: 15,
		},
		{
			name: "re-encode mode re-encodes every batch with its own codec",
			from: 10, in: cat(lz4, zstd, txn), all: true,
			want: []want{{first: 10, count: 5, codec: kgo.CodecLz4}, {skip: true, first: 14},
				{first: 15, count: 3, codec: kgo.CodecZstd}, {skip: true, first: 17},
				{first: 18, count: 2, codec: kgo.CodecSnappy}, {skip: true, first: 19}},
			next: 20,
		},
		{
			name: "re-encode mode still skips aborted data and markers",
			from: 15, in: cat(zstd, txn, abortMarker(20)), all: true,
			aborted: []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 18}},
			want:    []want{{first: 15, count: 3, codec: kgo.CodecZstd}, {skip: true, first: 17}, {skip: true, first: 19}, {skip: true, first: 20}},
			next:    21,
		},
		{
			name: "target codec: batches of another codec are re-encoded with it",
			from: 10, in: cat(lz4, zstd), codec: "zstd",
			want: []want{{first: 10, count: 5, codec: kgo.CodecZstd}, {skip: true, first: 14}, {forward: true, first: 15, count: 3}},
			next: 18,
		},
		{
			name: "target codec none decompresses",
			from: 10, in: cat(lz4), codec: "none",
			want: []want{{first: 10, count: 5, codec: kgo.CodecNone}, {skip: true, first: 14}},
			next: 15,
		},
		{
			name: "target codec with the provenance header",
			from: 15, in: cat(zstd), codec: "gzip", origin: true,
			want: []want{{first: 15, count: 3, codec: kgo.CodecGzip}, {skip: true, first: 17}},
			next: 18,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(Config{SourceAlias: "A", TargetAlias: "B", AddOrigin: tc.origin, ReencodeAll: tc.all, Codec: tc.codec,
				Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches, rp.AbortedTransactions = tc.in, tc.aborted
			items, next, bad := pl.split(context.Background(), p, fetchAsk{p: p, offset: tc.from, maxBytes: defaultMaxMessageBytes}, &rp)
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
				if codec := kgo.CompressionCodecType(b.raw[attrsAt+1] & attrCodec); !w.forward && codec != w.codec {
					t.Errorf("item %d: codec %d, want %d", i, codec, w.codec)
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
	items, next, bad := pl.split(context.Background(), p, fetchAsk{p: p, offset: 0, maxBytes: defaultMaxMessageBytes}, &rp)
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

// TestReencodeKeepsRecords re-encodes a batch of every source codec in
// each re-encoding mode of the engine and checks that keys, values,
// tombstones, headers and timestamps reach the target batch unchanged
// (the provenance header added last where the flow writes it), with the
// source offsets and the codec the mode asks for.
func TestReencodeKeepsRecords(t *testing.T) {
	for _, mode := range []struct {
		name   string
		all    bool
		codec  string
		origin bool
	}{
		{name: "all batches", all: true},
		{name: "target codec zstd", codec: "zstd"},
		{name: "target codec none", codec: "none"},
		{name: "provenance header", origin: true},
	} {
		for _, src := range codecs {
			t.Run(mode.name+"/"+codecName(src), func(t *testing.T) {
				want := testRecords(9, 100, 50)
				pl := New(Config{SourceAlias: "A", TargetAlias: "B", AddOrigin: mode.origin, ReencodeAll: mode.all, Codec: mode.codec,
					Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
				p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.RecordBatches = sourceBatch(t, want, src, 100, false)
				items, next, bad := pl.split(context.Background(), p, fetchAsk{p: p, offset: 100, maxBytes: defaultMaxMessageBytes}, &rp)
				if bad != nil || next != 109 {
					t.Fatalf("split: next %d, %v", next, bad)
				}
				wantCodec := src
				if c, ok := ParseCodec(mode.codec); ok {
					wantCodec = c
				}
				forward := !mode.all && !mode.origin && wantCodec == src
				if len(items) == 0 || items[0].batch == nil {
					t.Fatalf("items %+v, want a batch first", items)
				}
				b := items[0].batch
				if (b.offsets == nil) != forward {
					t.Fatalf("forwarded %v, want %v", b.offsets == nil, forward)
				}
				if codec := kgo.CompressionCodecType(b.raw[attrsAt+1] & attrCodec); codec != wantCodec {
					t.Errorf("codec %d, want %d", codec, wantCodec)
				}
				var hb kmsg.RecordBatch
				if err := hb.ReadFrom(b.raw); err != nil || hb.Attributes&attrLogAppendTime != 0 {
					t.Fatalf("batch header %+v (%v): want CreateTime", hb, err)
				}
				got, err := decode(b.raw, 0, "t", 0, kgo.DefaultDecompressor())
				if err != nil {
					t.Fatal(err)
				}
				if mode.origin {
					for i, r := range got {
						last := r.Headers[len(r.Headers)-1]
						if last.Key != datapath.OriginHeader || string(last.Value) != "A" {
							t.Fatalf("record %d: last header %v, want the provenance header", i, last)
						}
						r.Headers = r.Headers[:len(r.Headers)-1]
						if len(r.Headers) == 0 && want[i].Headers == nil {
							r.Headers = nil
						}
					}
				}
				base := int64(0) // re-encoded batches start at 0, forwarded ones keep theirs until stamped
				if forward {
					base = 100
				}
				sameTestRecords(t, want, got, base)
				if !forward && (len(b.offsets) != 9 || b.offsets[0] != 100 || b.offsets[8] != 108) {
					t.Errorf("source offsets %v, want 100..108", b.offsets)
				}
			})
		}
	}
}

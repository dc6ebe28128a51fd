package passthrough

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []kgo.CompressionCodecType{kgo.CodecNone, kgo.CodecGzip, kgo.CodecSnappy, kgo.CodecLz4, kgo.CodecZstd}

// testRecords returns n records with keys, headers, tombstones and
// timestamps, at offsets from base on.
func testRecords(n int, base int64, valueSize int) []*kgo.Record {
	t0 := time.UnixMilli(1_600_000_000_000)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := bytes.Repeat(fmt.Appendf(nil, "value %d ", i), valueSize/8+1)[:valueSize]
		r := &kgo.Record{
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     v,
			Timestamp: t0.Add(time.Duration(i%5) * time.Millisecond), // not monotonic
			Offset:    base + int64(i),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}},
		}
		switch i % 4 {
		case 1:
			r.Value = nil
		case 2:
			r.Key, r.Headers = nil, nil
		}
		recs[i] = r
	}
	return recs
}

// sourceBatch encodes recs the way a source producer would: a batch with
// producer fields, optionally transactional, at base offset base.
func sourceBatch(t testing.TB, recs []*kgo.Record, codec kgo.CompressionCodecType, base int64, txn bool) []byte {
	t.Helper()
	raw, err := newEncoder(true).batch(recs, codec)
	if err != nil {
		t.Fatal(err)
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	b.FirstOffset, b.PartitionLeaderEpoch = base, 7
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = 4242, 3, 900
	if txn {
		b.Attributes |= attrTransactional
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[crcAt:], crc32.Checksum(out[attrsAt:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func TestStampRewritesHeaderAndCRC(t *testing.T) {
	for _, codec := range codecs {
		for _, tc := range []struct{ txn, out bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			txn := tc.txn
			t.Run(fmt.Sprintf("codec%d/txn=%v/out=%v", codec, txn, tc.out), func(t *testing.T) {
				recs := testRecords(20, 1000, 50)
				raw := sourceBatch(t, recs, codec, 1000, txn)
				before, err := parseHeader(raw)
				if err != nil {
					t.Fatal(err)
				}
				payload := append([]byte(nil), before.Records...)

				if err := stamp(raw, 77, 2, 12345, tc.out); err != nil {
					t.Fatal(err)
				}
				var after kmsg.RecordBatch
				if err := after.ReadFrom(raw); err != nil {
					t.Fatal(err)
				}
				if got := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); got != uint32(after.CRC) {
					t.Fatalf("CRC field %08x, CRC-32C of the batch %08x", uint32(after.CRC), got)
				}
				if after.ProducerID != 77 || after.ProducerEpoch != 2 || after.FirstSequence != 12345 {
					t.Errorf("producer fields %d/%d/%d, want 77/2/12345", after.ProducerID, after.ProducerEpoch, after.FirstSequence)
				}
				if after.FirstOffset != 0 || after.PartitionLeaderEpoch != -1 {
					t.Errorf("base offset %d, leader epoch %d; want 0 and -1", after.FirstOffset, after.PartitionLeaderEpoch)
				}
				want := before.Attributes &^ attrTransactional
				if tc.out {
					want |= attrTransactional
				}
				if after.Attributes != want {
					t.Errorf("attributes %#x, want %#x", after.Attributes, want)
				}
				if after.Attributes&attrCodec != int16(codec) {
					t.Errorf("codec %d, want %d", after.Attributes&attrCodec, codec)
				}
				if after.Length != before.Length || after.LastOffsetDelta != before.LastOffsetDelta || after.NumRecords != before.NumRecords ||
					after.FirstTimestamp != before.FirstTimestamp || after.MaxTimestamp != before.MaxTimestamp {
					t.Errorf("untouched fields changed: before %+v after %+v", before, after)
				}
				if !bytes.Equal(after.Records, payload) {
					t.Error("record bytes changed")
				}
				got, err := decode(raw, 0, "t", 0, kgo.DefaultDecompressor())
				if err != nil {
					t.Fatal(err)
				}
				sameTestRecords(t, recs, got, 0)
			})
		}
	}
}

// sameTestRecords compares decoded records with what was encoded; offsets
// of got start at base.
func sameTestRecords(t *testing.T, want, got []*kgo.Record, base int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
			!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			!g.Timestamp.Equal(w.Timestamp) || len(g.Headers) != len(w.Headers) || g.Offset != base+int64(i) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) ||
				(g.Headers[j].Value == nil) != (w.Headers[j].Value == nil) {
				t.Fatalf("record %d header %d: got %v, want %v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

func TestParseHeaderRejectsCorruption(t *testing.T) {
	raw := sourceBatch(t, testRecords(5, 0, 20), kgo.CodecLz4, 0, false)
	if _, err := parseHeader(raw); err != nil {
		t.Fatalf("intact batch: %v", err)
	}
	raw[len(raw)-3] ^= 0x40
	if _, err := parseHeader(raw); !errors.Is(err, errCorrupt) {
		t.Fatalf("flipped bit: got %v, want %v", err, errCorrupt)
	}
}

func TestNextBatch(t *testing.T) {
	a := sourceBatch(t, testRecords(3, 0, 10), kgo.CodecNone, 0, false)
	b := sourceBatch(t, testRecords(4, 3, 10), kgo.CodecSnappy, 3, false)
	in := append(append([]byte(nil), a...), b...)
	for _, tc := range []struct {
		name string
		in   []byte
		want int
	}{
		{"two complete", in, 2},
		{"second truncated", in[:len(in)-1], 1},
		{"only a length", in[:12], 0},
		{"empty", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for rest := tc.in; ; n++ {
				_, r, ok := nextBatch(rest)
				if !ok {
					break
				}
				rest = r
			}
			if n != tc.want {
				t.Errorf("%d batches, want %d", n, tc.want)
			}
		})
	}
}

func TestForwardable(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    kmsg.RecordBatch
		want bool
	}{
		{"plain", kmsg.RecordBatch{NumRecords: 5, LastOffsetDelta: 4}, true},
		{"compressed transactional", kmsg.RecordBatch{Attributes: 4 | attrTransactional, NumRecords: 1, LastOffsetDelta: 0}, true},
		{"log append time", kmsg.RecordBatch{Attributes: attrLogAppendTime, NumRecords: 5, LastOffsetDelta: 4}, false},
		{"compacted hole", kmsg.RecordBatch{NumRecords: 3, LastOffsetDelta: 4}, false},
	} {
		if got := forwardable(&tc.b); got != tc.want {
			t.Errorf("%s: forwardable %v, want %v", tc.name, got, tc.want)
		}
	}
}

// hdr describes a batch for the abort filter tests.
type hdr struct {
	pid         int64
	first, last int64
	txn         bool
	marker      string // "abort" or "commit": a control batch
}

func (h hdr) batch(t *testing.T) kmsg.RecordBatch {
	b := kmsg.RecordBatch{FirstOffset: h.first, LastOffsetDelta: int32(h.last - h.first), ProducerID: h.pid, NumRecords: int32(h.last - h.first + 1)}
	if h.txn {
		b.Attributes |= attrTransactional
	}
	if h.marker != "" {
		b.Attributes |= attrControl | attrTransactional
		typ := kmsg.ControlRecordKeyTypeCommit
		if h.marker == "abort" {
			typ = kmsg.ControlRecordKeyTypeAbort
		}
		key := (&kmsg.ControlRecordKey{Type: typ}).AppendTo(nil)
		r := kmsg.Record{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}}
		body := r.AppendTo(nil)[1:]
		b.Records = append(binary.AppendVarint(nil, int64(len(body))), body...)
		b.NumRecords = 1
	}
	return b
}

func TestAbortFilter(t *testing.T) {
	type abort = kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, tc := range []struct {
		name    string
		aborted []abort
		batches []hdr
		skip    []bool
	}{
		{
			name:    "no transactions",
			batches: []hdr{{pid: -1, first: 0, last: 4}, {pid: 9, first: 5, last: 9}},
			skip:    []bool{false, false},
		},
		{
			name:    "committed transaction: only the marker goes",
			batches: []hdr{{pid: 1, first: 0, last: 2, txn: true}, {pid: 1, first: 3, last: 3, marker: "commit"}},
			skip:    []bool{false, true},
		},
		{
			name:    "aborted transaction",
			aborted: []abort{{ProducerID: 1, FirstOffset: 0}},
			batches: []hdr{{pid: 1, first: 0, last: 2, txn: true}, {pid: 1, first: 3, last: 4, txn: true}, {pid: 1, first: 5, last: 5, marker: "abort"}},
			skip:    []bool{true, true, true},
		},
		{
			name:    "aborted then committed by the same producer",
			aborted: []abort{{ProducerID: 1, FirstOffset: 0}},
			batches: []hdr{{pid: 1, first: 0, last: 1, txn: true}, {pid: 1, first: 2, last: 2, marker: "abort"}, {pid: 1, first: 3, last: 4, txn: true}, {pid: 1, first: 5, last: 5, marker: "commit"}},
			skip:    []bool{true, true, false, true},
		},
		{
			name:    "committed then aborted by the same producer",
			aborted: []abort{{ProducerID: 1, FirstOffset: 3}},
			batches: []hdr{{pid: 1, first: 0, last: 1, txn: true}, {pid: 1, first: 2, last: 2, marker: "commit"}, {pid: 1, first: 3, last: 4, txn: true}, {pid: 1, first: 5, last: 5, marker: "abort"}},
			skip:    []bool{false, true, true, true},
		},
		{
			name:    "interleaved producers, one aborts",
			aborted: []abort{{ProducerID: 2, FirstOffset: 1}},
			batches: []hdr{{pid: 1, first: 0, last: 0, txn: true}, {pid: 2, first: 1, last: 1, txn: true}, {pid: 1, first: 2, last: 2, txn: true}, {pid: 2, first: 3, last: 3, txn: true}, {pid: 2, first: 4, last: 4, marker: "abort"}, {pid: 1, first: 5, last: 5, marker: "commit"}},
			skip:    []bool{false, true, false, true, true, true},
		},
		{
			name:    "aborted list out of order",
			aborted: []abort{{ProducerID: 1, FirstOffset: 6}, {ProducerID: 1, FirstOffset: 0}},
			batches: []hdr{{pid: 1, first: 0, last: 1, txn: true}, {pid: 1, first: 2, last: 2, marker: "abort"}, {pid: 1, first: 3, last: 4, txn: true}, {pid: 1, first: 5, last: 5, marker: "commit"}, {pid: 1, first: 6, last: 7, txn: true}, {pid: 1, first: 8, last: 8, marker: "abort"}},
			skip:    []bool{true, true, false, true, true, true},
		},
		{
			name:    "idempotent batch of an aborting producer is kept",
			aborted: []abort{{ProducerID: 1, FirstOffset: 0}},
			batches: []hdr{{pid: 1, first: 0, last: 0, txn: true}, {pid: 1, first: 1, last: 1}, {pid: 1, first: 2, last: 2, marker: "abort"}},
			skip:    []bool{true, false, true},
		},
		{
			name:    "fetch starts inside an aborted transaction",
			aborted: []abort{{ProducerID: 3, FirstOffset: 10}},
			batches: []hdr{{pid: 3, first: 15, last: 16, txn: true}, {pid: 3, first: 17, last: 17, marker: "abort"}, {pid: 4, first: 18, last: 18, txn: true}},
			skip:    []bool{true, true, false},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAbortFilter(tc.aborted)
			for i, h := range tc.batches {
				b := h.batch(t)
				if got := f.skip(&b); got != tc.skip[i] {
					t.Errorf("batch %d (%+v): skip %v, want %v", i, h, got, tc.skip[i])
				}
			}
		})
	}
}

func TestEncodeSplitsToFit(t *testing.T) {
	recs := testRecords(200, 500, 300)
	for _, codec := range codecs {
		t.Run(fmt.Sprintf("codec%d", codec), func(t *testing.T) {
			out, err := newEncoder(true).encode(recs, codec, 4000)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) < 2 && codec == kgo.CodecNone {
				t.Fatalf("%d batches; want a split", len(out))
			}
			var got []*kgo.Record
			next := int64(500)
			for _, e := range out {
				if len(e.raw) > 4000 {
					t.Errorf("batch of %d bytes exceeds 4000", len(e.raw))
				}
				if _, err := parseHeader(e.raw); err != nil {
					t.Fatal(err)
				}
				rs, err := decode(e.raw, 0, "t", 0, kgo.DefaultDecompressor())
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range rs {
					if e.offsets[i] != next {
						t.Fatalf("source offset %d, want %d", e.offsets[i], next)
					}
					next++
					r.Offset = e.offsets[i] - 500
					got = append(got, r)
				}
			}
			sameTestRecords(t, recs, got, 0)
		})
	}
}

func TestEncodeTooLarge(t *testing.T) {
	recs := testRecords(10, 100, 50)
	recs[6].Value = bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 2000)
	out, err := newEncoder(true).encode(recs, kgo.CodecNone, 2000)
	var tl *errTooLarge
	if !errors.As(err, &tl) || tl.offset != 106 {
		t.Fatalf("error %v, want a too large record at 106", err)
	}
	n := 0
	for _, e := range out {
		n += len(e.offsets)
	}
	if n != 6 {
		t.Errorf("%d records encoded before the large one, want 6", n)
	}
}

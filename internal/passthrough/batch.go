package passthrough

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Byte layout of a v2 record batch header, as far as this package needs it.
const (
	headerSize  = 61 // everything before the records
	lengthAt    = 8  // int32 length of what follows it
	magicAt     = 16 // int8 magic
	crcAt       = 17 // int32 CRC-32C of everything from attributesAt on
	attrsAt     = 21 // int16 attributes: the CRC covers from here
	lengthExtra = 12 // base offset and length fields, not counted in length
)

// Attribute bits of a v2 batch.
const (
	attrCodec         = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt reports a batch or legacy message whose CRC does not match
// its bytes.
var errCorrupt = errors.New("record batch CRC mismatch")

// nextBatch splits the first complete batch (or legacy message) off in:
// raw is its bytes, rest what follows; ok is false when in holds no
// complete entry (a fetch response may end with a partial one).
func nextBatch(in []byte) (raw, rest []byte, ok bool) {
	if len(in) < lengthExtra {
		return nil, nil, false
	}
	n := int(int32(binary.BigEndian.Uint32(in[lengthAt:])))
	if n < 0 || len(in) < lengthExtra+n || lengthExtra+n <= magicAt {
		return nil, nil, false
	}
	return in[:lengthExtra+n], in[lengthExtra+n:], true
}

// magic returns the format version of a complete batch or message.
func magic(raw []byte) int8 { return int8(raw[magicAt]) }

// Sizes of the smallest legacy messages: offset, length, CRC, magic,
// attributes, (v1: timestamp), key and value lengths.
const (
	legacyMinV0 = lengthExtra + 4 + 1 + 1 + 4 + 4
	legacyMinV1 = legacyMinV0 + 8
	legacyCRCAt = 12 // uint32 CRC-32 (IEEE) of everything from magicAt on
)

// errUnknownMagic reports an entry of a format this package does not know.
var errUnknownMagic = errors.New("unknown message format (magic)")

// checkEntry reports a complete entry from nextBatch that cannot be read
// as what its magic says: an unknown magic, or a legacy message shorter
// than its fixed fields or whose CRC does not match. Such an entry is
// handled as a corrupt batch (badBatchLocked), never read past its end.
// A v2 batch is checked by parseHeader.
func checkEntry(raw []byte) error {
	switch m := magic(raw); m {
	case 2:
		return nil
	case 0, 1:
		need := legacyMinV0
		if m == 1 {
			need = legacyMinV1
		}
		if len(raw) < need {
			return fmt.Errorf("message (magic %d) of %d bytes is shorter than its fixed fields (%d)", m, len(raw), need)
		}
		if crc32.ChecksumIEEE(raw[magicAt:]) != binary.BigEndian.Uint32(raw[legacyCRCAt:]) {
			return errCorrupt
		}
		return nil
	default:
		return fmt.Errorf("%w %d", errUnknownMagic, m)
	}
}

// parseHeader reads the header of a complete v2 batch and checks its CRC.
// Records in the result alias raw.
func parseHeader(raw []byte) (kmsg.RecordBatch, error) {
	var b kmsg.RecordBatch
	if len(raw) < headerSize {
		return b, fmt.Errorf("record batch of %d bytes is shorter than its header", len(raw))
	}
	if err := b.ReadFrom(raw); err != nil {
		return b, fmt.Errorf("reading record batch header: %w", err)
	}
	if crc32.Checksum(raw[attrsAt:], castagnoli) != uint32(b.CRC) {
		return b, errCorrupt
	}
	return b, nil
}

// stamp rewrites, in place, the header fields of a complete v2 batch that
// the target needs from this producer: producer ID and epoch, base
// sequence, the transactional bit (set only with txn), leader epoch -1,
// base offset 0. It then
// updates the CRC from the changed bytes (crc.go). Records are not touched.
func stamp(raw []byte, pid int64, epoch int16, seq int32, txn bool) error {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return fmt.Errorf("reading record batch header: %w", err)
	}
	b.FirstOffset = 0
	b.PartitionLeaderEpoch = -1
	b.Attributes &^= attrTransactional
	if txn {
		b.Attributes |= attrTransactional
	}
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, seq
	b.Records = nil
	var hdr, before [headerSize]byte
	copy(before[:], raw[:headerSize])
	copy(raw, b.AppendTo(hdr[:0]))
	crc := updateCRC(crcOf(before[:]), before[attrsAt:], raw[attrsAt:headerSize], len(raw)-attrsAt)
	binary.BigEndian.PutUint32(raw[crcAt:], crc)
	return nil
}

// forwardable reports whether a v2 batch can go to the target as it is:
// its timestamps are the records' own (CreateTime) and its offsets have no
// holes, which the broker requires of the batches it accepts.
func forwardable(b *kmsg.RecordBatch) bool {
	return b.Attributes&attrLogAppendTime == 0 && b.NumRecords == b.LastOffsetDelta+1
}

// lastOffset is the source offset of the last record of a v2 batch.
func lastOffset(b *kmsg.RecordBatch) int64 { return b.FirstOffset + int64(b.LastOffsetDelta) }

// abortFilter decides which transactional batches of one fetched partition
// a read_committed consumer skips, from the aborted transactions of the
// fetch response (producer ID and first offset of each) and the markers in
// the log, the way Kafka's Java consumer does: a transaction is open for
// its producer from its first offset until its abort marker.
type abortFilter struct {
	txns []kmsg.FetchResponseTopicPartitionAbortedTransaction // by first offset
	open map[int64]struct{}                                   // producers with an aborted transaction in progress
}

func newAbortFilter(txns []kmsg.FetchResponseTopicPartitionAbortedTransaction) *abortFilter {
	s := slices.Clone(txns)
	slices.SortStableFunc(s, func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
		return cmpInt64(a.FirstOffset, b.FirstOffset)
	})
	return &abortFilter{txns: s, open: make(map[int64]struct{})}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// skip reports whether a read_committed consumer drops the batch: control
// batches always, transactional data of an aborted transaction too. Batches
// must be passed in log order.
func (f *abortFilter) skip(b *kmsg.RecordBatch) bool {
	control := b.Attributes&attrControl != 0
	if b.ProducerID < 0 {
		return control
	}
	last := lastOffset(b)
	for len(f.txns) > 0 && f.txns[0].FirstOffset <= last {
		f.open[f.txns[0].ProducerID] = struct{}{}
		f.txns = f.txns[1:]
	}
	if control {
		if isAbortMarker(b) {
			delete(f.open, b.ProducerID)
		}
		return true
	}
	_, aborted := f.open[b.ProducerID]
	return aborted && b.Attributes&attrTransactional != 0
}

// isAbortMarker reports whether a control batch holds an abort marker.
// Control batches are never compressed.
func isAbortMarker(b *kmsg.RecordBatch) bool {
	if b.NumRecords < 1 || b.Attributes&attrCodec != 0 {
		return false
	}
	n, used := binary.Varint(b.Records)
	if used <= 0 || n < 0 || int64(len(b.Records)-used) < n {
		return false
	}
	var r kmsg.Record
	if err := r.ReadFrom(b.Records[:used+int(n)]); err != nil {
		return false
	}
	var k kmsg.ControlRecordKey
	if err := k.ReadFrom(r.Key); err != nil {
		return false
	}
	return k.Type == kmsg.ControlRecordKeyTypeAbort
}

// decode returns the records of one batch or legacy message at or after
// offset from, decompressed; they carry their source offsets and the
// timestamps a consumer sees (for LogAppendTime, the broker's time).
func decode(raw []byte, from int64, topic string, partition int32, dec kgo.Decompressor) ([]*kgo.Record, error) {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = raw
	rp.HighWatermark = -1
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset:         from,
		IsolationLevel: kgo.ReadUncommitted(),
		Topic:          topic,
		Partition:      partition,
	}, &rp, dec, nil)
	if fp.Err != nil {
		return nil, fp.Err
	}
	return fp.Records, nil
}

// stoppable is a Decompressor whose calls give up with ctx's error once
// ctx ends instead of waiting for the decompression under way. Source
// bytes are outside input: a batch crafted to decompress to gigabytes
// (a zstd bomb) takes seconds up to the client's bound
// (clients.MaxDecompressedBatchBytes), far more under load, and a stop
// must not wait for it. The abandoned call finishes in the background,
// bounded by that same limit, and its result is dropped.
type stoppable struct {
	ctx context.Context
	dec kgo.Decompressor
}

func (s stoppable) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec == kgo.CodecNone {
		return src, nil
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		out []byte
		err error
	}
	c := make(chan result, 1)
	go func() {
		out, err := s.dec.Decompress(src, codec)
		c <- result{out, err}
	}()
	select {
	case r := <-c:
		return r.out, r.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// errTooLarge reports a single record larger than the target accepts.
type errTooLarge struct {
	offset int64
	size   int
	limit  int
}

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("record at source offset %d needs a batch of %d bytes; the target accepts %d", e.offset, e.size, e.limit)
}

// encoded is one re-encoded batch and the source offset of each record.
type encoded struct {
	raw     []byte
	offsets []int64
}

// encoder builds v2 batches (CreateTime, producer fields left to stamp)
// from decoded records. It is safe for concurrent use.
type encoder struct {
	comp map[kgo.CompressionCodecType]kgo.Compressor
}

// newEncoder returns an encoder with franz-go's compressors; fast takes
// gzip and zstd at their fastest levels: recompressing what the source had
// compressed at the default levels cost more CPU than everything else
// together (docs/benchmarks.md).
func newEncoder(fast bool) *encoder {
	e := &encoder{comp: make(map[kgo.CompressionCodecType]kgo.Compressor)}
	gzip, zstd := kgo.GzipCompression(), kgo.ZstdCompression()
	if fast {
		gzip, zstd = gzip.WithLevel(1), zstd.WithLevel(1)
	}
	for codec, cc := range map[kgo.CompressionCodecType]kgo.CompressionCodec{
		kgo.CodecGzip:   gzip,
		kgo.CodecSnappy: kgo.SnappyCompression(),
		kgo.CodecLz4:    kgo.Lz4Compression(),
		kgo.CodecZstd:   zstd,
	} {
		if c, err := kgo.DefaultCompressor(cc); err == nil {
			e.comp[codec] = c
		}
	}
	return e
}

// encode packs recs into batches compressed with codec, each at most
// maxBytes long; a record that alone exceeds maxBytes is an *errTooLarge.
func (e *encoder) encode(recs []*kgo.Record, codec kgo.CompressionCodecType, maxBytes int) ([]encoded, error) {
	var out []encoded
	for start := 0; start < len(recs); {
		// Cut by uncompressed size first; compression only shrinks
		// what is usually compressible, and encodeFit splits further.
		end, size := start, headerSize
		for end < len(recs) {
			n := recordSize(recs[end])
			if end > start && size+n > maxBytes {
				break
			}
			size += n
			end++
		}
		bs, err := e.encodeFit(recs[start:end], codec, maxBytes)
		out = append(out, bs...)
		if err != nil {
			return out, err // the batches before the large record stand
		}
		start = end
	}
	return out, nil
}

// encodeFit encodes recs as one batch, halving it until each part fits.
func (e *encoder) encodeFit(recs []*kgo.Record, codec kgo.CompressionCodecType, maxBytes int) ([]encoded, error) {
	raw, err := e.batch(recs, codec)
	if err != nil {
		return nil, err
	}
	if len(raw) <= maxBytes {
		offs := make([]int64, len(recs))
		for i, r := range recs {
			offs[i] = r.Offset
		}
		return []encoded{{raw: raw, offsets: offs}}, nil
	}
	if len(recs) == 1 {
		return nil, &errTooLarge{offset: recs[0].Offset, size: len(raw), limit: maxBytes}
	}
	half := len(recs) / 2
	a, err := e.encodeFit(recs[:half], codec, maxBytes)
	if err != nil {
		return a, err
	}
	b, err := e.encodeFit(recs[half:], codec, maxBytes)
	return append(a, b...), err
}

// varintLen is the size of x as a zigzag varint.
func varintLen(x int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], x)
}

// bytesLen is the size of b as Kafka's varint-length bytes (null: -1).
func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// recordBodyLen is what a v2 record's length field counts: everything
// after it, as kmsg.Record.AppendTo writes it.
func recordBodyLen(r *kmsg.Record) int {
	n := 1 + varintLen(r.TimestampDelta64) + varintLen(int64(r.OffsetDelta)) + bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

// recordSize is an upper bound of a record's encoded size.
func recordSize(r *kgo.Record) int {
	n := 5 + 1 + 10 + 5 + 5 + len(r.Key) + 5 + len(r.Value) + 5
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// batch encodes recs (at least one) as one v2 batch with offset deltas
// 0..n-1 and their own timestamps.
func (e *encoder) batch(recs []*kgo.Record, codec kgo.CompressionCodecType) ([]byte, error) {
	first := recordMillis(recs[0])
	maxTS := first
	krs := make([]kmsg.Record, len(recs))
	size := 0
	for i, r := range recs {
		ts := recordMillis(r)
		maxTS = max(maxTS, ts)
		kr := &krs[i]
		kr.TimestampDelta64, kr.OffsetDelta, kr.Key, kr.Value = ts-first, int32(i), r.Key, r.Value
		if len(r.Headers) > 0 {
			kr.Headers = make([]kmsg.Header, len(r.Headers))
			for j, h := range r.Headers {
				kr.Headers[j] = kmsg.Header{Key: h.Key, Value: h.Value}
			}
		}
		kr.Length = int32(recordBodyLen(kr))
		size += varintLen(int64(kr.Length)) + int(kr.Length)
	}
	// One buffer of the exact size, after room for the batch header:
	// kmsg writes each record, its length first, straight into it.
	buf := make([]byte, headerSize, headerSize+size)
	for i := range krs {
		buf = krs[i].AppendTo(buf)
	}
	body := buf[headerSize:]
	records := body
	if codec != kgo.CodecNone {
		c, ok := e.comp[codec]
		if !ok {
			return nil, fmt.Errorf("unknown compression codec %d", codec)
		}
		var cbuf bytes.Buffer
		out, used := c.Compress(&cbuf, body)
		if used != codec {
			return nil, fmt.Errorf("compressing with codec %d failed", codec)
		}
		records = out
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	b.Length = int32(headerSize - lengthExtra + len(records))
	var raw []byte
	if codec == kgo.CodecNone {
		// The header goes in the room left before the records.
		b.Records = nil
		b.AppendTo(buf[:0])
		raw = buf
	} else {
		raw = b.AppendTo(make([]byte, 0, headerSize+len(records)))
	}
	binary.BigEndian.PutUint32(raw[crcAt:], crc32.Checksum(raw[attrsAt:], castagnoli))
	return raw, nil
}

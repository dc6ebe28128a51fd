package passthrough

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// valueSampleEvery is how often a partition decompresses one compressed
// batch to learn its value bytes per batch byte.
const valueSampleEvery = 5 * time.Second

// valueSizer counts value bytes of forwarded batches, MM2's byte-count,
// without decompressing every batch: uncompressed batches are walked
// exactly; a compressed one is decompressed every valueSampleEvery, and
// the others are estimated from the last sample's value bytes per batch
// byte.
type valueSizer struct {
	mu      sync.Mutex
	ratio   float64 // value bytes per batch byte at the last sample; 0: none yet
	sampled time.Time
}

// size returns the value bytes of raw, a v2 batch.
func (v *valueSizer) size(raw []byte, dec kgo.Decompressor) int64 {
	if len(raw) < headerSize {
		return 0
	}
	codec := kgo.CompressionCodecType(raw[attrsAt+1] & attrCodec)
	if codec == kgo.CodecNone {
		return recordValueBytes(raw[headerSize:])
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(v.sampled) >= valueSampleEvery {
		v.sampled = time.Now() // a batch that fails to decompress is not tried at once again
		if recs, err := dec.Decompress(raw[headerSize:], codec); err == nil {
			n := recordValueBytes(recs)
			v.ratio = float64(n) / float64(len(raw))
			return n
		}
	}
	return int64(v.ratio * float64(len(raw)))
}

// recordValueBytes adds up the value lengths of v2 records (MM2 counts
// neither keys nor headers). A malformed tail is not counted.
func recordValueBytes(b []byte) int64 {
	var total int64
	for len(b) > 0 {
		n, used := binary.Varint(b)
		if used <= 0 || n < 0 || int64(len(b)-used) < n {
			break
		}
		rec := b[used : used+int(n)]
		b = b[used+int(n):]
		if len(rec) < 1 {
			continue
		}
		r := rec[1:] // attributes
		ok := true
		skip := func() int64 { // one varint
			x, u := binary.Varint(r)
			if u <= 0 {
				ok = false
				return 0
			}
			r = r[u:]
			return x
		}
		skip() // timestamp delta
		skip() // offset delta
		if k := skip(); ok && k > 0 {
			if int64(len(r)) < k {
				continue
			}
			r = r[k:]
		}
		if val := skip(); ok && val > 0 && int64(len(r)) >= val {
			total += val
		}
	}
	return total
}

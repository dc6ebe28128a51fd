package passthrough

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestValueBytes(t *testing.T) {
	recs := testRecords(40, 0, 300) // keys, nil values and headers too
	var want int64
	for _, r := range recs {
		want += int64(len(r.Value))
	}
	for name, codec := range map[string]kgo.CompressionCodecType{"none": kgo.CodecNone, "gzip": kgo.CodecGzip, "snappy": kgo.CodecSnappy, "lz4": kgo.CodecLz4, "zstd": kgo.CodecZstd} {
		t.Run(name, func(t *testing.T) {
			raw := sourceBatch(t, recs, codec, 0, false)
			half := sourceBatch(t, recs[:20], codec, 0, false)
			var halfWant int64
			for _, r := range recs[:20] {
				halfWant += int64(len(r.Value))
			}
			var v valueSizer
			dec := kgo.DefaultDecompressor()
			if got := v.size(raw, dec); got != want {
				t.Errorf("first batch: %d value bytes, want %d", got, want)
			}
			// Within the sample interval a compressed batch is estimated
			// from the last sample; an uncompressed one is exact.
			got := v.size(half, dec)
			if codec == kgo.CodecNone && got != halfWant {
				t.Errorf("second batch: %d, want %d", got, halfWant)
			}
			if got < halfWant/2 || got > halfWant*2 {
				t.Errorf("second batch: %d, want about %d", got, halfWant)
			}
			v.sampled = time.Now().Add(-valueSampleEvery) // due for a sample again
			if got := v.size(half, dec); got != halfWant {
				t.Errorf("sampled again: %d, want %d", got, halfWant)
			}
		})
	}
}

func TestRecordValueBytesMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {0x01}, {0x7f, 0, 0}, {0x06, 0, 0, 0, 0x01, 0x09}, {0x0a, 0, 0, 0, 0x01, 0x7e}} {
		if n := recordValueBytes(b); n < 0 || n > int64(len(b)) {
			t.Errorf("recordValueBytes(%x) = %d", b, n)
		}
	}
}

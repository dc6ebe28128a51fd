package passthrough

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// messageV0 encodes a magic 0 uncompressed message at offset.
func messageV0(offset int64, key, value string) []byte {
	m := kmsg.MessageV0{Offset: offset, Magic: 0, Key: []byte(key), Value: []byte(value)}
	raw := m.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[12:], crc32.ChecksumIEEE(raw[16:]))
	return raw
}

// TestLegacyMessagesBecomeV2 decodes v0 and v1 messages and re-encodes
// them as v2: keys, values and offsets stay, a v1 timestamp stays and a v0
// message (no timestamp) gets -1.
func TestLegacyMessagesBecomeV2(t *testing.T) {
	tests := []struct {
		name    string
		raw     []byte
		wantTS  int64
		wantKey string
	}{
		{"v0", messageV0(7, "k0", "v0"), -1, "k0"},
		{"v1", messageV1(7, "k1", "v1", 1700000000123), 1700000000123, "k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := kgo.DefaultDecompressor()
			recs, err := decode(tt.raw, 7, "t", 0, dec)
			if err != nil || len(recs) != 1 {
				t.Fatalf("decode: %d records, %v", len(recs), err)
			}
			encs, err := newEncoder(true).encode(recs, kgo.CodecNone, 1<<20)
			if err != nil || len(encs) != 1 {
				t.Fatalf("encode: %d batches, %v", len(encs), err)
			}
			if m := magic(encs[0].raw); m != 2 {
				t.Fatalf("magic %d, want 2", m)
			}
			back, err := decode(encs[0].raw, 0, "t", 0, dec)
			if err != nil || len(back) != 1 {
				t.Fatalf("decode v2: %d records, %v", len(back), err)
			}
			r := back[0]
			if string(r.Key) != tt.wantKey || string(r.Value) != string(recs[0].Value) || r.Timestamp.UnixMilli() != tt.wantTS || encs[0].offsets[0] != 7 {
				t.Errorf("got key %q value %q ts %d offset %d, want %q %q %d 7",
					r.Key, r.Value, r.Timestamp.UnixMilli(), encs[0].offsets[0], tt.wantKey, recs[0].Value, tt.wantTS)
			}
		})
	}
}

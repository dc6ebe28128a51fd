package passthrough

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestUpdateCRCMatchesFullCRC changes random header bytes of random bodies
// and compares the updated CRC with one computed over the whole body.
func TestUpdateCRCMatchesFullCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{40, 41, 64, 100, 1000, 4096, 65537, 1 << 20} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		for range 20 {
			k := 1 + rng.IntN(40)
			old := append([]byte(nil), body[:k]...)
			for i := range k {
				if rng.IntN(3) == 0 {
					body[i] = byte(rng.Uint32())
				}
			}
			crc := crc32.Checksum(append(old, body[k:]...), castagnoli)
			if got, want := updateCRC(crc, old, body[:k], n), crc32.Checksum(body, castagnoli); got != want {
				t.Fatalf("body %d bytes, %d changed: updated CRC %08x, full CRC %08x", n, k, got, want)
			}
		}
	}
}

// TestStampKeepsCorruptionVisible: a batch whose body does not match its
// CRC still does not after stamp, so the target refuses it rather than
// storing corrupt records under a fresh CRC.
func TestStampKeepsCorruptionVisible(t *testing.T) {
	for _, codec := range codecs {
		raw := sourceBatch(t, testRecords(10, 0, 30), codec, 0, false)
		raw[len(raw)-5] ^= 0x01
		for seq := range int32(3) { // a batch may be stamped again for a resend
			if err := stamp(raw, 5, 1, seq*10, seq%2 == 1); err != nil {
				t.Fatal(err)
			}
			if _, err := parseHeader(raw); err != errCorrupt {
				t.Fatalf("codec %d, stamp %d: parseHeader = %v, want %v", codec, seq, err, errCorrupt)
			}
		}
		raw[len(raw)-5] ^= 0x01 // undo the damage: the CRC is right again
		if _, err := parseHeader(raw); err != nil {
			t.Fatalf("codec %d: repaired batch: %v", codec, err)
		}
	}
}

func BenchmarkStamp(b *testing.B) {
	raw, payload := benchBatch(b, 0, 100)
	b.SetBytes(int64(payload))
	for i := 0; b.Loop(); i++ {
		if err := stamp(raw, 1, 0, int32(i), false); err != nil {
			b.Fatal(err)
		}
	}
}

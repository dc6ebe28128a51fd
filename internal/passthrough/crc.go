package passthrough

import (
	"encoding/binary"
	"hash/crc32"
)

// A batch's CRC-32C covers its whole body, but stamp changes only a few
// header bytes. CRC is linear: for two messages of equal length,
// crc(a) ^ crc(b) is the raw (no pre- or post-inversion) CRC of a ^ b, and
// the raw CRC of d followed by n zero bytes is the raw CRC of d multiplied
// by x^(8n) modulo the polynomial. So the new CRC follows from the old one
// and the changed header bytes alone, whatever the batch's size, and a
// batch that arrived corrupt stays corrupt (the target refuses it) instead
// of being given a fresh, valid CRC.

// castagnoliReversed is the CRC-32C polynomial in the bit order
// hash/crc32 uses.
const castagnoliReversed = 0x82f63b78

// mulModP multiplies a and b, polynomials over GF(2) in reversed bit
// order, modulo the CRC-32C polynomial.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// x2k[k] is x^(2^k) modulo the polynomial; xPow8n needs k up to 3+63.
var x2k = func() (t [67]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial: the factor that appends n
// zero bytes to a raw CRC.
func xPow8n(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(x2k[k], p)
		}
	}
	return p
}

// rawCRC is the CRC-32C register after p, from 0, without inversions.
func rawCRC(p []byte) uint32 { return ^crc32.Update(^uint32(0), castagnoli, p) }

// updateCRC returns the CRC of body after its first len(old) bytes, which
// were old, became new (same length); crc is the CRC of body before.
func updateCRC(crc uint32, old, new []byte, bodyLen int) uint32 {
	var diff [headerSize]byte
	d := diff[:len(old)]
	for i := range d {
		d[i] = old[i] ^ new[i]
	}
	return crc ^ mulModP(rawCRC(d), xPow8n(bodyLen-len(d)))
}

// crcOf reads the CRC field of a complete v2 batch.
func crcOf(raw []byte) uint32 { return binary.BigEndian.Uint32(raw[crcAt:]) }

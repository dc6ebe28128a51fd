package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxStringLen is the longest string, in UTF-8 bytes, that fits an INT16
// length prefix.
const MaxStringLen = 32767

// CurrentVersion is the value header version written for heartbeats and
// checkpoints.
const CurrentVersion int16 = 0

var (
	// ErrMalformed is wrapped by every decode error caused by bad bytes.
	ErrMalformed = errors.New("malformed record")
	// ErrStringTooLong is returned when encoding a string over MaxStringLen bytes.
	ErrStringTooLong = errors.New("string longer than 32767 bytes")
)

// appendString appends an INT16-length-prefixed string.
func appendString(dst []byte, field, s string) ([]byte, error) {
	if len(s) > MaxStringLen {
		return nil, fmt.Errorf("wire: %s: %w (%d bytes)", field, ErrStringTooLong, len(s))
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...), nil
}

func appendInt16(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v))
}

func appendInt32(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(v))
}

func appendInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// reader walks a buffer field by field. The first failure sticks: later reads
// return zero values and err reports the first problem.
type reader struct {
	what string // "heartbeat key" etc., for error messages
	b    []byte
	err  error
}

func (r *reader) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("wire: %s: %s: %s: %w", r.what, field, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

func (r *reader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.fail(field, "need %d bytes, have %d", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int16(field string) int16 {
	if b := r.take(field, 2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32(field string) int32 {
	if b := r.take(field, 4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64(field string) int64 {
	if b := r.take(field, 8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) string(field string) string {
	n := r.int16(field)
	if r.err != nil {
		return ""
	}
	if n < 0 {
		r.fail(field, "negative string length %d", n)
		return ""
	}
	return string(r.take(field, int(n)))
}

// newReader returns a reader over b; a nil b (a tombstone or missing key) is
// an error rather than an empty record.
func newReader(what string, b []byte) *reader {
	r := &reader{what: what, b: b}
	if b == nil {
		r.err = fmt.Errorf("wire: %s: null: %w", what, ErrMalformed)
	}
	return r
}

// ValueVersion returns the version header of a heartbeat or checkpoint value.
// Decoders read every version with the version 0 layout, as Java does;
// callers may use this to warn about versions other than CurrentVersion.
func ValueVersion(value []byte) (int16, error) {
	r := newReader("value", value)
	v := r.int16("version")
	return v, r.err
}

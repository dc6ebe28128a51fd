package wire

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DecodeError locates a record that failed to decode.
type DecodeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("%s[%d]@%d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Skipper decodes the records of an internal topic, skipping and counting the
// ones that fail to decode, as Java's checkpoint readers do. Decode must be
// set; OnSkip, if set, is called with every skipped record's error (e.g. to
// log it). A Skipper is used by one reader goroutine; Skipped may be read
// from any goroutine.
type Skipper[T any] struct {
	Decode func(key, value []byte) (T, error)
	OnSkip func(*DecodeError)

	skipped atomic.Int64
}

// Next decodes one record. ok is false if the record was skipped.
func (s *Skipper[T]) Next(topic string, partition int32, offset int64, key, value []byte) (v T, ok bool) {
	v, err := s.Decode(key, value)
	if err != nil {
		s.skipped.Add(1)
		if s.OnSkip != nil {
			s.OnSkip(&DecodeError{Topic: topic, Partition: partition, Offset: offset, Err: err})
		}
		var zero T
		return zero, false
	}
	return v, true
}

// Record is Next for a fetched kgo record.
func (s *Skipper[T]) Record(r *kgo.Record) (T, bool) {
	return s.Next(r.Topic, r.Partition, r.Offset, r.Key, r.Value)
}

// Skipped returns how many records have been skipped so far.
func (s *Skipper[T]) Skipped() int64 { return s.skipped.Load() }

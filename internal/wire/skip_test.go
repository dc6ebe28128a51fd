package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSkipper(t *testing.T) {
	var skipped []*DecodeError
	s := Skipper[Checkpoint]{
		Decode: DecodeCheckpoint,
		OnSkip: func(e *DecodeError) { skipped = append(skipped, e) },
	}
	k, v := mustEncode(t, Checkpoint{Group: "g", Topic: "t", UpstreamOffset: 3})
	if c, ok := s.Next("B.checkpoints.internal", 0, 10, k, v); !ok || c.UpstreamOffset != 3 {
		t.Fatalf("good record: %+v %v", c, ok)
	}
	if c, ok := s.Record(&kgo.Record{Topic: "B.checkpoints.internal", Offset: 11, Key: k}); ok || c != (Checkpoint{}) {
		t.Fatalf("tombstone accepted: %+v", c)
	}
	if _, ok := s.Next("B.checkpoints.internal", 0, 12, []byte{1}, v); ok {
		t.Fatal("corrupt key accepted")
	}
	if s.Skipped() != 2 || len(skipped) != 2 {
		t.Fatalf("skipped = %d, callbacks %d", s.Skipped(), len(skipped))
	}
	e := skipped[0]
	if e.Offset != 11 || !errors.Is(e, ErrMalformed) || !strings.HasPrefix(e.Error(), "B.checkpoints.internal[0]@11: ") {
		t.Errorf("decode error = %v", e)
	}

	// OnSkip is optional.
	s2 := Skipper[OffsetSync]{Decode: DecodeOffsetSync}
	if _, ok := s2.Next("x", 0, 0, nil, nil); ok || s2.Skipped() != 1 {
		t.Error("nil OnSkip")
	}
}

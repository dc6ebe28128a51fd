package kafkaerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want Class
	}{
		{nil, Retry},
		{kerr.NotLeaderForPartition, Retry},
		{kerr.OutOfOrderSequenceNumber, Retry},
		{errors.New("connection reset"), Retry},
		{kerr.MessageTooLarge, TooLarge},
		{kerr.RecordListTooLarge, TooLarge},
		{fmt.Errorf("wrapped: %w", kerr.MessageTooLarge), TooLarge},
		{kerr.InvalidRecord, Fatal},
		{kerr.TopicAuthorizationFailed, Fatal},
		{kerr.TransactionalIDAuthorizationFailed, Fatal},
		{kerr.UnsupportedCompressionType, Fatal},
		{fmt.Errorf("producing: %w", kerr.PolicyViolation), Fatal},
	} {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestTopicGone(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{kerr.UnknownTopicOrPartition, true},
		{fmt.Errorf("saving: %w", kerr.UnknownTopicID), true},
		{kerr.NotLeaderForPartition, false},
		{errors.New("unknown topic"), false},
	} {
		if got := TopicGone(tt.err); got != tt.want {
			t.Errorf("TopicGone(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestTransient(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("creating: %w", context.Canceled), false},
		{io.EOF, true}, // a broker that closed the connection
		{context.DeadlineExceeded, true},
		{kerr.NotController, true},
		{kerr.RequestTimedOut, true},
		{kerr.PolicyViolation, false},
		{fmt.Errorf("creating: %w", kerr.TopicAuthorizationFailed), false},
		{kerr.InvalidReplicationFactor, false},
	} {
		if got := Transient(tt.err); got != tt.want {
			t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

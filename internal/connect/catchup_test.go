package connect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCatchUpGivesUpWaiting: a read that waits for another read of the
// topic under way gives up at its own deadline, naming the topic, rather
// than waiting for the other read to end (with the cluster down that one
// holds on for the client's retries, and a REST request's answer came
// after the API's write deadline).
func TestCatchUpGivesUpWaiting(t *testing.T) {
	l := &topicLog{topic: "connect-configs", reading: make(chan struct{}, 1)}
	l.reading <- struct{}{} // a read under way that does not end
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := l.CatchUp(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connect-configs") {
		t.Fatalf("CatchUp = %v, want the deadline, naming the topic", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("CatchUp gave up after %v", took)
	}
}

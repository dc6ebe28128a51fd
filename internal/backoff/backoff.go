// Package backoff retries an operation with a doubling wait: the loop that
// waits for a topic created a moment ago to reach every broker, or for a
// retriable error to pass. Loops that do not block (the engine's request
// loop) take the wait from Policy.Delay and come back when it has passed.
package backoff

import (
	"context"
	"fmt"
	"time"
)

// Policy says how long to wait between attempts and for how long to retry.
type Policy struct {
	First time.Duration // the wait after the first failed attempt
	Max   time.Duration // the wait doubles up to Max
	For   time.Duration // no attempt starts after For since the first
}

// Retry calls op until it returns nil, an error that retry rejects, or an
// error after p.For. It returns op's last error; if ctx ends while it
// waits, that error wraps both op's last error and ctx's.
func Retry(ctx context.Context, p Policy, retry func(error) bool, op func() error) error {
	deadline := time.Now().Add(p.For)
	wait := p.First
	for {
		err := op()
		if err == nil || !retry(err) || !time.Now().Before(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, p.Max)
	}
}

// Delay returns the wait after the n-th failed attempt in a row (n >= 1):
// First, doubled for each attempt after it, up to Max.
func (p Policy) Delay(n int) time.Duration {
	d := p.First
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

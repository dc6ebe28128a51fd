// Package throttle limits how many bytes per second a flow copies, so that a
// catch-up after downtime does not saturate a WAN link or a target cluster.
package throttle

import (
	"context"
	"sync"
	"time"
)

// Limiter is a token bucket of bytes: Wait(n) returns once n bytes fit into
// the rate. A nil *Limiter never waits.
type Limiter struct {
	rate  float64 // bytes per second
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time

	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// New returns a limiter of bytesPerSecond with a burst of one second's
// worth, or nil when bytesPerSecond is 0 or less (no limit).
func New(bytesPerSecond int64) *Limiter {
	if bytesPerSecond <= 0 {
		return nil
	}
	l := &Limiter{rate: float64(bytesPerSecond), burst: float64(bytesPerSecond), now: time.Now, sleep: sleepCtx}
	l.tokens, l.last = l.burst, l.now()
	return l
}

// Wait blocks until n bytes may go, or ctx ends. Requests larger than the
// burst go through once the bucket is full, taking it into debt.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if l == nil || n <= 0 {
		return nil
	}
	l.mu.Lock()
	now := l.now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens -= float64(n)
	debt := -l.tokens
	l.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	return l.sleep(ctx, time.Duration(debt/l.rate*float64(time.Second)))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

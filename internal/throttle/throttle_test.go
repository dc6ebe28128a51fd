package throttle

import (
	"context"
	"testing"
	"time"
)

// fakeClock advances only when the limiter sleeps.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return nil
}

func TestLimiterRate(t *testing.T) {
	tests := []struct {
		name  string
		rate  int64
		sends []int
		want  time.Duration // total time the sends take
	}{
		{"within the burst", 1000, []int{500, 500}, 0},
		{"one second over the burst", 1000, []int{1000, 1000}, time.Second},
		{"many small sends", 1000, repeat(100, 50), 4 * time.Second},
		{"a send larger than the burst", 1000, []int{3000}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(0, 0)}
			l := New(tt.rate)
			l.now, l.sleep, l.last = c.now, c.sleep, c.t
			start := c.t
			for _, n := range tt.sends {
				if err := l.Wait(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}
			if got := c.t.Sub(start); got < tt.want-time.Millisecond || got > tt.want+time.Millisecond {
				t.Errorf("took %v, want %v", got, tt.want)
			}
		})
	}
}

func repeat(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}

func TestNoLimit(t *testing.T) {
	var l *Limiter = New(0)
	if l != nil {
		t.Fatal("rate 0 should mean no limiter")
	}
	if err := l.Wait(context.Background(), 1<<30); err != nil {
		t.Fatal(err)
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	l := New(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, 1000); err == nil {
		t.Error("Wait on a cancelled context returned nil")
	}
}

package backoff

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

var (
	errAgain = errors.New("again")
	errFinal = errors.New("final")
)

func retryAgain(err error) bool { return errors.Is(err, errAgain) }

func TestRetry(t *testing.T) {
	p := Policy{First: 50 * time.Millisecond, Max: time.Second, For: 5 * time.Second}
	for _, tc := range []struct {
		name     string
		results  []error // op's results in order; the last repeats
		cancelAt time.Duration
		wantErr  error
		wantCtx  bool
		calls    int
		elapsed  time.Duration // fake time until Retry returns
	}{
		{name: "first try", results: []error{nil}, calls: 1},
		{name: "after three", results: []error{errAgain, errAgain, errAgain, nil}, calls: 4, elapsed: 50*time.Millisecond + 100*time.Millisecond + 200*time.Millisecond},
		{name: "not retried", results: []error{errFinal}, wantErr: errFinal, calls: 1},
		{name: "stops retrying", results: []error{errAgain, errFinal}, wantErr: errFinal, calls: 2, elapsed: 50 * time.Millisecond},
		// 50+100+200+400+800 = 1550 ms, then 1 s waits: attempts at
		// 0, .05, .15, .35, .75, 1.55, 2.55, 3.55, 4.55, 5.55 (past For).
		{name: "gives up after For", results: []error{errAgain}, wantErr: errAgain, calls: 10, elapsed: 5550 * time.Millisecond},
		{name: "context ends", results: []error{errAgain}, cancelAt: 120 * time.Millisecond, wantErr: errAgain, wantCtx: true, calls: 2, elapsed: 120 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancelAt > 0 {
					time.AfterFunc(tc.cancelAt, cancel)
				}
				calls := 0
				start := time.Now()
				err := Retry(ctx, p, retryAgain, func() error {
					r := tc.results[min(calls, len(tc.results)-1)]
					calls++
					return r
				})
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if errors.Is(err, context.Canceled) != tc.wantCtx {
					t.Fatalf("err = %v: wraps the context's end %v, want %v", err, !tc.wantCtx, tc.wantCtx)
				}
				if calls != tc.calls {
					t.Fatalf("op called %d times, want %d", calls, tc.calls)
				}
				if got := time.Since(start); got != tc.elapsed {
					t.Fatalf("returned after %v, want %v", got, tc.elapsed)
				}
			})
		})
	}
}

func TestDelay(t *testing.T) {
	p := Policy{First: 100 * time.Millisecond, Max: 30 * time.Second}
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{5, 1600 * time.Millisecond},
		{9, 25600 * time.Millisecond},
		{10, 30 * time.Second},
		{1000, 30 * time.Second}, // no overflow
	} {
		if got := p.Delay(tt.n); got != tt.want {
			t.Errorf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

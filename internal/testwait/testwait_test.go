package testwait

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a testing.TB whose Fatalf records instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	if len(args) > 0 {
		r.failed = strings.ReplaceAll(format, "%v", "") + args[len(args)-1].(string)
	}
	panic(r) // stop For, as runtime.Goexit stops a test
}

// TestFor tests For and, with every set, Every.
func TestFor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		every     time.Duration // Every's poll; 0: For
		holdsAt   time.Duration // cond holds from then on; <0 never
		timeout   time.Duration
		wantFail  bool
		wantAfter time.Duration // fake time when For returns
	}{
		{name: "at once", holdsAt: 0, timeout: time.Second},
		// Polls at 0, 10, 30, 70, 150 ms: 100 ms is seen at 150.
		{name: "soon", holdsAt: 100 * time.Millisecond, timeout: time.Second, wantAfter: 150 * time.Millisecond},
		// Then 310 and 250 ms apart: 560, 810, 1060 (past the deadline).
		{name: "never", holdsAt: -1, timeout: time.Second, wantFail: true, wantAfter: 1060 * time.Millisecond},
		{name: "every, at once", every: 20 * time.Millisecond, holdsAt: 0, timeout: time.Second},
		// Polls every 20 ms: 50 ms is seen at 60, not at For's 70.
		{name: "every, soon", every: 20 * time.Millisecond, holdsAt: 50 * time.Millisecond, timeout: time.Second, wantAfter: 60 * time.Millisecond},
		{name: "every, never", every: 20 * time.Millisecond, holdsAt: -1, timeout: time.Second, wantFail: true, wantAfter: 1020 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{TB: t}
				start := time.Now()
				func() {
					defer func() {
						if p := recover(); p != nil && p != any(r) {
							panic(p)
						}
					}()
					cond := func() bool { return tc.holdsAt >= 0 && time.Since(start) >= tc.holdsAt }
					if tc.every > 0 {
						Every(r, tc.timeout, tc.every, "the thing", cond)
					} else {
						For(r, tc.timeout, "the thing", cond)
					}
				}()
				if failed := r.failed != ""; failed != tc.wantFail {
					t.Fatalf("failed = %v (%q), want %v", failed, r.failed, tc.wantFail)
				}
				if tc.wantFail && !strings.Contains(r.failed, "the thing") {
					t.Fatalf("failure %q does not name what it waited for", r.failed)
				}
				if got := time.Since(start); got != tc.wantAfter {
					t.Fatalf("returned after %v, want %v", got, tc.wantAfter)
				}
			})
		})
	}
}

// Package testwait is the tests' one way to wait for a condition instead
// of sleeping: it polls, quickly at first, until the condition holds or
// the time is up, and then fails the test naming what it waited for.
package testwait

import (
	"testing"
	"time"
)

// Every polls cond every poll until it holds, failing t after timeout:
// for a test that times how soon cond holds, where For's growing poll
// would add up to 250 ms to the time.
func Every(t testing.TB, timeout, poll time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(poll)
	}
}

// For polls cond until it holds, failing t after timeout. The poll starts
// at 10 ms and doubles up to 250 ms, so a condition that holds soon is seen
// soon and a long wait costs little.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for poll := 10 * time.Millisecond; !cond(); poll = min(2*poll, 250*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(poll)
	}
}

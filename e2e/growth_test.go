package e2e

import (
	"fmt"
	"testing"
	"time"
)

// waitGrowth waits until count() has grown by at least n from its value at
// the call: the condition behind "let it copy for a while under load"
// (work done, not time passed), so a loaded machine only makes it slower.
func waitGrowth(t *testing.T, timeout time.Duration, what string, count func() int, n int) {
	t.Helper()
	from := count()
	waitFor(t, timeout, fmt.Sprintf("%s: %d more after %d", what, n, from), func() bool { return count() >= from+n })
}

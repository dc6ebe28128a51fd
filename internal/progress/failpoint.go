//go:build failpoints

package progress

import (
	"os"
	"time"
)

// In a build with the failpoints tag (the e2e tests' binary, never a
// release), KMIRROR_FAILPOINT_PROGRESS_REPAIR_PAUSE holds a repair between
// finding the progress topic missing and creating it again, so that a test
// can see the state kmirror reports meanwhile.
func init() {
	if d, err := time.ParseDuration(os.Getenv("KMIRROR_FAILPOINT_PROGRESS_REPAIR_PAUSE")); err == nil {
		repairPause = d
	}
}

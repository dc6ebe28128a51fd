package flow

import (
	"testing"

	"github.com/kmirror/kmirror/internal/wire"
)

// TestSyncFits: a position is recovered from an offset sync only if the
// sync fits the partitions as they are now; else the partition is copied
// from its start (duplicates rather than a skip).
func TestSyncFits(t *testing.T) {
	for _, tt := range []struct {
		name              string
		up, down          int64
		srcEnd, remoteEnd int64
		fits              bool
	}{
		{"inside both", 99, 49, 100, 50, true},
		{"the first record", 0, 0, 1, 1, true},
		{"upstream at the source end: source topic re-created", 100, 10, 100, 50, false},
		{"upstream beyond the source end", 150, 10, 100, 50, false},
		{"downstream at the remote end: remote topic re-created", 10, 50, 100, 50, false},
		{"downstream beyond the remote end", 10, 70, 100, 50, false},
		{"negative upstream", -1, 10, 100, 50, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := wire.OffsetSync{Topic: "t", UpstreamOffset: tt.up, DownstreamOffset: tt.down}
			if got := syncFits(s, tt.srcEnd, tt.remoteEnd); got != tt.fits {
				t.Errorf("syncFits = %v, want %v", got, tt.fits)
			}
		})
	}
}

package flow

import (
	"testing"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// TestHostingWait: a partition waits while its topic's last sync had it
// past Hosted, or did not know it (its topic grew since, or is new), with
// the topic's error as the reason.
func TestHostingWait(t *testing.T) {
	var h hosting
	h.set([]topicsync.Topic{
		{Name: "grown", Partitions: 4, Hosted: 2},
		{Name: "refused", Partitions: 2, Err: "cannot create the remote topic: POLICY_VIOLATION"},
		{Name: "ready", Partitions: 2, Hosted: 2, Ready: true},
	})
	for _, tt := range []struct {
		topic     string
		partition int32
		wait      bool
		why       string
	}{
		{"grown", 1, false, ""},
		{"grown", 2, true, ""},
		{"refused", 0, true, "cannot create the remote topic: POLICY_VIOLATION"},
		{"ready", 1, false, ""},
		{"ready", 2, true, ""}, // the source grew after the sync
		{"unknown", 0, true, ""},
	} {
		wait, why := h.wait(progress.TP{Topic: tt.topic, Partition: tt.partition})
		if wait != tt.wait || why != tt.why {
			t.Errorf("%s:%d: wait %v %q, want %v %q", tt.topic, tt.partition, wait, why, tt.wait, tt.why)
		}
	}
}

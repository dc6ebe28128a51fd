package offsetsync

import "testing"

func TestObserve(t *testing.T) {
	type step struct {
		up, down int64
		due      bool
	}
	tests := []struct {
		name   string
		lagMax int64
		steps  []step
	}{
		{"first record is always due", 100, []step{{10, 0, true}, {11, 1, false}, {12, 2, false}}},
		{"upstream gap is due", 100, []step{{0, 0, true}, {1, 1, false}, {5, 2, true}, {6, 3, false}}},
		{"downstream rewind is due", 100, []step{{0, 10, true}, {1, 11, false}, {2, 0, true}}},
		{"lag reaches offset.lag.max", 3, []step{{0, 0, true}, {1, 1, false}, {2, 2, false}, {3, 3, false}, {4, 4, true}, {5, 5, false}}},
		{"lag 0 syncs every record", 0, []step{{0, 0, true}, {1, 1, true}, {2, 2, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &state{prevUp: -1, prevDown: -1, lastSyncDown: -1}
			for i, st := range tt.steps {
				if got := s.observe(st.up, st.down, tt.lagMax); got != st.due {
					t.Errorf("step %d (%d->%d): due %v, want %v", i, st.up, st.down, got, st.due)
				}
			}
		})
	}
}

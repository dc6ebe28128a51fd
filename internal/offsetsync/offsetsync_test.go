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

func TestObserveExact(t *testing.T) {
	type step struct {
		up, down      int64
		due, boundary bool
	}
	tests := []struct {
		name   string
		lagMax int64
		steps  []step
	}{
		{"contiguous is quiet", 100, []step{{0, 0, true, true}, {1, 1, false, false}, {2, 2, false, false}}},
		{"downstream jump is a boundary", 100, []step{{0, 0, true, true}, {1, 1, false, false}, {2, 5, true, true}, {3, 6, false, false}}},
		{"upstream skip is a boundary", 100, []step{{0, 0, true, true}, {2, 1, true, true}, {3, 2, false, false}}},
		{"both sides jump", 100, []step{{0, 0, true, true}, {3, 4, true, true}}},
		{"rewind after restart", 100, []step{{10, 10, true, true}, {11, 11, false, false}, {5, 12, true, true}}},
		{"lag sync is no boundary", 2, []step{{0, 0, true, true}, {1, 1, false, false}, {2, 2, false, false}, {3, 3, true, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &state{prevUp: -1, prevDown: -1, lastSyncDown: -1}
			for i, st := range tt.steps {
				due, boundary := s.observeMode(st.up, st.down, tt.lagMax, true)
				if due != st.due || boundary != st.boundary {
					t.Errorf("step %d (%d->%d): due %v boundary %v, want %v %v", i, st.up, st.down, due, boundary, st.due, st.boundary)
				}
			}
		})
	}
}

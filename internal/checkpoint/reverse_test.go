package checkpoint

import (
	"math/rand"
	"testing"
)

func TestReverseTranslateTable(t *testing.T) {
	// Transactions of 10 records: upstream 0..9 copied to 0..9, the
	// marker at 10, 11..20 copied to 10..19, marker at 21.
	txn := [][2]int64{{0, 0}, {11, 10}, {20, 19}}
	tests := []struct {
		name  string
		syncs [][2]int64
		down  int64
		mm2   int64 // -1: no translation
		exact int64
	}{
		{"no syncs", nil, 5, -1, -1},
		{"before the first sync", [][2]int64{{10, 5}, {20, 15}}, 3, -1, -1},
		{"at a sync", [][2]int64{{0, 0}, {100, 100}}, 100, 100, 100},
		{"inside a run", [][2]int64{{0, 0}, {100, 100}}, 42, 1, 42},
		{"inside a shifted run", [][2]int64{{50, 7}, {150, 107}}, 10, 51, 53},
		{"last record of a run before a marker", txn, 9, 1, 9},
		{"run boundary after a marker", txn, 10, 11, 11},
		{"inside the next transaction", txn, 15, 12, 16},
		{"last sync", txn, 19, 20, 20},
		{"beyond the last sync: caught up", txn, 20, 21, 21},
		{"beyond the last sync: far", txn, 25, 21, 21},
		{"upstream gap (compaction)", [][2]int64{{0, 0}, {50, 10}}, 9, 1, 9},
		{"downstream gap (foreign records)", [][2]int64{{0, 0}, {10, 20}}, 15, 1, 10},
		{"start of a downstream gap", [][2]int64{{0, 0}, {10, 20}}, 10, 1, 10},
		{"both sides jump", [][2]int64{{0, 0}, {3, 4}}, 2, 1, 2},
		{"both sides jump, in the gap", [][2]int64{{0, 0}, {3, 4}}, 3, 1, 3},
	}
	for _, tt := range tests {
		for _, mode := range []Mode{MM2, Exact} {
			s := NewStore(mode, 0)
			for _, y := range tt.syncs {
				s.Apply(osync(y[0], y[1]))
			}
			s.SetReady()
			want := tt.exact
			if mode == MM2 {
				want = tt.mm2
			}
			got, ok := s.TranslateBack("t", 0, tt.down)
			if !ok {
				got = -1
			}
			if got != want {
				t.Errorf("%s (%v): TranslateBack(%d) = %d, want %d", tt.name, mode, tt.down, got, want)
			}
		}
	}
}

func TestReverseNotReady(t *testing.T) {
	s := NewStore(Exact, 0)
	s.Apply(osync(0, 0))
	if _, ok := s.TranslateBack("t", 0, 0); ok {
		t.Error("TranslateBack answered before the store was ready")
	}
	s.SetReady()
	if _, ok := s.TranslateBack("t", 0, -1); ok {
		t.Error("TranslateBack answered for a negative offset")
	}
	if _, ok := s.TranslateBack("t", 1, 0); ok {
		t.Error("TranslateBack answered for a partition without syncs")
	}
}

// copyStream is a simulated copy of one partition: pairs (up, down) of
// every copied record, with upstream gaps (markers, aborted records) and
// downstream gaps (foreign records).
func copyStream(r *rand.Rand, n int) [][2]int64 {
	var out [][2]int64
	up, down := int64(r.Intn(5)), int64(r.Intn(5))
	for range n {
		out = append(out, [2]int64{up, down})
		up, down = up+1, down+1
		if r.Intn(8) == 0 {
			up += int64(1 + r.Intn(3))
		}
		if r.Intn(12) == 0 {
			down += int64(1 + r.Intn(3))
		}
	}
	return out
}

// exactSyncs are the syncs kmirror's exact writer publishes for a stream:
// the first pair, every pair after a discontinuity of either side, a few
// pairs inside runs (lag and progress saves), and the last pair.
func exactSyncs(r *rand.Rand, pairs [][2]int64) [][2]int64 {
	var out [][2]int64
	for i, p := range pairs {
		switch {
		case i == 0 || i == len(pairs)-1:
		case p[0]-pairs[i-1][0] != 1 || p[1]-pairs[i-1][1] != 1:
		case r.Intn(20) == 0:
		default:
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestReverseSafeAndExact checks, on random streams, every committed
// downstream offset from the first sync to one past the last copy: the
// translated upstream offset never skips a record whose copy is at or after
// it (no loss) in either mode, and in exact mode it re-reads nothing.
func TestReverseSafeAndExact(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for run := range 200 {
		pairs := copyStream(r, 1+r.Intn(60))
		syncs := exactSyncs(r, pairs)
		for _, mode := range []Mode{Exact, MM2} {
			s := NewStore(mode, 0)
			for _, y := range syncs {
				// mm2 mode keeps only some syncs, as MM2's writer would.
				if mode == MM2 && y != syncs[0] && r.Intn(3) == 0 {
					continue
				}
				s.Apply(osync(y[0], y[1]))
			}
			s.SetReady()
			last := pairs[len(pairs)-1]
			for d := pairs[0][1]; d <= last[1]+1; d++ {
				u, ok := s.TranslateBack("t", 0, d)
				if !ok {
					t.Fatalf("run %d %v: no translation for %d (syncs %v)", run, mode, d, syncs)
				}
				for _, p := range pairs {
					if p[1] >= d && p[0] < u {
						t.Fatalf("run %d %v: %d -> %d skips upstream %d copied at %d (syncs %v)", run, mode, d, u, p[0], p[1], syncs)
					}
					if mode == Exact && p[1] < d && p[0] >= u {
						t.Fatalf("run %d exact: %d -> %d re-reads upstream %d copied at %d (syncs %v)", run, d, u, p[0], p[1], syncs)
					}
				}
			}
		}
	}
}

// TestReverseRoundTrip: in exact mode, every copied record's offset goes
// forward to its copy and back to itself.
func TestReverseRoundTrip(t *testing.T) {
	s := NewStore(Exact, 0)
	// Runs 0..9, 11..20, 22..29 (then 12 foreign records), 30..39, 40.
	for _, y := range [][2]int64{{0, 0}, {11, 10}, {22, 20}, {30, 40}, {40, 50}} {
		s.Apply(osync(y[0], y[1]))
	}
	s.SetReady()
	for up := int64(0); up <= 40; up++ {
		if up == 10 || up == 21 {
			continue // markers
		}
		d, ok := s.Translate("t", 0, up)
		if !ok {
			t.Fatalf("Translate(%d): none", up)
		}
		if back, ok := s.TranslateBack("t", 0, d); !ok || back != up {
			t.Errorf("Translate(%d) = %d, TranslateBack(%d) = %d, %v; want %d", up, d, d, back, ok, up)
		}
	}
}

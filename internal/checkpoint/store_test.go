package checkpoint

import (
	"testing"

	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/wire"
)

func osync(up, down int64) wire.OffsetSync {
	return wire.OffsetSync{Topic: "t", Partition: 0, UpstreamOffset: up, DownstreamOffset: down}
}

// TestTranslateMM2Examples checks MM2's documented examples (§5.4).
func TestTranslateMM2Examples(t *testing.T) {
	for _, mode := range []Mode{MM2, Exact} {
		s := NewStore(mode, 0)
		s.SetReady()
		steps := []struct {
			apply    *wire.OffsetSync
			up, want int64
			ok       bool
		}{
			{apply: &wire.OffsetSync{Topic: "t", UpstreamOffset: 100, DownstreamOffset: 200}, up: 150, want: 201, ok: true},
			{apply: &wire.OffsetSync{Topic: "t", UpstreamOffset: 150, DownstreamOffset: 251}, up: 150, want: 251, ok: true},
			{up: 5, want: -1},
			{apply: &wire.OffsetSync{Topic: "t", UpstreamOffset: 200, DownstreamOffset: 10}, up: 200, want: 10, ok: true},
			{apply: &wire.OffsetSync{Topic: "t", UpstreamOffset: 20, DownstreamOffset: 20}, up: 20, want: 20, ok: true},
		}
		for i, st := range steps {
			if st.apply != nil {
				s.Apply(*st.apply)
			}
			got, ok := s.Translate("t", 0, st.up)
			if got != st.want || ok != st.ok {
				t.Errorf("%v step %d: Translate(%d) = %d, %v; want %d, %v", mode, i, st.up, got, ok, st.want, st.ok)
			}
		}
	}
}

func TestTranslateTable(t *testing.T) {
	tests := []struct {
		name  string
		syncs [][2]int64
		up    int64
		mm2   int64 // -1: no checkpoint
		exact int64
	}{
		{"no syncs", nil, 5, -1, -1},
		{"before first sync", [][2]int64{{10, 0}}, 5, -1, -1},
		{"at a sync", [][2]int64{{10, 0}, {20, 10}}, 20, 10, 10},
		{"mid run", [][2]int64{{0, 0}, {100, 100}}, 42, 1, 42},
		{"past last sync", [][2]int64{{0, 0}, {100, 100}}, 150, 101, 101},
		{"upstream gap (txn marker) after run", [][2]int64{{0, 0}, {11, 10}}, 10, 1, 10},
		{"inside upstream gap (compaction)", [][2]int64{{0, 0}, {50, 10}}, 30, 1, 10},
		{"downstream jump", [][2]int64{{0, 0}, {10, 20}}, 10, 20, 20},
		{"before downstream jump", [][2]int64{{0, 0}, {10, 20}}, 9, 1, 9},
		{"both sides jump", [][2]int64{{0, 0}, {3, 4}}, 2, 1, 2},
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
			got, ok := s.Translate("t", 0, tt.up)
			if !ok {
				got = -1
			}
			if got != want {
				t.Errorf("%s (%v): Translate(%d) = %d, want %d", tt.name, mode, tt.up, got, want)
			}
		}
	}
}

func TestNotReady(t *testing.T) {
	s := NewStore(Exact, 0)
	s.Apply(osync(0, 0))
	if _, ok := s.Translate("t", 0, 0); ok {
		t.Fatal("translated before ready")
	}
	s.SetReady()
	if d, ok := s.Translate("t", 0, 0); !ok || d != 0 {
		t.Fatalf("Translate = %d, %v", d, ok)
	}
}

// rec is one record of a simulated target partition: the upstream offset
// it copies, or -1 for a record written by someone else.
type log []int64

// pipeline simulates kmirror copying one partition: the pairs acked, in
// order, and the target partition they produce.
type pipeline struct {
	pairs  [][2]int64
	target log
}

func (p *pipeline) copy(ups ...int64) {
	for _, u := range ups {
		p.pairs = append(p.pairs, [2]int64{u, int64(len(p.target))})
		p.target = append(p.target, u)
	}
}

func (p *pipeline) foreign(n int) {
	for range n {
		p.target = append(p.target, -1)
	}
}

func span(from, to int64) []int64 {
	var s []int64
	for u := from; u < to; u++ {
		s = append(s, u)
	}
	return s
}

// syncs runs the writer's emission rules over the pairs, flushing the
// delayed sync every flush pairs and at the end.
func (p *pipeline) syncs(lagMax int64, exact bool, flush int) []wire.OffsetSync {
	r := offsetsync.NewRule()
	var out []wire.OffsetSync
	var delayed *wire.OffsetSync
	for i, pr := range p.pairs {
		if pr[0] < 0 { // restart marker
			r = offsetsync.NewRule()
			continue
		}
		s := osync(pr[0], pr[1])
		if due, _ := r.Observe(pr[0], pr[1], lagMax, exact); due {
			out, delayed = append(out, s), nil
		} else {
			delayed = &s
		}
		if flush > 0 && (i+1)%flush == 0 && delayed != nil {
			out, delayed = append(out, *delayed), nil
			r.Flushed()
		}
	}
	if delayed != nil {
		out = append(out, *delayed)
	}
	return out
}

// check translates every committed offset in [0, end] and verifies that a
// consumer starting there on the target misses no upstream record; it
// returns the most records re-delivered (copies of offsets below the
// committed one) for any committed offset.
func (p *pipeline) check(t *testing.T, st *Store, end, step int64) (worst int) {
	t.Helper()
	exists := map[int64]bool{}
	for _, u := range p.target {
		if u >= 0 {
			exists[u] = true
		}
	}
	for c := int64(0); c <= end; c += step {
		d, ok := st.Translate("t", 0, c)
		if !ok {
			continue
		}
		seen := map[int64]bool{}
		redelivered := 0
		for off := d; off < int64(len(p.target)); off++ {
			u := p.target[off]
			if u >= 0 && u < c {
				redelivered++
			}
			seen[u] = true
		}
		for u := range exists {
			if u >= c && !seen[u] {
				t.Fatalf("%v: committed %d -> %d misses upstream %d", st.Mode(), c, d, u)
			}
		}
		worst = max(worst, redelivered)
	}
	return worst
}

func TestTranslateSimulated(t *testing.T) {
	type scenario struct {
		name       string
		build      func(p *pipeline)
		end        int64
		exactWorst int // -1: only safety is checked
	}
	scenarios := []scenario{
		{"contiguous", func(p *pipeline) { p.copy(span(0, 1000)...) }, 1000, 0},
		{"transactions", func(p *pipeline) {
			// 20 transactions of 9 records, each ended by a marker.
			for tx := int64(0); tx < 20; tx++ {
				p.copy(span(tx*10, tx*10+9)...)
			}
		}, 200, 0},
		{"compaction gaps", func(p *pipeline) {
			p.copy(span(0, 10)...)
			p.copy(span(50, 60)...)
			p.copy(span(61, 62)...)
			p.copy(span(300, 400)...)
		}, 400, 0},
		{"foreign writes on the target", func(p *pipeline) {
			p.copy(span(0, 30)...)
			p.foreign(7)
			p.copy(span(30, 60)...)
			p.foreign(1)
			p.copy(span(62, 90)...) // and an upstream gap at once
		}, 90, 0},
		{"restart with duplicates", func(p *pipeline) {
			p.copy(span(0, 100)...)
			p.pairs = append(p.pairs, [2]int64{-1, -1})
			p.copy(span(80, 150)...)
		}, 150, -1},
		{"target re-created", func(p *pipeline) {
			p.copy(span(0, 50)...)
			p.pairs = append(p.pairs, [2]int64{-1, -1})
			p.target = p.target[:0]
			n := len(p.pairs)
			p.copy(span(50, 80)...)
			_ = n
		}, 80, -1},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			p := &pipeline{}
			sc.build(p)
			for _, mode := range []Mode{MM2, Exact} {
				st := NewStore(mode, 0)
				for _, s := range p.syncs(100, mode == Exact, 37) {
					st.Apply(s)
				}
				st.SetReady()
				worst := p.check(t, st, sc.end, 1)
				if mode == Exact && sc.exactWorst >= 0 && worst > sc.exactWorst {
					t.Errorf("exact: up to %d records re-delivered, want <= %d", worst, sc.exactWorst)
				}
				t.Logf("%v: worst re-delivery %d", mode, worst)
			}
		})
	}
}

// TestFarBehind: a group far behind the head still translates, and
// memory stays bounded while old history thins out safely.
func TestFarBehind(t *testing.T) {
	p := &pipeline{}
	for tx := int64(0); tx < 5000; tx++ { // 5000 transactions: 5000 boundaries
		p.copy(span(tx*10, tx*10+9)...)
	}
	st := NewStore(Exact, 1024)
	for _, s := range p.syncs(100, true, 0) {
		st.Apply(s)
	}
	st.SetReady()
	if n := st.Len("t", 0); n > 1024 {
		t.Fatalf("%d syncs kept, max 1024", n)
	}
	worst := p.check(t, st, 50000, 499)
	t.Logf("far behind with 1024 slots: worst re-delivery %d", worst)
	// Recent history is exact.
	for _, c := range []int64{49000, 49990, 45010} {
		d, _ := st.Translate("t", 0, c)
		if p.target[d] != c {
			t.Errorf("committed %d -> %d (upstream %d there), want exact", c, d, p.target[d])
		}
	}
	// Old history is still available.
	if _, ok := st.Translate("t", 0, 15); !ok {
		t.Error("old offset not translated")
	}
}

func TestDiagonalMerge(t *testing.T) {
	st := NewStore(Exact, 0)
	for i := int64(0); i < 1000; i += 10 {
		st.Apply(osync(i, i+5))
	}
	if n := st.Len("t", 0); n != 2 {
		t.Fatalf("%d syncs kept for a contiguous partition, want 2", n)
	}
	st.SetReady()
	if d, _ := st.Translate("t", 0, 500); d != 505 {
		t.Fatalf("Translate(500) = %d", d)
	}
	// A re-read sync changes nothing.
	st.Apply(osync(0, 5))
	if d, _ := st.Translate("t", 0, 990); d != 995 {
		t.Fatalf("after re-read: Translate(990) = %d", d)
	}
}

func TestCorruptValuesIgnored(t *testing.T) {
	st := NewStore(Exact, 0)
	st.Apply(osync(10, 10))
	st.Apply(osync(-5, 3))
	st.Apply(osync(20, -1))
	if n := st.Len("t", 0); n != 1 {
		t.Fatalf("%d syncs, want 1", n)
	}
}

// TestTranslateTwoWriters: the offset syncs of robustness run 20 (session
// 17), where a worker stopped past its session (producer 2002) went on
// copying src.orders[4] beside its new owner (2004) and their syncs
// interleave. 584 is at 595 on the target. Exact mode must not join the
// zombie's (517,588) and the owner's (586,597) into one run, which gave
// 597, ahead of the data; with or without the owner's (578,589) between
// them (thinned, say), 584 translates at or behind 595.
func TestTranslateTwoWriters(t *testing.T) {
	type sync struct {
		up, down, pid int64
	}
	owner := []sync{{507, 516, 2004}, {521, 530, 2004}, {534, 543, 2004}, {555, 564, 2004}, {574, 583, 2004}, {577, 586, 2004}}
	zombie := []sync{{516, 587, 2002}, {517, 588, 2002}}
	for _, tt := range []struct {
		name  string
		after []sync
		want  int64
	}{
		{"owner's sync between", []sync{{578, 589, 2004}, {586, 597, 2004}, {591, 602, 2004}}, 595},
		{"owner's sync between missing", []sync{{586, 597, 2004}, {591, 602, 2004}}, 589},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(Exact, 0)
			s.SetReady()
			for _, y := range append(append(append([]sync{}, owner...), zombie...), tt.after...) {
				s.ApplyFrom(wire.OffsetSync{Topic: "orders", Partition: 4, UpstreamOffset: y.up, DownstreamOffset: y.down}, y.pid)
			}
			got, ok := s.Translate("orders", 4, 584)
			if !ok || got != tt.want {
				t.Errorf("584 translated to %d (%v), want %d (584 is at 595: never past it)", got, ok, tt.want)
			}
		})
	}
}

package robustness

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/wire"
)

// TestPlanReproducible: a seed gives the same faults every time, every
// kind comes once before any repeats, none starts in the last 30 s or
// lasts past 10 s before the end, and the remote topic is deleted at
// most twice.
func TestPlanReproducible(t *testing.T) {
	for seed := uint64(1); seed < 50; seed++ {
		d := 3 * time.Minute
		a := plan(rand.New(rand.NewPCG(seed, 22)), d, 12*time.Second, 3)
		b := plan(rand.New(rand.NewPCG(seed, 22)), d, 12*time.Second, 3)
		if len(a) != len(b) {
			t.Fatalf("seed %d: %d faults, then %d", seed, len(a), len(b))
		}
		kinds := map[string]int{}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("seed %d fault %d: %v, then %v", seed, i, a[i], b[i])
			}
			if a[i].at >= d-30*time.Second || a[i].at+a[i].dur > d-10*time.Second {
				t.Errorf("seed %d: %v runs too late in a %v run", seed, a[i], d)
			}
			if i < len(faultWeights) && kinds[a[i].kind] > 0 {
				t.Errorf("seed %d: %s repeated among the first %d faults", seed, a[i].kind, len(faultWeights))
			}
			kinds[a[i].kind]++
		}
		if len(a) >= len(faultWeights) && len(kinds) != len(faultWeights) {
			t.Errorf("seed %d: %d kinds in %d faults", seed, len(kinds), len(a))
		}
		if kinds[faultRemoteDeleted] > 2 {
			t.Errorf("seed %d: remote topic deleted %d times", seed, kinds[faultRemoteDeleted])
		}
	}
}

func mk(off int64, seq int, value string) rec {
	v := value
	k := "k" + strconv.Itoa(seq)
	return rec{Offset: off, TS: 1000 + int64(seq), Key: &k, Value: &v, Headers: []string{"seq", strconv.Itoa(seq)}}
}

// TestComparePartition covers what the checker must catch and allow.
func TestComparePartition(t *testing.T) {
	src := []rec{mk(0, 1, "a"), mk(1, 2, "b"), mk(3, 3, "c"), mk(4, 4, "d")} // offset 2: a transaction marker
	tomb := mk(5, 5, "")
	tomb.Value = nil
	src = append(src, tomb)
	nullValue := tomb
	empty := ""
	nullValue.Value = &empty
	tests := []struct {
		name     string
		dst      []rec
		cut      int64
		dups     int
		lost     int
		gone     int
		problems string
	}{
		{name: "exact", dst: []rec{mk(0, 1, "a"), mk(1, 2, "b"), mk(2, 3, "c"), mk(3, 4, "d"), withOffset(tomb, 4)}},
		{name: "duplicates after a restart", dst: []rec{mk(0, 1, "a"), mk(1, 2, "b"), mk(2, 1, "a"), mk(3, 2, "b"), mk(4, 3, "c"), mk(5, 4, "d"), withOffset(tomb, 6)}, dups: 2},
		{name: "lost", dst: []rec{mk(0, 1, "a"), mk(1, 3, "c"), withOffset(tomb, 2)}, lost: 2},
		{name: "gone before the cut", dst: []rec{mk(0, 3, "c"), mk(1, 4, "d"), withOffset(tomb, 2)}, cut: 3, gone: 2},
		{name: "lost after the cut", dst: []rec{mk(0, 4, "d"), withOffset(tomb, 1)}, cut: 3, gone: 2, lost: 1},
		{name: "reordered", dst: []rec{mk(0, 2, "b"), mk(1, 1, "a"), mk(2, 3, "c"), mk(3, 4, "d"), withOffset(tomb, 4)}, problems: "out of order"},
		{name: "changed value", dst: []rec{mk(0, 1, "a"), mk(1, 2, "B"), mk(2, 3, "c"), mk(3, 4, "d"), withOffset(tomb, 4)}, problems: "value"},
		{name: "tombstone became empty", dst: []rec{mk(0, 1, "a"), mk(1, 2, "b"), mk(2, 3, "c"), mk(3, 4, "d"), withOffset(nullValue, 4)}, problems: "<null>"},
		{name: "foreign record", dst: []rec{mk(0, 1, "a"), mk(1, 2, "b"), mk(2, 3, "c"), mk(3, 4, "d"), withOffset(tomb, 4), mk(5, 99, "z")}, problems: "not a record of the source"},
	}
	for _, tt := range tests {
		pc := comparePartition(src, tt.dst, tt.cut)
		if pc.duplicates != tt.dups || len(pc.lost) != tt.lost || pc.allowedGone != tt.gone {
			t.Errorf("%s: duplicates %d lost %v gone %d, want %d, %d, %d", tt.name, pc.duplicates, pc.lost, pc.allowedGone, tt.dups, tt.lost, tt.gone)
		}
		got := strings.Join(pc.problems, "; ")
		if (tt.problems == "") != (got == "") || !strings.Contains(got, tt.problems) {
			t.Errorf("%s: problems %q, want ones with %q", tt.name, got, tt.problems)
		}
	}
	// Timestamps and headers are compared too.
	d := mk(0, 1, "a")
	d.TS++
	if recDiff(mk(0, 1, "a"), d) == "" {
		t.Error("a changed timestamp passed")
	}
	d = mk(0, 1, "a")
	d.Headers = append(d.Headers, "x", "y")
	if recDiff(mk(0, 1, "a"), d) == "" {
		t.Error("an added header passed")
	}
}

func withOffset(r rec, off int64) rec { r.Offset = off; return r }

// TestCheckCheckpoints: a checkpoint ahead of the data or going back is
// reported; one at or behind the data is not.
func TestCheckCheckpoints(t *testing.T) {
	// Target offsets 0..3 hold source offsets 10, 11, 11 (a duplicate), 13.
	srcOffset := map[int64]int64{0: 10, 1: 11, 2: 11, 3: 13}
	// Two workers copying one partition for a moment: 12 and 13 are on
	// the target twice, interleaved with the other's copies.
	twice := map[int64]int64{0: 10, 1: 12, 2: 11, 3: 13, 4: 12, 5: 13}
	t0 := time.Date(2026, 12, 3, 19, 38, 0, 0, time.UTC)
	cp := func(up, down int64) checkpoint {
		return checkpoint{group: "g", topic: "t", upstream: up, downstream: down, producer: 4, at: t0}
	}
	by := func(c checkpoint, producer int64, after time.Duration) checkpoint {
		c.producer, c.at = producer, t0.Add(after)
		return c
	}
	tests := []struct {
		name      string
		srcOffset map[int64]int64
		cps       []checkpoint
		want      string // a problem
	}{
		{"in step", srcOffset, []checkpoint{cp(10, 0), cp(12, 3), cp(14, 4)}, ""},
		{"behind is fine", srcOffset, []checkpoint{cp(14, 2)}, ""},
		{"ahead", srcOffset, []checkpoint{cp(12, 4)}, "ahead of the data: every copy of source offset 13"},
		{"beyond the end", srcOffset, []checkpoint{cp(20, 7)}, "beyond the target's end"},
		// Copies below the downstream offset are fine while each record
		// has one at or after it.
		{"copied again after", twice, []checkpoint{cp(12, 3)}, ""},
		{"only copy below", twice, []checkpoint{cp(12, 5)}, "ahead of the data: every copy of source offset 12"},
		// The group's offset went back: MM2's rule emits the rewind.
		{"both back (a rewind)", srcOffset, []checkpoint{cp(14, 4), cp(12, 3)}, ""},
		{"upstream back, downstream on", srcOffset, []checkpoint{cp(12, 2), cp(11, 3)}, "went back"},
		{"downstream back", srcOffset, []checkpoint{cp(12, 3), cp(12, 2)}, "went back"},
		{"downstream back, upstream on", srcOffset, []checkpoint{cp(12, 3), cp(14, 2)}, "went back"},
		// Two leaders for a moment (a frozen worker and its
		// replacement): the new one fences the old, so going back is a
		// failure whoever wrote it.
		{"back, another leader at once", srcOffset, []checkpoint{cp(12, 3), by(cp(12, 2), 6, 2*time.Second)}, "went back"},
	}
	for _, tt := range tests {
		got := strings.Join(checkCheckpoints(tt.cps, tt.srcOffset, 6), "; ")
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestDecodeCheckpoint reads what kmirror writes (and MM2 writes alike).
func TestDecodeCheckpoint(t *testing.T) {
	c := wire.Checkpoint{Group: "g-orders", Topic: "orders", Partition: 5, UpstreamOffset: 1234, DownstreamOffset: 1200, Metadata: "m"}
	k, _ := c.Key()
	v, _ := c.Value()
	got, err := decodeCheckpoint(k, v)
	if err != nil {
		t.Fatal(err)
	}
	if got.group != c.Group || got.topic != c.Topic || got.partition != 5 || got.upstream != 1234 || got.downstream != 1200 {
		t.Errorf("decoded %+v from %+v", got, c)
	}
	if _, err := decodeCheckpoint(k[:3], v); err == nil {
		t.Error("a short key decoded")
	}
}

// TestMetricSeries parses the Prometheus text kmirror serves.
func TestMetricSeries(t *testing.T) {
	body := "# HELP x\n" + recordCount + `{partition="3",source="src",target="dst",topic="src.orders"} 42` + "\n" +
		recordCount + "_other 1\nkmirror_source_records_lost_total 0\n"
	m := metricSeries(body, recordCount)
	if len(m) != 1 {
		t.Fatalf("%v", m)
	}
	for l, v := range m {
		if v != 42 || label(l, "topic") != "src.orders" || label(l, "partition") != "3" {
			t.Errorf("%s = %v", l, v)
		}
	}
	if m := metricSeries(body, "kmirror_source_records_lost_total"); m[""] != 0 || len(m) != 1 {
		t.Errorf("unlabelled series: %v", m)
	}
}

// TestFirstCopied: the cut of a deleted remote topic is the source offset
// of the first record the re-created topic holds.
func TestFirstCopied(t *testing.T) {
	src := []rec{mk(0, 1, "a"), mk(1, 2, "b"), mk(3, 3, "c")}
	if got := firstCopied(src, []rec{mk(0, 3, "c")}); got != 3 {
		t.Errorf("first copied %d, want 3", got)
	}
	if got := firstCopied(src, nil); got != 4 {
		t.Errorf("nothing copied: %d, want the source end 4", got)
	}
}

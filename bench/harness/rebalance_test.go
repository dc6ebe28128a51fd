package harness

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// arrival is record seq of partition p, produced at created ms and read at
// got ms.
func arrival(p int, seq int64, created, got int) Arrival {
	return Arrival{Partition: p, Seq: seq, Created: at(created), At: at(got)}
}

func TestRebalKey(t *testing.T) {
	for _, tc := range []struct {
		key       string
		run, part int
		seq       int64
		ok        bool
	}{
		{"3:17:42", 3, 17, 42, true},
		{"0:0:0", 0, 0, 0, true},
		{"3:17", 0, 0, 0, false},
		{"3:17:42:1", 0, 0, 0, false},
		{"a:1:2", 0, 0, 0, false},
		{"1:-1:2", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		run, part, seq, ok := parseRebalKey([]byte(tc.key))
		if ok != tc.ok || run != tc.run || part != tc.part || seq != tc.seq {
			t.Errorf("parseRebalKey(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", tc.key, run, part, seq, ok, tc.run, tc.part, tc.seq, tc.ok)
		}
		if tc.ok {
			if got := string(rebalKey(tc.run, tc.part, tc.seq)); got != tc.key {
				t.Errorf("rebalKey(%d, %d, %d) = %q, want %q", tc.run, tc.part, tc.seq, got, tc.key)
			}
		}
	}
}

func TestCopyingAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arr     []Arrival
		parts   int
		event   int // ms
		want    time.Duration
		slowest int
		ok      bool
	}{
		{"every partition already copying", []Arrival{
			arrival(0, 0, 900, 950), arrival(0, 1, 1000, 1100), arrival(1, 0, 1050, 1200),
		}, 2, 1000, 200 * time.Millisecond, 1, true},
		{"records produced before the event do not count, even if they arrive after it", []Arrival{
			arrival(0, 0, 500, 1500), arrival(1, 0, 800, 1600), arrival(0, 1, 1200, 1700), arrival(1, 1, 1100, 4000),
		}, 2, 1000, 3 * time.Second, 1, true},
		{"a partition resuming from old progress: its duplicates first, then new records", []Arrival{
			arrival(0, 5, 1100, 1200),
			arrival(1, 1, 200, 9000), arrival(1, 2, 300, 9000), arrival(1, 7, 1500, 9500),
		}, 2, 1000, 8500 * time.Millisecond, 1, true},
		{"a partition without any new record is not copying", []Arrival{
			arrival(0, 5, 1100, 1200), arrival(1, 1, 200, 1300),
		}, 2, 1000, 0, 1, false},
		{"a partition never seen", []Arrival{arrival(0, 5, 1100, 1200)}, 3, 1000, 0, 1, false},
		{"arrivals before the event are skipped", []Arrival{
			arrival(0, 0, 100, 200), arrival(1, 0, 150, 300), arrival(0, 1, 1001, 2000), arrival(1, 1, 1001, 2500),
		}, 2, 1000, 1500 * time.Millisecond, 1, true},
		{"foreign partitions ignored", []Arrival{arrival(7, 0, 1000, 1100), arrival(0, 0, 1000, 1300)}, 1, 1000, 300 * time.Millisecond, 0, true},
		{"nothing to wait for", nil, 0, 1000, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, slowest, ok := copyingAgain(tc.arr, tc.parts, at(tc.event))
			if d != tc.want || slowest != tc.slowest || ok != tc.ok {
				t.Errorf("copyingAgain = %v, %d, %v; want %v, %d, %v", d, slowest, ok, tc.want, tc.slowest, tc.ok)
			}
		})
	}
}

func TestCountDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arr      []Arrival
		bounds   []int // ms
		want     []int64
		distinct int64
	}{
		{"none", []Arrival{arrival(0, 0, 0, 10), arrival(0, 1, 0, 20), arrival(1, 0, 0, 30)}, []int{0, 15}, []int64{0, 0}, 3},
		{"same seq in another partition is no duplicate", []Arrival{arrival(0, 0, 0, 10), arrival(1, 0, 0, 20)}, []int{0}, []int64{0}, 2},
		{"counted in the window they arrive in", []Arrival{
			arrival(0, 0, 0, 10), arrival(0, 1, 0, 20), arrival(0, 2, 0, 30),
			arrival(0, 1, 0, 110), arrival(0, 2, 0, 120), // after event 2
			arrival(0, 3, 0, 130),
			arrival(0, 0, 0, 250), // after event 3
		}, []int{0, 100, 200}, []int64{0, 2, 1}, 4},
		{"a record three times", []Arrival{arrival(2, 9, 0, 10), arrival(2, 9, 0, 20), arrival(2, 9, 0, 30)}, []int{0}, []int64{2}, 1},
		{"arrivals before the first bound count in the first window", []Arrival{arrival(0, 0, 0, 10), arrival(0, 0, 0, 20)}, []int{50, 100}, []int64{1, 0}, 1},
		{"an event without arrivals", []Arrival{arrival(0, 0, 0, 10), arrival(0, 0, 0, 300)}, []int{0, 100, 200}, []int64{0, 0, 1}, 1},
		{"no bounds", []Arrival{arrival(0, 0, 0, 10), arrival(0, 0, 0, 20)}, nil, []int64{1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bounds []time.Time
			for _, b := range tc.bounds {
				bounds = append(bounds, at(b))
			}
			dups, distinct := countDuplicates(tc.arr, bounds)
			if len(dups) != len(tc.want) || distinct != tc.distinct {
				t.Fatalf("countDuplicates = %v, %d; want %v, %d", dups, distinct, tc.want, tc.distinct)
			}
			for i := range dups {
				if dups[i] != tc.want[i] {
					t.Errorf("countDuplicates = %v; want %v", dups, tc.want)
					break
				}
			}
		})
	}
}

func TestCountMissing(t *testing.T) {
	acked := func(per ...[]int64) []map[int64]bool {
		var out []map[int64]bool
		for _, seqs := range per {
			m := map[int64]bool{}
			for _, s := range seqs {
				m[s] = true
			}
			out = append(out, m)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		acked []map[int64]bool
		arr   []Arrival
		want  int64
	}{
		{"all there", acked([]int64{0, 1}, []int64{0}), []Arrival{arrival(0, 0, 0, 1), arrival(0, 1, 0, 2), arrival(1, 0, 0, 3)}, 0},
		{"duplicates do not make up for a gap", acked([]int64{0, 1, 2}), []Arrival{arrival(0, 0, 0, 1), arrival(0, 0, 0, 2), arrival(0, 2, 0, 3)}, 1},
		{"a record the source refused is not missing", acked([]int64{0, 2}), []Arrival{arrival(0, 0, 0, 1), arrival(0, 2, 0, 3)}, 0},
		{"the same seq in the wrong partition does not count", acked([]int64{0}, []int64{}), []Arrival{arrival(1, 0, 0, 1)}, 1},
		{"nothing arrived", acked([]int64{0, 1}, []int64{5}), nil, 3},
		{"foreign partitions ignored", acked([]int64{0}), []Arrival{arrival(0, 0, 0, 1), arrival(9, 0, 0, 1)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := countMissing(tc.acked, tc.arr); got != tc.want {
				t.Errorf("countMissing = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLatencies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arr      []Arrival
		from, to int // to 0: open
		p50, p99 time.Duration
	}{
		{"none", nil, 0, 0, 0, 0},
		{"window", []Arrival{
			arrival(0, 0, 0, 500), // before the window
			arrival(0, 1, 1000, 1100), arrival(0, 2, 900, 1200), arrival(0, 3, 1100, 1300),
			arrival(0, 4, 1000, 9000), // after it
		}, 1000, 2000, 200 * time.Millisecond, 200 * time.Millisecond},
		{"open end", []Arrival{arrival(0, 1, 1000, 1100), arrival(0, 2, 1000, 5000)}, 1000, 0, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var to time.Time
			if tc.to > 0 {
				to = at(tc.to)
			}
			p50, p99 := latencies(tc.arr, at(tc.from), to)
			if p50 != tc.p50 || p99 != tc.p99 {
				t.Errorf("latencies = %v, %v; want %v, %v", p50, p99, tc.p50, tc.p99)
			}
		})
	}
}

func TestRebalanceProperties(t *testing.T) {
	c := RebalanceConfig{Topics: 20, Partitions: 6, Session: 10 * time.Second, MM2Delay: 10 * time.Second, TasksMax: 6}
	for _, tc := range []struct {
		repl        string
		want, never []string
	}{
		{KmirrorGroup, []string{"s1->t1.topics = bench-rebal4-[0-9]+\n", "kmirror.workers = group\n", "s1.consumer.session.timeout.ms = 10000\n"},
			[]string{"exactly.once", "dedicated.mode"}},
		{KmirrorGroupEOS, []string{"kmirror.workers = group\n", "t1.exactly.once.source.support = enabled\n"}, []string{"dedicated.mode"}},
		{MM2, []string{"dedicated.mode.enable.internal.rest = true\n", "t1.session.timeout.ms = 10000\n", "t1.scheduled.rebalance.max.delay.ms = 10000\n", "tasks.max = 6\n"},
			[]string{"kmirror.workers", "exactly.once"}},
		{MM2EOS, []string{"dedicated.mode.enable.internal.rest = true\n", "t1.exactly.once.source.support = enabled\n", "s1.consumer.isolation.level = read_committed\n"},
			[]string{"kmirror.workers"}},
	} {
		p := RebalanceProperties(tc.repl, "s1", "t1", "a:9092", "b:9092", 4, c)
		for _, w := range tc.want {
			if !strings.Contains(p, w) {
				t.Errorf("%s: properties lack %q:\n%s", tc.repl, w, p)
			}
		}
		for _, n := range tc.never {
			if strings.Contains(p, n) {
				t.Errorf("%s: properties hold %q:\n%s", tc.repl, n, p)
			}
		}
	}
}

func TestRebalanceSection(t *testing.T) {
	ev := func(name string, workers int, sec float64, dups int64) RebalanceEvent {
		return RebalanceEvent{Name: name, Workers: workers, CopyingSec: sec, StallSec: 2 * sec, Duplicates: dups, LatencyP50: sec / 10, LatencyP99: sec}
	}
	res := &RebalanceResults{Meta: RebalanceMeta{Topics: 20, Partitions: 6, Rate: 3000, Workers: 2}, Runs: []RebalanceRun{
		{Replicator: KmirrorGroup, Produced: 100, Events: []RebalanceEvent{ev("start", 2, 5, 0), ev("steady", 2, 0.2, 0), ev("join", 3, 1, 0), ev("kill", 2, 10, 100), ev("stop", 1, 2, 0)}},
		{Replicator: MM2, Produced: 90, Missing: 1, Events: []RebalanceEvent{ev("start", 2, 50, 0), ev("steady", 2, 0.2, 0), ev("join", 3, 2, 0), ev("kill", 2, -1, 400), ev("stop", 1, 4, 3)}},
	}}
	s := RebalanceSection(res)
	for _, want := range []string{
		"## Scaling out and in\n",
		"| kill | 2 | 10.0 | 20.0 | 100 | not within the timeout | -2.0 | 400 |",
		"| **missing** | | 0 of 100 | | | 1 of 90 | | |",
		"| kill | 1.00 / 10.00 | -0.10 / -1.00 |",
		"kmirror-group / mm2: start: copying again 0.10, longest stall 0.10, duplicates both 0; join: copying again 0.50, longest stall 0.50, duplicates both 0; " +
			"kill: copying again n/a, longest stall n/a, duplicates 0.25; stop: copying again 0.50, longest stall 0.50, duplicates 0.00.",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "kmirror-group-eos /") {
		t.Errorf("section compares a pair without runs:\n%s", s)
	}
}

func TestLongestStall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arr      []Arrival
		parts    int
		from, to int
		want     time.Duration
		slowest  int
	}{
		{"steady", []Arrival{arrival(0, 0, 0, 100), arrival(1, 0, 0, 150), arrival(0, 1, 0, 300), arrival(1, 1, 0, 350), arrival(0, 2, 0, 500), arrival(1, 2, 0, 550)},
			2, 100, 600, 200 * time.Millisecond, 0},
		{"a pause", []Arrival{arrival(0, 0, 0, 100), arrival(1, 0, 0, 150), arrival(0, 1, 0, 200), arrival(1, 1, 0, 2150), arrival(0, 2, 0, 2200)},
			2, 100, 2300, 2 * time.Second, 1}, // a tie: the first to reach it
		{"duplicates do not end a stall", []Arrival{arrival(0, 0, 0, 100), arrival(0, 1, 0, 200), arrival(0, 0, 0, 1000), arrival(0, 1, 0, 1100), arrival(0, 2, 0, 3200)},
			1, 100, 3300, 3 * time.Second, 0},
		{"a partition with nothing new stalls to the end", []Arrival{arrival(0, 0, 0, 100), arrival(1, 0, 0, 150), arrival(0, 1, 0, 200)},
			2, 100, 1150, time.Second, 1},
		{"what came before from counts as seen, not as a stall", []Arrival{arrival(0, 0, 0, 50), arrival(0, 0, 0, 120), arrival(0, 1, 0, 300)},
			1, 100, 400, 200 * time.Millisecond, 0},
		{"arrivals after to are outside", []Arrival{arrival(0, 0, 0, 100), arrival(0, 1, 0, 5000)}, 1, 100, 400, 300 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, slowest := longestStall(tc.arr, tc.parts, at(tc.from), at(tc.to))
			if d != tc.want || slowest != tc.slowest {
				t.Errorf("longestStall = %v, %d; want %v, %d", d, slowest, tc.want, tc.slowest)
			}
		})
	}
}

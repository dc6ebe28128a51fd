package datapath

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
)

func TestLane(t *testing.T) {
	for _, tt := range []struct {
		topics, parts, lanes int
	}{{1, 2, 2}, {4, 8, 2}, {4, 8, 4}, {3, 7, 3}, {1, 1, 1}, {2, 5, 8}} {
		count := make([]int, tt.lanes)
		for i := range tt.topics {
			per := make([]int, tt.lanes)
			for p := range tt.parts {
				l := Lane(progress.TP{Topic: fmt.Sprintf("topic-%d", i), Partition: int32(p)}, tt.lanes)
				if l < 0 || l >= tt.lanes {
					t.Fatalf("lane %d of %d", l, tt.lanes)
				}
				per[l]++
				count[l]++
			}
			// Within a topic, lanes differ by at most one partition.
			if slices.Max(per)-slices.Min(per) > 1 {
				t.Errorf("%+v: topic %d spreads %v", tt, i, per)
			}
		}
		t.Logf("%+v: %v", tt, count)
	}
}

func TestOrigin(t *testing.T) {
	for _, tt := range []struct {
		name string
		hs   []kgo.RecordHeader
		want string
		has  bool
	}{
		{"none", nil, "", false},
		{"other", []kgo.RecordHeader{{Key: "k", Value: []byte("v")}}, "", false},
		{"set", []kgo.RecordHeader{{Key: "k"}, {Key: OriginHeader, Value: []byte("A")}}, "A", true},
		{"empty", []kgo.RecordHeader{{Key: OriginHeader}}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, has := Origin(tt.hs)
			if got != tt.want || has != tt.has {
				t.Errorf("Origin = %q, %v; want %q, %v", got, has, tt.want, tt.has)
			}
		})
	}
}

func TestLedger(t *testing.T) {
	for _, tt := range []struct {
		name    string
		steps   func(l *Ledger)
		done    int64
		include bool
	}{
		{"new", func(*Ledger) {}, -1, false},
		{"skip", func(l *Ledger) { l.Skip(4) }, 4, true},
		{"skip never goes back", func(l *Ledger) { l.Skip(9); l.Skip(3) }, 9, true},
		{"restart at 0 is saved", func(l *Ledger) { l.Skip(9); l.Restart(0) }, -1, true},
		{"restart lower", func(l *Ledger) { l.Skip(9); l.Restart(5) }, 4, true},
		{"skip after restart", func(l *Ledger) { l.Restart(0); l.Skip(2) }, 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger()
			tt.steps(&l)
			done, ok := l.Position()
			if done != tt.done || ok != tt.include {
				t.Errorf("Position = %d, %v; want %d, %v", done, ok, tt.done, tt.include)
			}
		})
	}
}

func TestGapOf(t *testing.T) {
	for _, tt := range []struct {
		want       int64
		start, end int64
		kind       int
	}{
		{5, 0, 10, noGap},
		{0, 0, 0, noGap},
		{10, 0, 10, noGap},
		{3, 7, 10, removed},
		{12, 0, 10, truncated},
		{12, 3, 5, truncated},
	} {
		if got := gapOf(tt.want, LogRange{tt.start, tt.end}); got != tt.kind {
			t.Errorf("gapOf(%d, [%d, %d]) = %d, want %d", tt.want, tt.start, tt.end, got, tt.kind)
		}
	}
}

func TestStateOf(t *testing.T) {
	for _, tt := range []struct {
		stopped, restarting, paused bool
		want                        string
	}{
		{false, false, false, Running},
		{false, false, true, Paused},
		{false, true, true, Restarting},
		{true, true, true, Stopped},
	} {
		if got := StateOf(tt.stopped, tt.restarting, tt.paused); got != tt.want {
			t.Errorf("StateOf(%v, %v, %v) = %s, want %s", tt.stopped, tt.restarting, tt.paused, got, tt.want)
		}
	}
}

func TestSortStatus(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []PartitionStatus
		want []string
	}{
		{"empty", nil, nil},
		{"by topic then partition", []PartitionStatus{{Topic: "b", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "a", Partition: 10}, {Topic: "a", Partition: 1}},
			[]string{"a-1", "a-2", "a-10", "b-0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			SortStatus(tt.in)
			var got []string
			for _, st := range tt.in {
				got = append(got, fmt.Sprintf("%s-%d", st.Topic, st.Partition))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTPs(t *testing.T) {
	got := TPs(map[string][]int32{"a": {0, 1}, "b": {3}})
	slices.SortFunc(got, func(x, y progress.TP) int {
		if x.Topic != y.Topic {
			if x.Topic < y.Topic {
				return -1
			}
			return 1
		}
		return int(x.Partition - y.Partition)
	})
	want := []progress.TP{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 3}}
	if !slices.Equal(got, want) {
		t.Errorf("TPs = %v, want %v", got, want)
	}
}

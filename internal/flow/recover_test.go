package flow

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// TestPairUp: in exactly-once mode a recovered position goes past the
// sync over every target record that is a copy of the next source
// record, and stops at the first that is not; the sync's own records
// must pair first.
func TestPairUp(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_000)
	rec := func(off int64, v string) *kgo.Record {
		return &kgo.Record{Offset: off, Key: []byte("k"), Value: []byte(v), Timestamp: ts}
	}
	// The source from the sync's upstream offset 10 on; 12 is a gap (a
	// commit marker).
	src := []*kgo.Record{rec(10, "a"), rec(11, "b"), rec(13, "c"), rec(14, "d")}
	withHeader := rec(31, "b")
	withHeader.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}
	otherTime := rec(31, "b")
	otherTime.Timestamp = ts.Add(time.Millisecond)
	nullValue := &kgo.Record{Offset: 11, Key: []byte("k"), Timestamp: ts}
	emptyValue := &kgo.Record{Offset: 31, Key: []byte("k"), Value: []byte{}, Timestamp: ts}
	for _, tt := range []struct {
		name string
		src  []*kgo.Record
		tgt  []*kgo.Record
		want int64
	}{
		{"all copied", src, []*kgo.Record{rec(30, "a"), rec(31, "b"), rec(33, "c"), rec(34, "d")}, 14},
		{"some copied", src, []*kgo.Record{rec(30, "a"), rec(31, "b")}, 11},
		{"only the sync's record", src, []*kgo.Record{rec(30, "a")}, 10},
		{"the target ends first", src, nil, 10},
		{"the source ends first", src[:2], []*kgo.Record{rec(30, "a"), rec(31, "b"), rec(32, "c")}, 11},
		{"stops at the first difference", src, []*kgo.Record{rec(30, "a"), rec(31, "b"), rec(32, "x"), rec(33, "d")}, 11},
		{"a header more differs", src, []*kgo.Record{rec(30, "a"), withHeader}, 10},
		{"another timestamp differs", src, []*kgo.Record{rec(30, "a"), otherTime}, 10},
		{"a null value is not an empty one", []*kgo.Record{rec(10, "a"), nullValue}, []*kgo.Record{rec(30, "a"), emptyValue}, 10},
		{"the sync's record differs", src, []*kgo.Record{rec(30, "z"), rec(31, "b")}, 10},
		{"the target does not start at the sync", src, []*kgo.Record{rec(29, "a"), rec(30, "b")}, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := func(rs []*kgo.Record) func() *kgo.Record {
				return func() *kgo.Record {
					if len(rs) == 0 {
						return nil
					}
					r := rs[0]
					rs = rs[1:]
					return r
				}
			}
			s := wire.OffsetSync{Topic: "t", UpstreamOffset: 10, DownstreamOffset: 30}
			if got := pairUp(s, next(tt.src), next(tt.tgt)); got != tt.want {
				t.Errorf("pairUp = %d, want %d", got, tt.want)
			}
		})
	}
}

package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func recs(ids ...int) []Item {
	out := make([]Item, len(ids))
	for i, id := range ids {
		r := &kgo.Record{Offset: int64(i), Key: []byte(fmt.Sprint("k", id)), Value: []byte(fmt.Sprint("v", id)), Timestamp: time.UnixMilli(int64(id))}
		out[i] = Of(r, "")
	}
	return out
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name     string
		src, dst []int
		want     Result
		ok       bool
	}{
		{"identical", []int{1, 2, 3}, []int{1, 2, 3}, Result{Source: 3, Target: 3, Matched: 3}, true},
		{"crash re-copy", []int{1, 2, 3, 4}, []int{1, 2, 3, 2, 3, 4}, Result{Source: 4, Target: 6, Matched: 4, Duplicates: 2}, true},
		{"not yet copied", []int{1, 2, 3}, []int{1, 2}, Result{Source: 3, Target: 2, Matched: 2, Missing: 1}, false},
		{"hole", []int{1, 2, 3, 4}, []int{1, 4}, Result{Source: 4, Target: 2, Matched: 2, Missing: 2}, false},
		{"foreign record", []int{1, 2}, []int{1, 99, 2}, Result{Source: 2, Target: 3, Matched: 2, Foreign: 1}, false},
		{"older than the source log", []int{5, 6}, []int{3, 4, 5, 6}, Result{Source: 2, Target: 4, Matched: 2, Older: 2}, true},
		{"empty", nil, nil, Result{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(recs(tt.src...), recs(tt.dst...))
			got.Problem = ""
			if got != tt.want || got.OK() != tt.ok {
				t.Errorf("got %+v (ok %v), want %+v (ok %v)", got, got.OK(), tt.want, tt.ok)
			}
		})
	}
}

func TestIgnoredHeaderAndNulls(t *testing.T) {
	a := &kgo.Record{Key: nil, Value: []byte{}, Timestamp: time.UnixMilli(1)}
	b := &kgo.Record{Key: nil, Value: []byte{}, Timestamp: time.UnixMilli(1), Headers: []kgo.RecordHeader{{Key: "kmirror.origin", Value: []byte("A")}}}
	if hash(a, "kmirror.origin") != hash(b, "kmirror.origin") {
		t.Error("the ignored header changed the hash")
	}
	c := &kgo.Record{Key: nil, Value: nil, Timestamp: time.UnixMilli(1)}
	if hash(a, "") == hash(c, "") {
		t.Error("a tombstone hashes like an empty value")
	}
}

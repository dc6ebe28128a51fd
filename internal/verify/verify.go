// Package verify compares a source partition with its remote copy record
// by record, tolerating the duplicates that at-least-once replication may
// leave, so that an operator can prove a mirror complete.
package verify

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Result is the comparison of one partition.
type Result struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Remote     string `json:"remote"`
	Source     int    `json:"source_records"` // compared source records
	Target     int    `json:"target_records"`
	Matched    int    `json:"matched"`
	Duplicates int    `json:"duplicates"` // target records that repeat a matched one
	Older      int    `json:"older"`      // target records from before the source's log start
	Missing    int    `json:"missing"`    // source records not on the target
	Foreign    int    `json:"foreign"`    // target records that match no source record
	Problem    string `json:"problem,omitempty"`
}

// OK reports whether every source record is on the target and the target
// holds nothing else than copies.
func (r Result) OK() bool { return r.Missing == 0 && r.Foreign == 0 }

// lookahead bounds how far a gap on the target is searched for.
const lookahead = 1000

// Item is a record reduced to what the comparison needs.
type Item struct {
	Hash   uint64
	Offset int64
}

// Of reduces a record; ignoreHeader names a header kmirror may add (the
// provenance header), left out of the comparison.
func Of(r *kgo.Record, ignoreHeader string) Item {
	return Item{Hash: hash(r, ignoreHeader), Offset: r.Offset}
}

// Compare matches target records against source records, both in offset
// order. Source records must all be ones the replicator reported copied.
func Compare(src, dst []Item) Result {
	s := make([]uint64, len(src))
	for i, r := range src {
		s[i] = r.Hash
	}
	res := Result{Source: len(src), Target: len(dst)}
	matched := make(map[uint64]bool, len(src))
	i := 0
	for _, r := range dst {
		h := r.Hash
		switch {
		case i < len(s) && h == s[i]:
			res.Matched++
			matched[h] = true
			i++
		case matched[h]:
			res.Duplicates++
		case i == 0 && !contains(s, h):
			res.Older++ // copied before retention removed it at the source
		default:
			k := index(s[i:min(len(s), i+lookahead)], h)
			if k < 0 {
				res.Foreign++
				if res.Problem == "" {
					res.Problem = fmt.Sprintf("target offset %d matches no source record", r.Offset)
				}
				continue
			}
			res.Missing += k
			if res.Problem == "" {
				res.Problem = fmt.Sprintf("source offsets %d..%d are not on the target", src[i].Offset, src[i+k-1].Offset)
			}
			for _, x := range s[i : i+k+1] {
				matched[x] = true
			}
			res.Matched++
			i += k + 1
		}
	}
	if i < len(s) {
		res.Missing += len(s) - i
		if res.Problem == "" {
			res.Problem = fmt.Sprintf("source offsets %d..%d are not on the target", src[i].Offset, src[len(s)-1].Offset)
		}
	}
	return res
}

func contains(s []uint64, h uint64) bool { return index(s, h) >= 0 }

func index(s []uint64, h uint64) int {
	for i, x := range s {
		if x == h {
			return i
		}
	}
	return -1
}

// hash covers key, value (null apart from empty), headers and timestamp.
func hash(r *kgo.Record, ignoreHeader string) uint64 {
	h := fnv.New64a()
	var n [8]byte
	bytes := func(b []byte) {
		if b == nil {
			binary.BigEndian.PutUint64(n[:], ^uint64(0))
			h.Write(n[:])
			return
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	bytes(r.Key)
	bytes(r.Value)
	for _, hd := range r.Headers {
		if hd.Key == ignoreHeader {
			continue
		}
		bytes([]byte(hd.Key))
		bytes(hd.Value)
	}
	binary.BigEndian.PutUint64(n[:], uint64(r.Timestamp.UnixMilli()))
	h.Write(n[:])
	return h.Sum64()
}

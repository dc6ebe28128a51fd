package flow

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/wire"
)

// In exactly-once mode a position recovered from an offset sync (U, D)
// need not copy anything twice. The target's committed records from D on
// are copies of the source's committed records from U on, in order, none
// missing and none twice: one owner at a time writes a partition, and
// each resumes after the last record it finds committed. So walkOn reads
// both partitions from the sync on and pairs them, record by record; the
// last source record paired is the position. It stops at the first pair
// that differs, at the end of either partition, or after walkTime, and
// keeps what it paired: every record it passes is on the target.
//
// At-least-once, the target may hold records twice (copied again after a
// crash), and a record copied twice could pair with a later source record
// of the same content: a skip. So there the sync's position is kept.

// walkTime bounds walkOn for one partition.
const walkTime = 30 * time.Second

// walkIdle is how long a read below the end may bring nothing (a broker
// slow or failing) before walkOn stops there: stopping early costs
// records copied twice, never one skipped.
const walkIdle = 10 * time.Second

// walkOn returns the source offset of the last record of k whose copy is
// on the target, from sync s on; s.UpstreamOffset if it cannot tell.
func (r *running) walkOn(ctx context.Context, k candidate, s wire.OffsetSync) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, walkTime)
	defer cancel()
	tgt, err := openPartition(ctx, r.tgtConn, k.remote, k.tp.Partition, s.DownstreamOffset)
	if err != nil {
		return s.UpstreamOffset, fmt.Errorf("reading %s-%d on the target: %w", k.remote, k.tp.Partition, err)
	}
	defer tgt.close()
	src, err := openPartition(ctx, r.srcConn, k.tp.Topic, k.tp.Partition, s.UpstreamOffset)
	if err != nil {
		return s.UpstreamOffset, fmt.Errorf("reading %s-%d on the source: %w", k.tp.Topic, k.tp.Partition, err)
	}
	defer src.close()
	return pairUp(s, src.next, tgt.next), nil
}

// pairUp pairs the records src and tgt return, from the sync's on, and
// returns the source offset of the last pair that matched. The first
// pair must be the sync's own records (offsets U and D, same content);
// else nothing is paired and U is returned.
func pairUp(s wire.OffsetSync, src, tgt func() *kgo.Record) int64 {
	last := s.UpstreamOffset
	for first := true; ; first = false {
		t := tgt()
		if t == nil {
			return last
		}
		u := src()
		if u == nil || !sameRecord(u, t) {
			return last
		}
		if first && (u.Offset != s.UpstreamOffset || t.Offset != s.DownstreamOffset) {
			return last
		}
		last = u.Offset
	}
}

// sameRecord reports whether t is a copy of u: key, value, headers and
// timestamp.
func sameRecord(u, t *kgo.Record) bool {
	if !bytes.Equal(u.Key, t.Key) || !bytes.Equal(u.Value, t.Value) ||
		(u.Key == nil) != (t.Key == nil) || (u.Value == nil) != (t.Value == nil) ||
		!u.Timestamp.Equal(t.Timestamp) || len(u.Headers) != len(t.Headers) {
		return false
	}
	for i, h := range u.Headers {
		if h.Key != t.Headers[i].Key || !bytes.Equal(h.Value, t.Headers[i].Value) {
			return false
		}
	}
	return true
}

// partReader reads one partition read_committed, from an offset up to its
// last stable offset at open.
type partReader struct {
	ctx context.Context
	cl  *kgo.Client
	end int64 // last stable offset at open
	pos int64 // the offset after the last record returned
	buf []*kgo.Record
}

func openPartition(ctx context.Context, conn []kgo.Opt, topic string, partition int32, from int64) (*partReader, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, conn...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		// Commit and abort markers come back too, so the reader knows
		// when it reached the end, which a partition written in
		// transactions ends with, without waiting for walkIdle.
		kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	o, _ := lso.Lookup(topic, partition)
	return &partReader{ctx: ctx, cl: cl, end: o.Offset, pos: from}, nil
}

// next returns the next data record below the end, or nil at the end, on
// an error, or when a read brings nothing for walkIdle.
func (p *partReader) next() *kgo.Record {
	for p.pos < p.end {
		if len(p.buf) == 0 {
			ctx, cancel := context.WithTimeout(p.ctx, walkIdle)
			p.buf = p.cl.PollFetches(ctx).Records()
			cancel()
			if len(p.buf) == 0 {
				return nil // walkIdle passed, or an error: stop here
			}
		}
		rec := p.buf[0]
		p.buf = p.buf[1:]
		if rec.Offset >= p.end {
			break
		}
		p.pos = rec.Offset + 1
		if !rec.Attrs.IsControl() {
			return rec
		}
	}
	p.buf, p.pos = nil, p.end
	return nil
}

func (p *partReader) close() { p.cl.Close() }

package progress

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stableFor bounds how long CatchUpStable waits for transactions open on
// the topic to end: more than a transaction lives (kgo's default
// transaction timeout is 40 s).
const stableFor = 90 * time.Second

// CatchUpStable is CatchUp for exactly-once with several workers: it first
// waits until every transaction that is open on the topic now has ended
// (the last stable offset of each partition reached today's high
// watermark), so that progress another worker committed after a
// transaction still open is read too, not left beyond the last stable
// offset. Call it after fencing the previous owners of the partitions
// about to be read.
func (s *Store) CatchUpStable(ctx context.Context) error {
	if err := s.waitStable(ctx); err != nil {
		return err
	}
	return s.CatchUp(ctx)
}

func (s *Store) waitStable(ctx context.Context) error {
	cl, err := kgo.NewClient(s.connect...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	hwm, err := adm.ListEndOffsets(ctx, s.topic)
	if err == nil {
		err = hwm.Error()
	}
	if err != nil {
		return fmt.Errorf("listing end offsets of %s: %w", s.topic, err)
	}
	deadline := time.Now().Add(stableFor)
	for {
		lso, err := adm.ListCommittedOffsets(ctx, s.topic)
		if err == nil {
			err = lso.Error()
		}
		behind := 0
		if err == nil {
			hwm.Each(func(o kadm.ListedOffset) {
				if l, ok := lso.Lookup(o.Topic, o.Partition); !ok || l.Offset < o.Offset {
					behind++
				}
			})
			if behind == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("transactions on %s did not end within %s (%d partitions behind, err %v)", s.topic, stableFor, behind, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

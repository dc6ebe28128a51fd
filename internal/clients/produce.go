package clients

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceWait produces recs and waits until the target acknowledged every
// one (nil), one failed (the first error), or ctx ended (ctx.Err()).
// ProduceSync would wait for a request already sent however long the
// target takes (an idempotent producer cannot cancel a record in flight):
// a stopping flow must not wait on a write, so the wait ends with ctx and
// the records are left to the client, which fails them when it closes.
func ProduceWait(ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) error {
	res := make(chan error, len(recs)) // late promises never block
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { res <- err })
	}
	var first error
	for range recs {
		select {
		case err := <-res:
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

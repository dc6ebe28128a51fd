package verify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/readlog"
)

// Flow compares every partition of fc with saved progress (source topics
// matching only, nil for all): the source records up to the saved progress
// with the remote partition. With tail > 0 only the source records among
// the last tail offsets up to the saved progress are compared, against the
// end of the remote partition (target records before them count as Older).
func Flow(ctx context.Context, fc *config.Flow, only *regexp.Regexp, tail int64) ([]Result, error) {
	src, err := clients.Build(clients.ID(fc.Name(), "verify-source-consumer"), clients.Consumer, fc.SourceConsumer)
	if err != nil {
		return nil, fmt.Errorf("source cluster %s: %w", fc.Source, err)
	}
	dst, err := clients.Build(clients.ID(fc.Name(), "verify-target-consumer"), clients.Consumer, fc.TargetConsumer)
	if err != nil {
		return nil, fmt.Errorf("target cluster %s: %w", fc.Target, err)
	}
	pol := fc.Policy
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	saved, err := progress.Read(ctx, dst, fc.OffsetStorageTopic, fc.Source, quiet)
	if err != nil {
		return nil, fmt.Errorf("target cluster %s: %w", fc.Target, err)
	}
	var tps []progress.TP
	for tp, off := range saved {
		if off >= 0 && (only == nil || only.MatchString(tp.Topic)) {
			tps = append(tps, tp)
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var out []Result
	for _, tp := range tps {
		remote := pol.FormatRemoteTopic(fc.Source, tp.Topic)
		srcFirst, dstFirst := int64(-1), int64(-1)
		if tail > 0 {
			srcFirst = saved[tp] - tail + 1
			ends, err := readlog.Ends(ctx, dst, remote)
			if err != nil {
				return nil, fmt.Errorf("target cluster %s: %w", fc.Target, err)
			}
			if e, ok := ends.Lookup(remote, tp.Partition); ok {
				// Room for duplicates and transaction markers.
				dstFirst = e.Offset - 2*tail - 100
			}
		}
		var s, d []Item
		if err := readlog.Range(ctx, src, tp.Topic, tp.Partition, srcFirst, saved[tp], func(r *kgo.Record) {
			s = append(s, Of(r, datapath.OriginHeader))
		}); err != nil {
			return nil, fmt.Errorf("source cluster %s: %w", fc.Source, err)
		}
		if err := readlog.Range(ctx, dst, remote, tp.Partition, dstFirst, -1, func(r *kgo.Record) {
			d = append(d, Of(r, datapath.OriginHeader))
		}); err != nil {
			return nil, fmt.Errorf("target cluster %s: %w", fc.Target, err)
		}
		r := Compare(s, d)
		r.Topic, r.Partition, r.Remote = tp.Topic, tp.Partition, remote
		out = append(out, r)
	}
	return out, nil
}

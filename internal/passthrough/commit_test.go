package passthrough

import (
	"log/slog"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestChangedPositions: Commit hands the progress store the positions
// that moved since the last save, whichever way they moved (acknowledged
// batches, skipped offsets), and nothing for a partition that did not
// move.
func TestChangedPositions(t *testing.T) {
	tp := progress.TP{Topic: "t", Partition: 0}
	for _, tt := range []struct {
		name string
		move func(pl *Pipeline, p *partition)
		want map[progress.TP]int64
	}{
		{"nothing", func(*Pipeline, *partition) {}, nil},
		{"acknowledged", func(pl *Pipeline, p *partition) {
			b := &outBatch{raw: make([]byte, 10), first: 10, last: 14, count: 5, advanceTo: -1, state: stSending}
			p.queue, p.queued, p.inflight = []*outBatch{b}, 10, 1
			pl.buffered += 10
			pl.mu.Unlock()
			pl.produced(&sending{p: p, b: b, pid: pl.pid}, &kmsg.ProduceResponseTopicPartition{BaseOffset: 100}, nil)
			pl.mu.Lock()
		}, map[progress.TP]int64{tp: 14}},
		{"skipped", func(pl *Pipeline, p *partition) { pl.skipLocked(p, 12) }, map[progress.TP]int64{tp: 12}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pl := New(Config{SourceAlias: "A", TargetAlias: "B", Progress: new(progress.Store), Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
			pl.Assign([]datapath.Partition{{TP: tp, Remote: "A.t"}})
			pl.mu.Lock()
			p := pl.parts[tp]
			p.Skip(9) // copied up to 9 and saved
			pl.moved[p] = struct{}{}
			pl.mu.Unlock()
			if got := pl.changedPositions(); !maps.Equal(got, map[progress.TP]int64{tp: 9}) {
				t.Fatalf("first commit: %v, want t-0 at 9", got)
			}
			pl.mu.Lock()
			p.committed, p.hasCommitted = 9, true
			tt.move(pl, p)
			pl.mu.Unlock()
			if got := pl.changedPositions(); !maps.Equal(got, tt.want) {
				t.Errorf("changed %v, want %v", got, tt.want)
			}
			if got := pl.changedPositions(); !maps.Equal(got, tt.want) {
				t.Errorf("changed again before a commit: %v, want %v", got, tt.want)
			}
		})
	}
}

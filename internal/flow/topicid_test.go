package flow

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// rewindEngine records the topics it was asked to rewind.
type rewindEngine struct {
	datapath.Engine
	rewound []string
}

func (e *rewindEngine) Rewind(_ context.Context, topic string) error {
	e.rewound = append(e.rewound, topic)
	return nil
}

// TestCheckTopicID: a source topic found under a new ID is rewound and
// its progress reset, and the re-creation is logged whether or not any
// progress of the old topic was saved (the e2e test re-created a topic
// before the first save, and nothing said so).
func TestCheckTopicID(t *testing.T) {
	for _, tt := range []struct {
		name  string
		saved bool
		want  string
	}{
		{"progress saved", true, "level=ERROR msg=\"source topic was deleted and re-created: records of the old topic after the last copied offset are lost"},
		{"no progress saved yet", false, "level=WARN msg=\"source topic was deleted and re-created before any of its progress was saved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, cl := testkafka.Fake(t, kfake.NumBrokers(1))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			store, err := progress.Open(ctx, kadm.NewClient(cl), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, cl,
				progress.Options{Topic: "mm2-offsets.A.internal", Source: "A", Partitions: 1}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if err := store.SaveTopicID(ctx, "t", "old-id"); err != nil {
				t.Fatal(err)
			}
			if tt.saved {
				if err := store.Save(ctx, map[progress.TP]int64{{Topic: "t", Partition: 0}: 15}); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			eng := &rewindEngine{}
			r := &running{f: &Flow{cfg: &config.Flow{Source: "A", Target: "B"}, m: metrics.New(), log: slog.New(slog.NewTextHandler(&logs, nil))}, store: store, rep: eng}
			if err := r.checkTopicID(ctx, topicsync.Topic{Name: "t", ID: "new-id", Partitions: 2, Hosted: 2}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("log:\n%s\nwant a line with %q", logs.String(), tt.want)
			}
			if len(eng.rewound) != 1 || eng.rewound[0] != "t" {
				t.Errorf("rewound %v, want [t]", eng.rewound)
			}
			if id, _ := store.TopicID("t"); id != "new-id" {
				t.Errorf("topic ID saved %q, want new-id", id)
			}
			if off, ok := store.Get(progress.TP{Topic: "t", Partition: 0}); ok && off != -1 {
				t.Errorf("progress of t-0 is %d after the rewind, want -1 (reset)", off)
			}
		})
	}
}

package flow

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestRecoverWalksOn, on real brokers: a partition without progress whose
// last offset sync (49, 49) is behind what its remote partition holds
// (copies of source records 0-79; the syncs of an older writer, or MM2's,
// need not be the newest) resumes in exactly-once mode after record 79,
// the last one whose copy is on the target (past an aborted transaction
// on the source and commit markers on the target), so nothing is copied
// twice;
// at-least-once it resumes after the sync (the target may hold records
// twice, so pairing could skip).
func TestRecoverWalksOn(t *testing.T) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	for _, tt := range []struct {
		name string
		eos  bool
		want int64
	}{
		{"exactly-once", true, 83},
		{"at-least-once", false, 49},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			src, dst := fmt.Sprintf("S%x", time.Now().UnixNano()&0xffffff), fmt.Sprintf("D%x", time.Now().UnixNano()&0xffffff)
			topic := testkafka.Topic(t, "walk")
			remote := src + "." + topic
			body := fmt.Sprintf("clusters = %s, %s\n%s.bootstrap.servers = %s\n%s.bootstrap.servers = %s\n%s->%s.enabled = true\n",
				src, dst, src, a.Bootstrap[0], dst, b.Bootstrap[0], src, dst) +
				"replication.factor = 1\noffset-syncs.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n" +
				"checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
			if tt.eos {
				body += dst + ".exactly.once.source.support = enabled\n"
			}
			fc := planFlow(t, body)
			t.Cleanup(func() {
				_, _ = b.Admin(t).DeleteTopics(context.Background(), remote, fc.OffsetStorageTopic, fc.OffsetSyncsTopic())
			})
			a.CreateTopic(t, topic, 1, nil)
			b.CreateTopic(t, remote, 1, nil)
			at := time.UnixMilli(1_700_000_000_000)
			var recs, copies []*kgo.Record
			for i := range 100 {
				r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, "v-%d", i),
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}, Timestamp: at.Add(time.Duration(i) * time.Millisecond)}
				recs = append(recs, r)
				if i < 80 {
					c := *r
					c.Topic = remote
					copies = append(copies, &c)
				}
			}
			// On the source, an aborted transaction between records 59
			// and 60 (offsets 60-63 with its marker: record 79 is at
			// 83); on the target, the copies in two transactions, each
			// followed by its commit marker (the partition ends with one).
			a.Produce(t, recs[:60]...)
			var aborted []*kgo.Record
			for i := range 3 {
				aborted = append(aborted, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "aborted-%d", i)})
			}
			inTxn(t, a, "src-"+topic, false, aborted...)
			a.Produce(t, recs[60:]...)
			inTxn(t, b, "dst-"+topic, true, copies[:50]...)
			inTxn(t, b, "dst-"+topic, true, copies[50:]...)

			r := newRunning(t, fc, slog.New(slog.DiscardHandler))
			if err := r.connect(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r.build(ctx); err != nil {
				t.Fatal(err)
			}
			s := wire.OffsetSync{Topic: topic, Partition: 0, UpstreamOffset: 49, DownstreamOffset: 49}
			key, err := s.Key()
			if err != nil {
				t.Fatal(err)
			}
			value, err := s.Value()
			if err != nil {
				t.Fatal(err)
			}
			b.Produce(t, &kgo.Record{Topic: fc.OffsetSyncsTopic(), Partition: 0, Key: key, Value: value})

			tp := progress.TP{Topic: topic, Partition: 0}
			if err := r.recover(ctx, []candidate{{tp: tp, remote: remote}}); err != nil {
				t.Fatal(err)
			}
			if got, ok := r.store.Get(tp); !ok || got != tt.want {
				t.Errorf("recovered position %d (saved %v), want %d", got, ok, tt.want)
			}
		})
	}
}

// inTxn writes recs to c in one transaction of transactional ID id,
// committed or aborted.
func inTxn(t *testing.T, c *testkafka.Cluster, id string, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap...), kgo.TransactionalID(id), kgo.UnknownTopicRetries(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

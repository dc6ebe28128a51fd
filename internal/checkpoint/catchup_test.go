package checkpoint

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestCheckpointsNeverGoBack: a checkpoint another worker wrote while
// this one was stopped (it led the flow meanwhile, with newer offset
// syncs) is the last one for this worker too: it does not write a lower
// translation of the same offset after it. The robustness run found a
// checkpoint going from 188 -> 117 back to 188 -> 92 after a SIGSTOP
// (bug 7 in docs/robustness.md). The topic is read only when another
// writer wrote to it, not every round.
func TestCheckpointsNeverGoBack(t *testing.T) {
	src, srcCl := testkafka.Fake(t)
	dst, dstCl := testkafka.Fake(t)
	f := testFlow(src.ListenAddrs(), dst.ListenAddrs(), "exact")
	syncs := f.OffsetSyncsTopic()
	ctx := context.Background()
	dadm, sadm := kadm.NewClient(dstCl), kadm.NewClient(srcCl)
	for _, topic := range []string{syncs, "A.t", "A.checkpoints.internal"} {
		if _, err := dadm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sadm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	// This worker's syncs: t-0 copied 0..99 -> 0..99.
	produce(t, dstCl, syncRec(syncs, wire.OffsetSync{Topic: "t", UpstreamOffset: 0, DownstreamOffset: 0}),
		syncRec(syncs, wire.OffsetSync{Topic: "t", UpstreamOffset: 100, DownstreamOffset: 99}))

	task, err := New(Config{Flow: f, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- task.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	testwait.For(t, 15*time.Second, "the task ready", task.store.Ready)
	// Another leader's checkpoint of offset 100, written after this task
	// read the topic: 100 -> 150 (its syncs knew of a later copy).
	foreign := wire.Checkpoint{Group: "g", Topic: "A.t", Partition: 0, UpstreamOffset: 100, DownstreamOffset: 150, Metadata: "other"}
	key, value, err := wire.Encode(foreign)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, dstCl, &kgo.Record{Topic: "A.checkpoints.internal", Partition: 0, Key: key, Value: value})
	// The group commits 100 on the source; this task translates it to 99.
	o := make(kadm.Offsets)
	o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 100, LeaderEpoch: -1, Metadata: "m"})
	if _, err := sadm.CommitOffsets(ctx, "g", o); err != nil {
		t.Fatal(err)
	}
	// A second group shows that the task emitted since.
	o2 := make(kadm.Offsets)
	o2.Add(kadm.Offset{Topic: "t", Partition: 0, At: 50, LeaderEpoch: -1})
	if _, err := sadm.CommitOffsets(ctx, "later", o2); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the other group's checkpoint", func() bool {
		return readCheckpoints(t, dstCl, "A.checkpoints.internal")["later/A.t"].DownstreamOffset == 50
	})
	if got := readCheckpoints(t, dstCl, "A.checkpoints.internal")["g/A.t"]; got.DownstreamOffset != 150 || got.Metadata != "other" {
		t.Errorf("last checkpoint of g is %+v; want the other worker's 100 -> 150 kept, not one going back to 99", got)
	}
	// The task's own checkpoints need no read of the topic: it is read
	// once at start and once for the other worker's checkpoint.
	for _, at := range []int64{60, 70, 80} {
		o2 := make(kadm.Offsets)
		o2.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		if _, err := sadm.CommitOffsets(ctx, "later", o2); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 15*time.Second, fmt.Sprintf("the checkpoint of offset %d", at), func() bool {
			return readCheckpoints(t, dstCl, "A.checkpoints.internal")["later/A.t"].DownstreamOffset == at
		})
	}
	task.mu.Lock()
	reads := task.reads
	task.mu.Unlock()
	if reads != 2 {
		t.Errorf("the checkpoints topic was read %d times; want 2 (at start, and for the other worker's checkpoint), not once per round", reads)
	}
}

package replicate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestGroupReassignedWhileRestarting: in group mode a produce error pauses
// the partition on the group consumer and resumes it a second later. If the
// group takes the partition away and hands it back within that second, the
// delayed resume belongs to the old partition state and is skipped; the
// partition, assigned again, must still be fetched (franz-go keeps a pause
// across assignments).
func TestGroupReassignedWhileRestarting(t *testing.T) {
	f := newFakePair(t)
	const topic = "reassigned"
	f.topics(t, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, _ := twoPartitionReplicator(ctx, t, f, topic, true, false)

	// The target refuses the first produce (the copied record) once.
	var refused atomic.Bool
	f.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		if refused.Swap(true) {
			return nil, nil, false
		}
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.MessageTooLarge.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	tp := progress.TP{Topic: topic, Partition: 0}
	part := []datapath.Partition{{TP: tp, Remote: "A." + topic}}
	r.Assign(part)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, 5*time.Second) }()
	defer func() { stop(); <-done }()

	produce(t, f.srcOpts, topic, 1, 0, 1)
	paused := func() bool { return len(r.cfg.Source.PauseFetchPartitions(nil)[topic]) > 0 }
	waitTrue(t, paused, "the partition paused after the refused produce")
	// The group takes the partition away and gives it back at once.
	if err := r.Revoke(ctx, []progress.TP{tp}); err != nil {
		t.Fatal(err)
	}
	r.Assign(part)
	// As the group consumer does on assignment: fetch from the progress
	// (none was saved: the only record failed).
	r.cfg.Source.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 0}}})
	produce(t, f.srcOpts, topic, 1, 1, 5)
	waitTrue(t, func() bool { off, ok := r.Positions()[tp]; return ok && off >= 4 }, "all 5 records copied after the partition came back")
	if n := len(readAll(t, f.dstOpts, "A."+topic)); n != 5 {
		t.Errorf("%d records on the target, want 5", n)
	}
}

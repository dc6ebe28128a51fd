package passthrough

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// TestRecreatedRemoteTopicOneAtATime: once the metadata shows the remote
// topic with a new topic ID (deleted and made again), a partition that
// was sending several batches at a time sends one until the new topic
// acknowledges one; an acknowledgement of a request built for the old
// topic ID does not count (ci17 found a later batch written before an
// earlier one the new partition had refused).
func TestRecreatedRemoteTopicOneAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srcCl, dst := twoPartitions(ctx, t, 0)
	dstCl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer dstCl.Close()

	tp := progress.TP{Topic: "t", Partition: 0}
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Source: srcCl, Target: dstCl, Progress: new(progress.Store),
		Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)})
	pl.Assign([]datapath.Partition{{TP: tp, Remote: "A.t"}})
	pl.mu.Lock()
	pl.pid, pl.epoch = 7, 0
	p := pl.parts[tp]
	pl.mu.Unlock()

	// fill queues four unsent batches and returns how many of them the
	// next produce requests would carry.
	fill := func() int {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		p.queue, p.inflight = nil, 0
		for i := range int64(4) {
			p.queue = append(p.queue, &outBatch{raw: make([]byte, 100), first: 10 * i, last: 10*i + 9, count: 10, advanceTo: -1, dstBase: -1})
		}
		byKey := map[lineKey][]*building{}
		pl.fillLocked(p, time.Now(), byKey)
		n := 0
		for _, reqs := range byKey {
			for _, r := range reqs {
				n += len(r.ss)
			}
		}
		return n
	}
	// ack acknowledges a batch of a request built for the topic ID id.
	ack := func(id [16]byte) {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		b := &outBatch{raw: make([]byte, 100), first: 0, last: 9, count: 10, advanceTo: -1, state: stSending}
		p.queue, p.inflight = []*outBatch{b}, 1
		pl.ackedLocked(&sending{p: p, b: b, pid: pl.pid, tgtID: id}, &kmsg.ProduceResponseTopicPartition{BaseOffset: -1}, nil)
	}
	tgtID := func() [16]byte {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return p.tgtID
	}

	pl.refreshMetadata(ctx)
	first := tgtID()
	if first == ([16]byte{}) || p.tgtLeader < 0 {
		t.Fatalf("metadata gave no topic ID or leader for A.t: %x, leader %d", first, p.tgtLeader)
	}
	if got := fill(); got != 1 {
		t.Fatalf("before any acknowledgement: %d batches sent at once, want 1", got)
	}
	ack(first)
	if got := fill(); got != 4 {
		t.Fatalf("after an acknowledgement: %d batches sent at once, want all 4", got)
	}

	// The remote topic is deleted and made again.
	adm := kadm.NewClient(dstCl)
	if _, err := adm.DeleteTopic(ctx, "A.t"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "A.t"); err != nil {
		t.Fatal(err)
	}
	pl.refreshMetadata(ctx)
	second := tgtID()
	if second == first {
		t.Fatalf("metadata still gives the old topic ID %x", first)
	}
	if got := fill(); got != 1 {
		t.Errorf("on the topic made again: %d batches sent at once, want 1", got)
	}
	ack(first) // a request built before the refresh, to the old ID
	if got := fill(); got != 1 {
		t.Errorf("after an acknowledgement for the old topic ID: %d batches sent at once, want 1", got)
	}
	ack(second)
	if got := fill(); got != 4 {
		t.Errorf("after an acknowledgement from the topic made again: %d batches sent at once, want all 4", got)
	}
}

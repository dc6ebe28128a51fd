package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestWriteBounded: a target that takes a checkpoint write and never
// answers it holds up neither a stop (Run returns at once) nor the task
// (EmitOnce gives up after the write timeout; the next interval retries).
func TestWriteBounded(t *testing.T) {
	tests := []struct {
		name string
		stop bool // cancel the task's context while the write hangs
		// what the test waits for: Run to return (stop) or EmitOnce
		want time.Duration
	}{
		{"stop while a write hangs", true, 5 * time.Second},
		{"a write that hangs times out", false, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, srcCl := testkafka.Fake(t)
			dst, dstCl := testkafka.Fake(t)
			f := testFlow(src.ListenAddrs(), dst.ListenAddrs(), "mm2")
			if !tt.stop {
				f.EmitCheckpointsInterval = time.Hour // only the test emits
			}
			f.SyncGroupOffsetsEnabled = false
			ctx := context.Background()
			dadm := kadm.NewClient(dstCl)
			if _, err := dadm.CreateTopics(ctx, 1, 1, nil, f.OffsetSyncsTopic(), "A.t", "A.checkpoints.internal"); err != nil {
				t.Fatal(err)
			}
			produce(t, dstCl, syncRec(f.OffsetSyncsTopic(), wire.OffsetSync{Topic: "t", UpstreamOffset: 0, DownstreamOffset: 0}))
			sadm := kadm.NewClient(srcCl)
			if _, err := sadm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
				t.Fatal(err)
			}
			o := make(kadm.Offsets)
			o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 1, LeaderEpoch: -1})
			if _, err := sadm.CommitOffsets(ctx, "g", o); err != nil {
				t.Fatal(err)
			}
			// From now on the target takes produce requests and never
			// answers them (until the test ends).
			release := make(chan struct{})
			defer close(release)
			hung := make(chan struct{}, 1)
			dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				dst.KeepControl()
				select {
				case hung <- struct{}{}:
				default:
				}
				dst.SleepControl(func() { <-release })
				return nil, nil, false
			})

			task, err := New(Config{Flow: f})
			if err != nil {
				t.Fatal(err)
			}
			task.writeTimeout = 2 * time.Second
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if !tt.stop {
				defer task.Close()
				if err := task.followSyncs(rctx, true); err != nil {
					t.Fatal(err)
				}
				task.refreshGroups(rctx)
				start := time.Now()
				emitted := make(chan struct{})
				go func() { task.EmitOnce(rctx); close(emitted) }()
				select {
				case <-emitted:
				case <-time.After(tt.want):
					t.Fatalf("EmitOnce still waits %v after it began, with a write timeout of 2s", tt.want)
				}
				select {
				case <-hung:
				default:
					t.Fatal("the write never reached the target")
				}
				if took := time.Since(start); took < task.writeTimeout {
					t.Errorf("EmitOnce returned after %v, before the write timeout %v: the write was not waited for", took, task.writeTimeout)
				}
				if got := task.Checkpoints("g"); len(got) != 0 {
					t.Errorf("checkpoints %v recorded as written, want none", got)
				}
				return
			}
			done := make(chan error, 1)
			go func() { done <- task.Run(rctx) }()
			// Run emits every 100ms once the store is ready.
			select {
			case <-hung:
			case <-time.After(15 * time.Second):
				t.Fatal("no checkpoint write reached the target")
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v", err)
				}
			case <-time.After(tt.want):
				t.Fatalf("Run still runs %v after its context ended, a checkpoint write hanging", tt.want)
			}
		})
	}
}

package heartbeat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestStopWhileTargetHangs: a target that takes produce requests and never
// answers (a broker gone mid-request) does not hold up Emit and Run past
// their context: a stopping flow waits for its heartbeats no longer.
func TestStopWhileTargetHangs(t *testing.T) {
	tests := []struct {
		name string
		run  func(ctx context.Context, e *Emitter) error
		want func(error) bool
	}{
		{"Emit", func(ctx context.Context, e *Emitter) error { return e.Emit(ctx) },
			func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"Run", func(ctx context.Context, e *Emitter) error { return e.Run(ctx) },
			func(err error) bool { return err == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cl := testkafka.Fake(t)
			e := New(cl, kadm.NewClient(cl), "heartbeats", "A", "B", 1, 100*time.Millisecond, nil)
			if err := e.CreateTopic(context.Background()); err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the cluster closes
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				<-release
				return nil, nil, false
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			got := make(chan error, 1)
			go func() { got <- tt.run(ctx, e) }()
			select {
			case err := <-got:
				if !tt.want(err) {
					t.Errorf("%s = %v", tt.name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s still waits for the target 9s after its context ended", tt.name)
			}
		})
	}
}

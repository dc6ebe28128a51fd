package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/mm1"
	"github.com/kmirror/kmirror/internal/testwait"
)

// TestStatusExplain: with Explain set (kmirror mm1), the error Status
// shows for a flow that cannot create its progress topic names
// --replication.factor, as the log does, not only the MM2 key.
func TestStatusExplain(t *testing.T) {
	const rfErr = "flow A->B: creating mm2-offsets.A.internal with replication factor 3 (key offset.storage.replication.factor): INVALID_REPLICATION_FACTOR"
	tests := []struct {
		name    string
		explain func(string) string
		want    string
	}{
		{"kmirror run", nil, "(key offset.storage.replication.factor)"},
		{"kmirror mm1 without --replication.factor", (&mm1.Options{}).Explain,
			"(MM2 key offset.storage.replication.factor at its default, as --replication.factor is not given; give --replication.factor N"},
		{"kmirror mm1 --replication.factor 5", (&mm1.Options{ReplicationFactor: "5"}).Explain,
			"(--replication.factor 5, MM2 key offset.storage.replication.factor): INVALID_REPLICATION_FACTOR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, twoFlows("a:9092"))
			cfg, err := Load(path, nil, quiet)
			if err != nil {
				t.Fatal(err)
			}
			r := New(path, cfg, nil, metrics.New(), quiet)
			r.Explain = tt.explain
			added := new(config.Flow) // the flows of the file run; the added one fails
			*added = *cfg.Flows[0]
			r.runFlow = func(ctx context.Context, _ Kind, fc *config.Flow, _ *flow.Flow) error {
				if fc == added {
					return fmt.Errorf("%s", rfErr)
				}
				<-ctx.Done()
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			runErr := make(chan error, 1)
			go func() { runErr <- r.Run(ctx) }()
			defer func() {
				cancel()
				<-runErr
			}()
			testwait.For(t, 10*time.Second, "two flows", func() bool { return len(r.Status()) == 2 })
			// A flow Add starts fails without stopping Run.
			if err := r.Add("mm1", added, Replication); err != nil {
				t.Fatal(err)
			}
			var st FlowStatus
			testwait.For(t, 10*time.Second, "mm1 failed", func() bool {
				st, _ = stateOf(r.Status(), "mm1")
				return st.State == "failed"
			})
			if !strings.Contains(st.Error, tt.want) {
				t.Errorf("status error %q, want %q", st.Error, tt.want)
			}
			if tt.explain != nil && strings.Contains(st.Error, "(key ") {
				t.Errorf("status error %q names only the MM2 key", st.Error)
			}
		})
	}
}

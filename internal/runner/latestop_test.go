package runner

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testwait"
)

// TestReloadRestartStopBounded: a reload or restart waits for the old
// flow to stop no longer than the stop timeout. A flow that does not stop
// (a target that never answers) shows as stopping with a problem while
// Status answers; it starts again once it has stopped, and the other
// flow goes on untouched.
func TestReloadRestartStopBounded(t *testing.T) {
	tests := []struct {
		name    string
		act     func(r *Runner, path string) error
		wantErr error // nil: the act succeeds
		wantA   string
	}{
		{"reload", func(r *Runner, path string) error {
			// A->B's source changes: the reload stops and restarts it.
			if err := os.WriteFile(path, []byte(twoFlows("a2:9092")), 0o600); err != nil {
				return err
			}
			return r.Reload()
		}, nil, "a2:9092"},
		{"restart", func(r *Runner, _ string) error { return r.Restart("A->B") }, ErrStopTimeout, "a:9092"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := writeConfig(t, twoFlows("a:9092"))
				cfg, err := Load(path, nil, quiet)
				if err != nil {
					t.Fatal(err)
				}
				r := New(path, cfg, nil, metrics.New(), quiet)
				// A->B's first run ignores its context until release
				// is closed; every later run stops with its context.
				release := make(chan struct{})
				var mu sync.Mutex
				runs := 0
				var sources []string
				r.runFlow = func(ctx context.Context, _ Kind, fc *config.Flow, _ *flow.Flow) error {
					if fc.Name() == "A->B" {
						mu.Lock()
						runs++
						first := runs == 1
						sources = append(sources, fc.SourceAdmin["bootstrap.servers"])
						mu.Unlock()
						if first {
							<-release
							return nil
						}
					}
					<-ctx.Done()
					return nil
				}
				const timeout = 2 * time.Second
				r.SetStopTimeout(timeout)
				ctx, cancel := context.WithCancel(context.Background())
				runErr := make(chan error, 1)
				go func() { runErr <- r.Run(ctx) }()
				testwait.For(t, time.Minute, "two flows", func() bool { return len(statusWithin(t, r)) == 2 })
				other, _ := stateOf(statusWithin(t, r), "C->D")

				start := time.Now()
				actErr := make(chan error, 1)
				go func() { actErr <- tt.act(r, path) }()
				var got error
				select {
				case got = <-actErr:
				case <-time.After(timeout + 5*time.Second):
					close(release)
					t.Fatalf("%s did not return within %v: it waits for a flow that does not stop", tt.name, timeout+5*time.Second)
				}
				if took := time.Since(start); took != timeout {
					t.Errorf("%s returned after %v, want the stop timeout %v", tt.name, took, timeout)
				}
				if tt.wantErr == nil && got != nil || tt.wantErr != nil && !errors.Is(got, tt.wantErr) {
					t.Errorf("%s = %v, want %v", tt.name, got, tt.wantErr)
				}
				st, _ := stateOf(statusWithin(t, r), "A->B")
				if st.State != "stopping" || !strings.Contains(st.Problem, "did not stop within 2s") {
					t.Errorf("A->B while it does not stop: state %q problem %q, want stopping with a problem", st.State, st.Problem)
				}
				if st, _ := stateOf(statusWithin(t, r), "C->D"); st.State != "starting" || !st.Since.Equal(other.Since) {
					t.Errorf("C->D: %s since %v, want untouched since %v", st.State, st.Since, other.Since)
				}

				close(release) // the old A->B stops at last
				// Status says starting before the flow's goroutine calls
				// runFlow: wait for both.
				testwait.For(t, time.Minute, "A->B started again", func() bool {
					st, _ := stateOf(statusWithin(t, r), "A->B")
					mu.Lock()
					again := runs >= 2
					mu.Unlock()
					return st.State == "starting" && st.Problem == "" && again
				})
				mu.Lock()
				if runs != 2 || sources[1] != tt.wantA {
					t.Errorf("A->B ran %d times, sources %v; want a second run from %s", runs, sources, tt.wantA)
				}
				mu.Unlock()
				cancel()
				if err := <-runErr; err != nil {
					t.Errorf("Run = %v", err)
				}
			})
		})
	}
}

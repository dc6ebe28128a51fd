package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestStartRetry: a flow's start waits out errors that pass by themselves
// (a target broker restarting while a worker starts: the connection
// closed, no leader, no controller), with a warning, and gives up after
// startWait; a refusal ends the start at once.
func TestStartRetry(t *testing.T) {
	closed := fmt.Errorf("saving topic ID to mm2-offsets.A.internal: %w", errors.New("broker closed the connection immediately"))
	for _, tt := range []struct {
		name     string
		err      error
		failures int
		wantErr  error
		wantRuns int
		warned   bool
	}{
		{name: "connection closed, then up", err: closed, failures: 3, wantRuns: 4, warned: true},
		{name: "no leader, then up", err: kerr.LeaderNotAvailable, failures: 5, wantRuns: 6, warned: true},
		{name: "down past the bound", err: kerr.NotController, failures: 1 << 30, wantErr: kerr.NotController, warned: true},
		{name: "refused", err: kerr.TopicAuthorizationFailed, failures: 1 << 30, wantErr: kerr.TopicAuthorizationFailed, wantRuns: 1},
		{name: "up at once", wantRuns: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs testkafka.Logs
				runs := 0
				start := time.Now()
				err := startRetry(context.Background(), logs.Logger(), func() error {
					if runs++; runs <= tt.failures {
						return tt.err
					}
					return nil
				})
				took := time.Since(start)
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Fatalf("startRetry = %v, want %v", err, tt.wantErr)
				}
				if tt.wantRuns != 0 && runs != tt.wantRuns {
					t.Errorf("%d attempts, want %d", runs, tt.wantRuns)
				}
				if tt.wantErr != nil && tt.wantRuns == 0 && (took < startWait || took > startWait+10*time.Second) {
					t.Errorf("gave up after %v, want after %v", took, startWait)
				}
				if warned := len(logs.Lines("starting the flow failed; retrying")) > 0; warned != tt.warned {
					t.Errorf("warned %v, want %v:\n%s", warned, tt.warned, strings.Join(logs.Lines(""), "\n"))
				}
			})
		})
	}
}

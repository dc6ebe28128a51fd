package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testwait"
)

// twoFlows is a file body with flows A->B and C->D and no heartbeat-only
// pairs; aBootstrap is cluster A's address (the flows do not connect: the
// tests replace runFlow).
func twoFlows(aBootstrap string) string {
	return strings.Join([]string{
		"clusters = A, B, C, D",
		"A.bootstrap.servers = " + aBootstrap,
		"B.bootstrap.servers = b:9092",
		"C.bootstrap.servers = c:9092",
		"D.bootstrap.servers = d:9092",
		"A->B.enabled = true",
		"C->D.enabled = true",
		"emit.heartbeats.enabled = false",
	}, "\n") + "\n"
}

// unreachable is the address the fake flows cannot reach.
const unreachable = "127.0.0.1:1"

// fakeRun is a runFlow that fails at once when the flow's source is
// unreachable, and otherwise runs until ctx ends; flows named in stuck
// ignore ctx and run until release is closed (a target that never
// answers).
func fakeRun(stuck map[string]bool, release <-chan struct{}) func(context.Context, Kind, *config.Flow, *flow.Flow) error {
	return func(ctx context.Context, _ Kind, fc *config.Flow, _ *flow.Flow) error {
		if fc.SourceAdmin["bootstrap.servers"] == unreachable {
			return fmt.Errorf("cluster %s is unreachable", fc.Source)
		}
		if stuck[fc.Name()] {
			<-release
			return nil
		}
		<-ctx.Done()
		return nil
	}
}

// statusWithin returns r.Status(), or fails the test if it does not
// answer within a second.
func statusWithin(t *testing.T, r *Runner) []FlowStatus {
	t.Helper()
	ch := make(chan []FlowStatus, 1)
	go func() { ch <- r.Status() }()
	select {
	case st := <-ch:
		return st
	case <-time.After(time.Second):
		t.Fatal("Status did not answer within 1s")
		return nil
	}
}

func stateOf(st []FlowStatus, name string) (FlowStatus, bool) {
	for _, s := range st {
		if s.Name == name {
			return s, true
		}
	}
	return FlowStatus{}, false
}

// TestStopBounded: Run stops its flows within the stop timeout even when
// one never stops, says which one in its error, and Status answers all
// along, showing the flows as stopping.
func TestStopBounded(t *testing.T) {
	tests := []struct {
		name    string
		stuck   []string
		wantErr string // "" for nil
	}{
		{"every flow stops", nil, ""},
		{"one flow never stops", []string{"A->B"}, "A->B"},
		{"both never stop", []string{"A->B", "C->D"}, "A->B, C->D"},
	}
	for _, tt := range tests {
		// In a synctest bubble the stop timeout passes on the fake clock
		// at once, and Run's time to return is exact. Status that blocks
		// on a lock would hang the bubble (mutexes are not durably
		// blocking) until the test binary's timeout instead of failing
		// statusWithin after a second.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				defer close(release)
				stuck := make(map[string]bool)
				for _, n := range tt.stuck {
					stuck[n] = true
				}
				path := writeConfig(t, twoFlows("a:9092"))
				cfg, err := Load(path, nil, quiet)
				if err != nil {
					t.Fatal(err)
				}
				r := New(path, cfg, nil, metrics.New(), quiet)
				r.runFlow = fakeRun(stuck, release)
				const timeout = 2 * time.Second
				r.SetStopTimeout(timeout)
				ctx, cancel := context.WithCancel(context.Background())
				runErr := make(chan error, 1)
				go func() { runErr <- r.Run(ctx) }()
				testwait.For(t, time.Minute, "two flows", func() bool { return len(statusWithin(t, r)) == 2 })
				start := time.Now()
				cancel()
				if len(tt.stuck) > 0 {
					testwait.For(t, time.Minute, "a stuck flow to show as stopping", func() bool {
						st, ok := stateOf(statusWithin(t, r), tt.stuck[0])
						return ok && st.State == "stopping"
					})
					if err := r.Reload(); !errors.Is(err, ErrNotRunning) {
						t.Errorf("Reload while stopping = %v, want ErrNotRunning", err)
					}
				}
				var got error
				select {
				case got = <-runErr:
				case <-time.After(timeout + 5*time.Second):
					t.Fatalf("Run did not return within %v of its context ending", timeout+5*time.Second)
				}
				took := time.Since(start)
				switch {
				case tt.wantErr == "" && got != nil:
					t.Errorf("Run = %v, want nil", got)
				case tt.wantErr != "" && (!errors.Is(got, ErrStopTimeout) || !strings.Contains(got.Error(), tt.wantErr)):
					t.Errorf("Run = %v, want ErrStopTimeout naming %s", got, tt.wantErr)
				case tt.wantErr != "" && took != timeout:
					t.Errorf("Run returned after %v, want exactly the stop timeout %v", took, timeout)
				case tt.wantErr == "" && took != 0:
					t.Errorf("Run took %v for flows that stop at once, want no time", took)
				}
			})
		})
	}
}

// TestReloadUnreachable: a reload whose file makes one cluster unreachable
// leaves Run running; the flow that cannot start is failed in Status (with
// its error) and in kmirror_flow_state; the untouched flow goes on without
// a restart; fixing the file and reloading again starts the failed flow.
func TestReloadUnreachable(t *testing.T) {
	path := writeConfig(t, twoFlows("a:9092"))
	cfg, err := Load(path, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	r := New(path, cfg, nil, m, quiet)
	r.runFlow = fakeRun(nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	testwait.For(t, time.Minute, "two flows", func() bool { return len(r.Status()) == 2 })
	other, _ := stateOf(r.Status(), "C->D")

	rewrite := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r.Reload(); err != nil {
			t.Fatalf("Reload = %v", err)
		}
	}
	rewrite(twoFlows(unreachable))
	testwait.For(t, time.Minute, "A->B failed", func() bool {
		st, _ := stateOf(r.Status(), "A->B")
		return st.State == "failed"
	})
	if st, _ := stateOf(r.Status(), "A->B"); !strings.Contains(st.Error, "unreachable") {
		t.Errorf("A->B's error = %q, want the reason", st.Error)
	}
	select {
	case err := <-runErr:
		t.Fatalf("Run ended after the reload: %v", err)
	default:
	}
	// The fake flows never report partitions: "starting" is running.
	if st, _ := stateOf(r.Status(), "C->D"); st.State != "starting" || !st.Since.Equal(other.Since) {
		t.Errorf("C->D after the reload: %s since %v, want starting untouched since %v", st.State, st.Since, other.Since)
	}
	metric := func(state string) float64 { return flowState(t, m, "A", "B", state) }
	if got := metric("failed"); got != 1 {
		t.Errorf(`kmirror_flow_state{A->B, failed} = %v, want 1`, got)
	}

	rewrite(twoFlows("a:9092"))
	testwait.For(t, time.Minute, "A->B running again", func() bool {
		st, _ := stateOf(r.Status(), "A->B")
		return st.State == "starting"
	})
	if got := metric("failed"); got != 0 {
		t.Errorf(`kmirror_flow_state{A->B, failed} after the fix = %v, want 0`, got)
	}
	if st, _ := stateOf(r.Status(), "C->D"); !st.Since.Equal(other.Since) {
		t.Errorf("C->D restarted by a reload that did not change it")
	}
}

// flowState returns the value of kmirror_flow_state for src->dst in state;
// -1 when there is no such series.
func flowState(t *testing.T, m *metrics.Metrics, src, dst, state string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kmirror_flow_state" {
			continue
		}
		for _, s := range mf.GetMetric() {
			l := make(map[string]string)
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["source"] == src && l["target"] == dst && l["state"] == state {
				return s.GetGauge().GetValue()
			}
		}
	}
	return -1
}

package robustness

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// Defaults of TestRobustness, the run make test does.
const (
	defaultSeed     = 22
	defaultDuration = 3 * time.Minute
)

// envOr reads a variable or returns def.
func envOr(t *testing.T, name, def string) string {
	if v := os.Getenv(name); v != "" {
		t.Logf("%s=%s", name, v)
		return v
	}
	return def
}

// TestRobustness is one robustness run: KMIRROR_ROBUSTNESS_SEED (default
// 22) and KMIRROR_ROBUSTNESS_DURATION (default 3m) choose it; make
// test-robustness SEED=N DURATION=D sets them.
func TestRobustness(t *testing.T) {
	t.Parallel()
	seed, err := strconv.ParseUint(envOr(t, "KMIRROR_ROBUSTNESS_SEED", strconv.Itoa(defaultSeed)), 10, 64)
	if err != nil {
		t.Fatalf("KMIRROR_ROBUSTNESS_SEED: %v", err)
	}
	d, err := time.ParseDuration(envOr(t, "KMIRROR_ROBUSTNESS_DURATION", defaultDuration.String()))
	if err != nil {
		t.Fatalf("KMIRROR_ROBUSTNESS_DURATION: %v", err)
	}
	start := time.Now()
	res := Execute(t, Options{Seed: seed, Duration: d})
	t.Logf("robustness result (%v wall): %v", time.Since(start).Round(time.Second), res)
	if res.FaultsDone == 0 {
		t.Errorf("no fault was injected")
	}
	if res.SourceRecords == 0 {
		t.Errorf("no source record checked")
	}
}

// TestSoak runs only with KMIRROR_SOAK_DURATION set (make test-soak): a
// robustness run of that length under steady load with a fault every
// KMIRROR_SOAK_FAULT_GAP (default 2m), sampling every worker's RSS, Go
// heap in use, goroutines, open files and metric series every 10 s.
// kmirror is built without the race detector here, as it ships: the
// detector's own memory grows with the run. It logs their
// slopes and draws them into KMIRROR_SOAK_PLOT (default
// docs/robustness-soak.png); the usual checks run at the end.
func TestSoak(t *testing.T) {
	ds := os.Getenv("KMIRROR_SOAK_DURATION")
	if ds == "" {
		t.Skip("KMIRROR_SOAK_DURATION not set (make test-soak)")
	}
	d, err := time.ParseDuration(ds)
	if err != nil {
		t.Fatalf("KMIRROR_SOAK_DURATION: %v", err)
	}
	gap, err := time.ParseDuration(envOr(t, "KMIRROR_SOAK_FAULT_GAP", "2m"))
	if err != nil {
		t.Fatalf("KMIRROR_SOAK_FAULT_GAP: %v", err)
	}
	seed, err := strconv.ParseUint(envOr(t, "KMIRROR_ROBUSTNESS_SEED", strconv.Itoa(defaultSeed)), 10, 64)
	if err != nil {
		t.Fatalf("KMIRROR_ROBUSTNESS_SEED: %v", err)
	}
	// The last partition change of the run is at half its duration; the
	// trends are fitted from a minute after it.
	s := soaker{settled: d/2 + time.Minute}
	res := Execute(t, Options{Seed: seed, Duration: d, FaultGap: gap, Sample: s.sample, NoRace: true})
	t.Logf("soak result: %v", res)
	t.Logf("soak trends (from %v, after the last partition change, and the first 2 minutes of each process left out):\n%s", s.settled, s.report())
	plot := envOr(t, "KMIRROR_SOAK_PLOT", "../docs/robustness-soak.png")
	title := fmt.Sprintf("KMIRROR SOAK: %v, SEED %d, A FAULT EVERY %v", d, seed, gap)
	if err := s.plot(plot, title); err != nil {
		t.Errorf("plot: %v", err)
	}
	t.Logf("plot written to %s", plot)
}

package robustness

import (
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

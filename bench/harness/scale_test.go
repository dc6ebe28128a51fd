package harness

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestScaleProperties(t *testing.T) {
	c := ScaleConfig{Topics: 1000, Partitions: 5, Refresh: 10 * time.Second, TasksMax: 4}
	p := ScaleProperties("s1", "t1", "a:9092", "b:9092", c)
	for _, want := range []string{"s1->t1.topics = bench-scale-[0-9]+\n", "refresh.topics.interval.seconds = 10\n", "tasks.max = 4\n"} {
		if !strings.Contains(p, want) {
			t.Errorf("properties lack %q:\n%s", want, p)
		}
	}
	// New topics must match the flow's regex and no backlog topic.
	backlog := scaleWorkload(c).TopicNames()
	for _, n := range newTopicNames(ScaleConfig{NewTopics: 3}, 2) {
		if !strings.HasPrefix(n, "bench-scale-") || strings.Trim(strings.TrimPrefix(n, "bench-scale-"), "0123456789") != "" {
			t.Errorf("new topic %q does not match bench-scale-[0-9]+", n)
		}
		for _, b := range backlog {
			if b == n {
				t.Errorf("new topic %q is a backlog topic", n)
			}
		}
	}
}

func TestScaleResult(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       ScaleResult
		pct     float64
		slowest float64
	}{
		{"none", ScaleResult{}, 0, 0},
		{"half a core", ScaleResult{IdleCPU: 30, IdleSec: 60, DetectSec: []float64{3, 11.5, 7}}, 50, 11.5},
		{"idle", ScaleResult{IdleCPU: 0.6, IdleSec: 60, DetectSec: []float64{2}}, 1, 2},
	} {
		if got := tc.r.IdleCPUPercent(); got != tc.pct {
			t.Errorf("%s: IdleCPUPercent = %v, want %v", tc.name, got, tc.pct)
		}
		if got := tc.r.DetectMax(); got != tc.slowest {
			t.Errorf("%s: DetectMax = %v, want %v", tc.name, got, tc.slowest)
		}
	}
}

func TestScaleSection(t *testing.T) {
	res := &ScaleResults{Meta: ScaleMeta{Topics: 1000, Partitions: 5, PerPart: 20, NewTopics: 10, IdleSec: 60, RefreshSec: 10, TasksMax: 4},
		Runs: []ScaleResult{
			{Replicator: Kmirror, CatchUpSec: 10, CPUCatchUp: 2, IdleSec: 60, IdleCPU: 0.6, RSS: 50 << 20, PeakRSS: 60 << 20, DetectSec: []float64{5}},
			{Replicator: MM2, CatchUpSec: 40, CPUCatchUp: 40, IdleSec: 60, IdleCPU: 6, RSS: 1000 << 20, PeakRSS: 1200 << 20, DetectSec: []float64{20}},
		}}
	s := ScaleSection(res)
	for _, want := range []string{
		"## Scale: 5000 partitions",
		"| kmirror | 0.0 | 10.0 | 2.0 | 1.00 | 50 | 60 | 5.0 |",
		"| Apache MM2 | 0.0 | 40.0 | 40.0 | 10.00 | 1000 | 1200 | 20.0 |",
		"catch-up time 0.25, CPU to catch up 0.05, idle CPU 0.10, idle RSS 0.05, new-topic detection 0.25",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	res.Runs[1].Error = "timeout"
	if s := ScaleSection(res); strings.Contains(s, "kmirror/MM2") {
		t.Errorf("ratios shown with a failed run:\n%s", s)
	}
}

func TestStatusBytes(t *testing.T) {
	for _, key := range []string{"VmRSS:", "VmHWM:"} {
		n, err := statusBytes(os.Getpid(), key)
		if err != nil || n <= 0 {
			t.Errorf("%s = %d, %v", key, n, err)
		}
	}
	if _, err := statusBytes(os.Getpid(), "NoSuchKey:"); err == nil {
		t.Error("a missing key gave no error")
	}
}

package harness

import (
	"bytes"
	"image/png"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

func TestWorkloads(t *testing.T) {
	for _, w := range Workloads {
		l, err := Lookup(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Topics == 0 || l.Partitions == 0 || l.Records == 0 || l.Quick == 0 || l.ValueBytes == 0 {
			t.Errorf("%s: incomplete %+v", w.Name, l)
		}
		if strings.Contains(l.TopicRegex(), `\`) {
			t.Errorf("%s: regex %q has a backslash, which a properties file eats", w.Name, l.TopicRegex())
		}
	}
	wan, _ := Lookup("wan")
	if wan.Delay == 0 || wan.DataName() != "kb" || wan.TopicNames()[0] != "bench-kb-0" {
		t.Errorf("wan = %+v", wan)
	}
	kh, _ := Lookup("keys-headers")
	if got := kh.RecordBytes(); got != 256+16+len("trace-id")+16+len("content-type")+16+len("seq")+8 {
		t.Errorf("keys-headers record bytes = %d", got)
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("Lookup of an unknown workload succeeded")
	}
}

func TestLetters(t *testing.T) {
	b := make([]byte, 1021)
	letters(rand.NewChaCha8([32]byte{}), b)
	for i, c := range b {
		if c < 'A' || c > 'Z' {
			t.Fatalf("byte %d = %q", i, c)
		}
	}
}

func TestProc(t *testing.T) {
	cpu, err := cpuSeconds(os.Getpid())
	if err != nil || cpu < 0 {
		t.Errorf("cpuSeconds = %v, %v", cpu, err)
	}
	rss, err := peakRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("peakRSS = %v, %v", rss, err)
	}
}

func TestStat(t *testing.T) {
	if s := stat([]float64{3, 1, 2}); s != (Stat{2, 1, 3}) {
		t.Errorf("odd: %+v", s)
	}
	if s := stat([]float64{4, 1, 2, 3}); s != (Stat{2.5, 1, 4}) {
		t.Errorf("even: %+v", s)
	}
}

// fakeResults are results of three rounds with made-up figures.
func fakeResults() *Results {
	res := &Results{Meta: Meta{Rounds: 3, Workloads: []string{"kb", "wan"}, Descriptions: map[string]string{}}}
	for round := 1; round <= 3; round++ {
		f := float64(round)
		res.Runs = append(res.Runs,
			Result{Workload: "kb", Replicator: Kmirror, Round: round, Records: 1000, Bytes: 1e9, Seconds: 10, RecordsPerSec: 300 + f, MBPerSec: 100 + f, CPUSeconds: 5, PeakRSS: 50 << 20},
			Result{Workload: "kb", Replicator: MM2, Round: round, Records: 1000, Bytes: 1e9, Seconds: 30, RecordsPerSec: 100 + f, MBPerSec: 33 + f, CPUSeconds: 30, PeakRSS: 1 << 30},
			Result{Workload: "kb", Replicator: Limit, Round: round, Records: 1000, Bytes: 1e9, Seconds: 8, RecordsPerSec: 400, MBPerSec: 120},
			Result{Workload: "wan", Replicator: Kmirror, Round: round, Records: 1000, Bytes: 1e9, RecordsPerSec: 250, MBPerSec: 80, CPUSeconds: 5, PeakRSS: 60 << 20},
			Result{Workload: "wan", Replicator: MM2, Round: round, Error: "timeout"},
		)
	}
	return res
}

func TestReport(t *testing.T) {
	res := fakeResults()
	md := Markdown(res, "## Analysis\n\nhand-written")
	for _, want := range []string{
		"| kb | kmirror | 3/3 | 302 (301–303) |",
		"| wan | Apache MM2 | 0/3 | failed |",
		"| kb | 2.96× | 0.17× | 0.05× | 85 % |",
		"| `kb`: records/s ≥ 3× MM2 | 2.96× | missed |",
		"hand-written",
		"wan / mm2 round 2: timeout",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	var b bytes.Buffer
	if err := Chart(res, &b); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&b); err != nil {
		t.Fatal(err)
	}
	if tb := Table(res); !strings.Contains(tb, "kb            km/mm2") {
		t.Errorf("table:\n%s", tb)
	}
}

func TestGlyphs(t *testing.T) {
	for r, g := range glyphs {
		for _, row := range g {
			if len(row) != 5 {
				t.Errorf("glyph %q has a row of %d", r, len(row))
			}
		}
	}
}

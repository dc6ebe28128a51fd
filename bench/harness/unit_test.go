package harness

import (
	"bytes"
	"image/png"
	"math"
	"math/rand/v2"

	"github.com/pierrec/lz4/v4"
	"os"
	"path/filepath"
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

func TestWords(t *testing.T) {
	b := make([]byte, 1024)
	words(rand.NewChaCha8([32]byte{}), b)
	if b[1023] == 0 || strings.Count(string(b), " ") < 100 {
		t.Errorf("words = %q", b)
	}
	var c bytes.Buffer
	zw := lz4.NewWriter(&c)
	rng := rand.NewChaCha8([32]byte{1})
	for range 256 {
		words(rng, b)
		zw.Write(b)
	}
	zw.Close()
	t.Logf("lz4: 256 KiB of words -> %d bytes", c.Len())
	if c.Len() > 256*1024*3/4 {
		t.Errorf("lz4 shrinks 256 KiB of words only to %d bytes", c.Len())
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
			Result{Workload: "kb", Replicator: KmirrorPT, Round: round, Records: 1000, Bytes: 1e9, Seconds: 8, RecordsPerSec: 400 + f, MBPerSec: 130 + f, CPUSeconds: 2, PeakRSS: 40 << 20},
			Result{Workload: "kb", Replicator: Limit, Round: round, Records: 1000, Bytes: 1e9, Seconds: 8, RecordsPerSec: 400, MBPerSec: 120},
			Result{Workload: "wan", Replicator: Kmirror, Round: round, Records: 1000, Bytes: 1e9, RecordsPerSec: 250, MBPerSec: 80, CPUSeconds: 5, PeakRSS: 60 << 20},
			Result{Workload: "wan", Replicator: MM2, Round: round, Error: "timeout"},
		)
	}
	res.Runs[len(res.Runs)-3].Profile = &Profile{File: "kb-r3-kmirror-pt.cpu.pprof", Seconds: 6, SampleSeconds: 1.5,
		Categories: []Share{{catSyscall, 1, 66.7}, {catKgo, 0.5, 33.3}},
		Top:        []Entry{{Func: "syscall.Syscall6", Flat: 1, FlatPct: 66.7, Cum: 1, CumPct: 66.7}}}
	return res
}

func TestReport(t *testing.T) {
	res := fakeResults()
	md := Markdown(res, "## Analysis\n\nhand-written")
	for _, want := range []string{
		"| kb | kmirror | 3/3 | 302 (301–303) |",
		"| wan | Apache MM2 | 0/3 | failed |",
		"| kb | kmirror-pt (passthrough) | 3/3 | 402 (401–403) |",
		"| kb | 2.96× / 3.94× | 0.17× / 0.07× | 0.05× / 0.04× | 85 % / 110 % |",
		"| `kb`: records/s ≥ 3× MM2 | 2.96× **missed** | 3.94× met |",
		"| `kb`: CPU s per GB ≤ 1/10 of MM2's (passthrough) | – | 0.07× met |",
		"| system calls (network I/O) | 67 % (1.00 s) |",
		"| 1.00 s | 66.7 % | 66.7 % | `syscall.Syscall6` |",
		"hand-written",
		"wan / mm2 round 2: timeout",
	} {
		wantLine(t, md, want)
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

const pprofTop = `File: kmirror
Type: cpu
Duration: 8.13s, Total samples = 2.50s (30.75%)
Showing nodes accounting for 2.50s, 100% of 2.50s total
      flat  flat%   sum%        cum   cum%
     1.20s 48.00% 48.00%      1.20s 48.00%  github.com/pierrec/lz4/v4/internal/lz4block.decodeBlock
     500ms 20.00% 68.00%      500ms 20.00%  runtime.memmove
     300ms 12.00% 80.00%      400ms 16.00%  runtime.scanobject
     200ms  8.00% 88.00%      1.50s 60.00%  github.com/twmb/franz-go/pkg/kgo.(*cursorOffsetNext).maybeKeepRecord (inline)
     200ms  8.00% 96.00%      200ms  8.00%  github.com/klauspost/compress/zstd.(*fastEncoder).Encode
     100ms  4.00%   100%      2.40s 96.00%  github.com/kmirror/kmirror/internal/replicate.(*Replicator).run
         0     0%   100%      2.40s 96.00%  runtime.goexit
`

func TestParseTop(t *testing.T) {
	es, total, err := parseTop(pprofTop)
	if err != nil || total != 2.5 || len(es) != 7 {
		t.Fatalf("parseTop = %d entries, total %v, %v", len(es), total, err)
	}
	if es[3].Func != "github.com/twmb/franz-go/pkg/kgo.(*cursorOffsetNext).maybeKeepRecord (inline)" || es[3].Cum != 1.5 {
		t.Errorf("entry 3 = %+v", es[3])
	}
	cats := categorize(es, total)
	want := []Share{{catDecompress, 1.2, 48}, {catMemmove, 0.5, 20}, {catGC, 0.3, 12}, {catCompress, 0.2, 8}, {catKgo, 0.2, 8}, {catKmirror, 0.1, 4}, {catRuntime, 0, 0}}
	if len(cats) != len(want) {
		t.Fatalf("categories = %+v", cats)
	}
	for i, c := range cats {
		if c.Name != want[i].Name || math.Abs(c.Seconds-want[i].Seconds) > 1e-9 || math.Abs(c.Percent-want[i].Percent) > 1e-6 {
			t.Errorf("category %d = %+v, want %+v", i, c, want[i])
		}
	}
}

func TestMerge(t *testing.T) {
	a, b := fakeResults(), fakeResults()
	b.Meta.Workloads = []string{"kb", "kb-lz4"}
	b.Meta.Descriptions = map[string]string{"kb-lz4": "words"}
	b.Runs = append(b.Runs, Result{Workload: "kb-lz4", Replicator: Kmirror, Round: 1})
	m := Merge(a, b)
	if got := strings.Join(m.Meta.Workloads, ","); got != "kb,wan,kb-lz4" {
		t.Errorf("workloads = %s", got)
	}
	if len(m.Runs) != len(a.Runs)+len(b.Runs) || m.Meta.Descriptions["kb-lz4"] != "words" || len(a.Meta.Workloads) != 2 {
		t.Errorf("merged %d runs, descriptions %v; first's workloads %v", len(m.Runs), m.Meta.Descriptions, a.Meta.Workloads)
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

// wantLine fails t, showing the report once, if md lacks s.
func wantLine(t *testing.T, md, s string) {
	t.Helper()
	if strings.Contains(md, s) {
		return
	}
	if !t.Failed() {
		t.Log(md)
	}
	t.Errorf("report lacks %q", s)
}

func TestBaseline(t *testing.T) {
	res := fakeResults()
	if md := Markdown(res, ""); strings.Contains(md, "baseline") {
		t.Errorf("report without a baseline mentions one:\n%s", md)
	}
	res.Meta.KmirrorRev, res.Meta.Baseline, res.Meta.BaselineRev = "abc1234", "/tmp/old-kmirror", "commit a9f2b5a"
	for round := 1; round <= 3; round++ {
		f := float64(round)
		res.Runs = append(res.Runs,
			Result{Workload: "kb", Replicator: Base, Round: round, Records: 1000, Bytes: 1e9, Seconds: 10, RecordsPerSec: 200 + f, MBPerSec: 66 + f, CPUSeconds: 10, PeakRSS: 100 << 20},
			Result{Workload: "kb", Replicator: BasePT, Round: round, Records: 1000, Bytes: 1e9, Seconds: 8, RecordsPerSec: 400 + f, MBPerSec: 130 + f, CPUSeconds: 4, PeakRSS: 40 << 20},
			Result{Workload: "wan", Replicator: Base, Round: round, Error: "timeout"},
		)
	}
	want := []BaseRatio{
		{Workload: "kb", New: Kmirror, Base: Base, RecordsPerSec: 302.0 / 202, CPUPerGB: 0.5, PeakRSS: 0.5},
		{Workload: "kb", New: KmirrorPT, Base: BasePT, RecordsPerSec: 1, CPUPerGB: 0.5, PeakRSS: 1},
	}
	got := BaseRatios(res)
	if len(got) != len(want) {
		t.Fatalf("BaseRatios = %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Workload != w.Workload || g.New != w.New || g.Base != w.Base ||
			math.Abs(g.RecordsPerSec-w.RecordsPerSec) > 1e-9 || math.Abs(g.CPUPerGB-w.CPUPerGB) > 1e-9 || math.Abs(g.PeakRSS-w.PeakRSS) > 1e-9 {
			t.Errorf("ratio %d = %+v, want %+v", i, g, w)
		}
	}
	md := Markdown(res, "")
	for _, s := range []string{
		"| kb | base (baseline, record path) | 3/3 | 202 (201–203) |",
		"| kb | base-pt (baseline, passthrough) | 3/3 | 402 (401–403) |",
		"### new ÷ baseline (medians)",
		"New: kmirror `abc1234`. Baseline: `/tmp/old-kmirror` (commit a9f2b5a)",
		"| kb | kmirror ÷ base | 1.50× | 0.50× | 0.50× |",
		"| kb | kmirror-pt ÷ base-pt | 1.00× | 0.50× | 1.00× |",
		"wan / base round 1: timeout",
	} {
		wantLine(t, md, s)
	}
	if tb := Table(res); !strings.Contains(tb, "kb            km/base") || !strings.Contains(tb, "kb            pt/base") {
		t.Errorf("table:\n%s", tb)
	}
	if m := Merge(fakeResults(), res); len(m.VsBase) != 2 || m.Meta.Baseline != res.Meta.Baseline {
		t.Errorf("merged: vs base %+v, baseline %q", m.VsBase, m.Meta.Baseline)
	}
	if _, err := Run(t.Context(), Config{Replicators: []string{Kmirror, Base}}); err == nil || !strings.Contains(err.Error(), "--baseline") {
		t.Errorf("Run with base and no baseline: %v", err)
	}
}

func TestBinaryRev(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	rev, err := BinaryRev(exe)
	if err != nil || !strings.HasPrefix(rev, "commit ") && !strings.HasPrefix(rev, "sha256 ") {
		t.Errorf("BinaryRev = %q, %v", rev, err)
	}
	if _, err := BinaryRev(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("BinaryRev of a missing file succeeded")
	}
}

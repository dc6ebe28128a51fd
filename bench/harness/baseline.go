package harness

import (
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"strings"
)

// BaseRatio compares the new kmirror with the --baseline binary on one
// workload and data path: medians of new over base.
type BaseRatio struct {
	Workload      string  `json:"workload"`
	New           string  `json:"new"`  // Kmirror or KmirrorPT
	Base          string  `json:"base"` // Base or BasePT
	RecordsPerSec float64 `json:"records_per_sec"`
	CPUPerGB      float64 `json:"cpu_per_gb"`
	PeakRSS       float64 `json:"peak_rss"`
}

// basePairs are the new replicators and their baseline twins.
var basePairs = [][2]string{{Kmirror, Base}, {KmirrorPT, BasePT}}

// BaseRatios are the new/base ratios of every workload and path where
// both have a successful run; nil without baseline runs.
func BaseRatios(res *Results) []BaseRatio {
	var out []BaseRatio
	for _, w := range res.Meta.Workloads {
		for _, p := range basePairs {
			n, b := Summarize(res, w, p[0]), Summarize(res, w, p[1])
			if n.OK == 0 || b.OK == 0 {
				continue
			}
			out = append(out, BaseRatio{Workload: w, New: p[0], Base: p[1],
				RecordsPerSec: ratio(n.RecordsPerSec.Med, b.RecordsPerSec.Med),
				CPUPerGB:      ratio(n.CPUPerGB.Med, b.CPUPerGB.Med),
				PeakRSS:       ratio(n.PeakRSSMiB.Med, b.PeakRSSMiB.Med)})
		}
	}
	return out
}

// baseline writes the new ÷ base section of the report, if the results
// have baseline runs.
func baseline(b *strings.Builder, res *Results) {
	rs := BaseRatios(res)
	if len(rs) == 0 && res.Meta.Baseline == "" {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n### new ÷ baseline (medians)\n\n")
	p("New: kmirror `%s`. Baseline: `%s` (%s), run as base and base-pt with the same properties, interleaved in the same rounds. ",
		res.Meta.KmirrorRev, res.Meta.Baseline, res.Meta.BaselineRev)
	p("Records/s above 1× and CPU or RSS below 1× are better.\n\n")
	p("| workload | path | records/s | CPU s per GB | peak RSS |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		p("| %s | %s ÷ %s | %.2f× | %.2f× | %.2f× |\n", r.Workload, r.New, r.Base, r.RecordsPerSec, r.CPUPerGB, r.PeakRSS)
	}
}

// BinaryRev says which build a kmirror binary is: its VCS revision if
// it was built with one, else the start of its SHA-256.
func BinaryRev(path string) (string, error) {
	if bi, err := buildinfo.ReadFile(path); err == nil {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if rev != "" {
			return "commit " + rev[:min(len(rev), 12)] + dirty, nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("sha256 %x", h.Sum(nil)[:6]), nil
}

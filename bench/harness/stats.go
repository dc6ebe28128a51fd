package harness

import (
	"fmt"
	"sort"
	"strings"
)

// Stat is the median, minimum and maximum of one measure over the
// successful runs of a replicator on a workload.
type Stat struct{ Med, Min, Max float64 }

func stat(vs []float64) Stat {
	if len(vs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Med: m, Min: s[0], Max: s[len(s)-1]}
}

// Summary aggregates the runs of one replicator on one workload.
type Summary struct {
	Workload, Replicator string
	OK, Failed           int
	RecordsPerSec        Stat
	MBPerSec             Stat
	Seconds              Stat
	CPUSeconds           Stat
	CPUPerGB             Stat
	PeakRSSMiB           Stat
	StartupSeconds       Stat
	Errors               []string
}

// Summarize groups res.Runs by workload and replicator.
func Summarize(res *Results, workload, repl string) Summary {
	s := Summary{Workload: workload, Replicator: repl}
	var rps, mbs, secs, cpu, cpg, rss, su []float64
	for _, r := range res.Runs {
		if r.Workload != workload || r.Replicator != repl {
			continue
		}
		if r.Error != "" {
			s.Failed++
			s.Errors = append(s.Errors, fmt.Sprintf("round %d: %s", r.Round, r.Error))
			continue
		}
		s.OK++
		rps = append(rps, r.RecordsPerSec)
		mbs = append(mbs, r.MBPerSec)
		secs = append(secs, r.Seconds)
		cpu = append(cpu, r.CPUSeconds)
		cpg = append(cpg, r.CPUPerGB())
		rss = append(rss, float64(r.PeakRSS)/(1<<20))
		su = append(su, r.StartupSeconds)
	}
	s.RecordsPerSec, s.MBPerSec, s.Seconds = stat(rps), stat(mbs), stat(secs)
	s.CPUSeconds, s.CPUPerGB, s.PeakRSSMiB, s.StartupSeconds = stat(cpu), stat(cpg), stat(rss), stat(su)
	return s
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Table is a plain-text table of medians for the terminal.
func Table(res *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-13s %-10s %4s %12s %9s %8s %9s %9s %9s\n", "workload", "who", "ok", "records/s", "MB/s", "CPU s", "CPU s/GB", "RSS MiB", "startup")
	vs := BaseRatios(res)
	for _, w := range res.Meta.Workloads {
		for _, r := range reportOrder {
			s := Summarize(res, w, r)
			if s.OK+s.Failed == 0 {
				continue
			}
			fmt.Fprintf(&b, "%-13s %-10s %d/%d %12.0f %9.1f %8.1f %9.1f %9.0f %8.1fs\n", w, r, s.OK, s.OK+s.Failed,
				s.RecordsPerSec.Med, s.MBPerSec.Med, s.CPUSeconds.Med, s.CPUPerGB.Med, s.PeakRSSMiB.Med, s.StartupSeconds.Med)
		}
		m, l := Summarize(res, w, MM2), Summarize(res, w, Limit)
		for _, r := range []string{Kmirror, KmirrorPT} {
			k := Summarize(res, w, r)
			short := map[string]string{Kmirror: "km", KmirrorPT: "pt"}[r]
			if k.OK > 0 && m.OK > 0 {
				fmt.Fprintf(&b, "%-13s %-10s      %11.2fx %8.2fx %7.2fx %8.2fx %8.2fx\n", w, short+"/mm2",
					ratio(k.RecordsPerSec.Med, m.RecordsPerSec.Med), ratio(k.MBPerSec.Med, m.MBPerSec.Med),
					ratio(k.CPUSeconds.Med, m.CPUSeconds.Med), ratio(k.CPUPerGB.Med, m.CPUPerGB.Med),
					ratio(k.PeakRSSMiB.Med, m.PeakRSSMiB.Med))
			}
			if k.OK > 0 && l.OK > 0 {
				fmt.Fprintf(&b, "%-13s %-10s      %11.0f%% of the limit\n", w, short+"/limit", 100*ratio(k.MBPerSec.Med, l.MBPerSec.Med))
			}
		}
		for _, v := range vs {
			if v.Workload == w {
				fmt.Fprintf(&b, "%-13s %-10s      %11.2fx %27.2fx %8.2fx\n", w, map[string]string{Kmirror: "km", KmirrorPT: "pt"}[v.New]+"/base", v.RecordsPerSec, v.CPUPerGB, v.PeakRSS)
			}
		}
	}
	return b.String()
}

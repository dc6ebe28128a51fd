package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// Config says what a benchmark runs.
type Config struct {
	Root        string   // repository root
	Dir         string   // results folder: clusters, logs, results.json
	Workloads   []string // names; all when empty
	Replicators []string // Kmirror, KmirrorPT, MM2, Base, BasePT; all when empty
	Runs        int      // rounds per workload
	Quick       bool     // the small record counts
	Limit       bool     // also measure ProducerPerformance to the target
	// LimitOn restricts the limit runs to these workloads (all when empty).
	LimitOn []string
	// LimitProcs is the number of ProducerPerformance processes of a
	// limit run; 0 means DefaultLimitProcs of the workload.
	LimitProcs int
	TasksMax   int // tasks.max in mm2.properties
	// KmirrorSet are properties lines added to kmirror's mm2.properties
	// (both paths), for tuning experiments; the report lists them.
	KmirrorSet []string
	// Profile names the workloads on which the last round's kmirror and
	// kmirror-pt runs (and base, base-pt) are CPU-profiled.
	Profile []string
	// Baseline is a prebuilt kmirror binary (the build before a change),
	// run as Base and BasePT exactly like Kmirror and KmirrorPT.
	Baseline string
	// BaselineRev says which build Baseline is; BinaryRev when empty.
	BaselineRev string
	Timeout     time.Duration
	// SourceVersion runs the source on an older Kafka release
	// (kafkalocal's ZooKeeperVersions or KRaftVersions); the target stays
	// on the pinned one.
	SourceVersion string
	Log           io.Writer
}

// Results is what results.json holds.
type Results struct {
	Meta Meta     `json:"meta"`
	Runs []Result `json:"runs"`
	// VsBase are the new/base ratios of a run with a baseline.
	VsBase []BaseRatio `json:"vs_base,omitempty"`
}

// Meta describes the machine and the software of a benchmark.
type Meta struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Quick     bool      `json:"quick"`
	Rounds    int       `json:"rounds"`
	CPU       string    `json:"cpu"`
	Cores     int       `json:"cores"`
	MemoryGiB float64   `json:"memory_gib"`
	Kernel    string    `json:"kernel"`
	Go        string    `json:"go"`
	Java      string    `json:"java"`
	Kafka     string    `json:"kafka"`
	// SourceKafka is the source's release when it differs from Kafka.
	SourceKafka  string   `json:"source_kafka,omitempty"`
	KmirrorRev   string   `json:"kmirror_rev"`
	TasksMax     int      `json:"tasks_max"`
	KmirrorSet   []string `json:"kmirror_set,omitempty"`
	WANRTTMillis float64  `json:"wan_rtt_ms,omitempty"` // wan's, in older results
	// RTTMillis is the request round trip to the source through the
	// proxy, per delayed workload.
	RTTMillis    map[string]float64 `json:"rtt_ms,omitempty"`
	Workloads    []string           `json:"workloads"`
	Descriptions map[string]string  `json:"descriptions"`
	Properties   string             `json:"properties"` // example mm2.properties
	BrokerJVM    []string           `json:"broker_jvm"`
	MM2JVM       []string           `json:"mm2_jvm"`
	// LimitProcs is the number of parallel ProducerPerformance processes
	// of each workload's limit; LimitProps their producer settings. Both
	// are empty in older results, whose limit was one process with
	// linger.ms=20 batch.size=262144 acks=all.
	LimitProcs map[string]int `json:"limit_procs,omitempty"`
	LimitProps []string       `json:"limit_producer_props,omitempty"`
	// Baseline is the --baseline binary and BaselineRev the build it is.
	Baseline    string `json:"baseline,omitempty"`
	BaselineRev string `json:"baseline_rev,omitempty"`
}

// Run brings up the clusters, then for each workload loads the source and
// runs the replicators in alternating order, Runs rounds, saving
// results.json after every run. It always stops what it started.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 3
	}
	if cfg.TasksMax <= 0 {
		cfg.TasksMax = 4
	}
	if len(cfg.Replicators) == 0 {
		cfg.Replicators = []string{Kmirror, KmirrorPT, MM2}
		if cfg.Baseline != "" {
			cfg.Replicators = []string{Kmirror, Base, KmirrorPT, BasePT, MM2}
		}
	}
	if cfg.Baseline == "" && (slices.Contains(cfg.Replicators, Base) || slices.Contains(cfg.Replicators, BasePT)) {
		return nil, fmt.Errorf("replicators %s and %s need --baseline", Base, BasePT)
	}
	if cfg.Baseline != "" {
		abs, err := filepath.Abs(cfg.Baseline)
		if err != nil {
			return nil, err
		}
		cfg.Baseline = abs
		if cfg.BaselineRev == "" {
			if cfg.BaselineRev, err = BinaryRev(abs); err != nil {
				return nil, fmt.Errorf("baseline: %w", err)
			}
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Minute
		if cfg.Quick {
			cfg.Timeout = 4 * time.Minute
		}
	}
	var wls []Workload
	names := cfg.Workloads
	if len(names) == 0 {
		for _, w := range Workloads {
			names = append(names, w.Name)
		}
	}
	for _, n := range names {
		w, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		wls = append(wls, w)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	libs, err := kafkalocal.ResolveLibs(ctx, cfg.Root, cfg.Log)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(cfg.Dir, "kmirror")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kmirror")
	build.Dir = cfg.Root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
	}

	res := &Results{Meta: meta(cfg, libs, wls)}
	save := func() error {
		res.VsBase = BaseRatios(res)
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(cfg.Dir, "results.json"), b, 0o644)
	}

	var delays []time.Duration
	for _, w := range wls {
		if w.Delay > 0 && !slices.Contains(delays, w.Delay) {
			delays = append(delays, w.Delay)
		}
	}
	fmt.Fprintf(cfg.Log, "kbench: starting clusters in %s\n", filepath.Join(cfg.Dir, "clusters"))
	var srcLibs string
	if cfg.SourceVersion != "" {
		if srcLibs, err = kafkalocal.ResolveVersionLibs(ctx, cfg.Root, cfg.SourceVersion, cfg.Log); err != nil {
			return nil, err
		}
	}
	cl, err := StartClusters(ctx, filepath.Join(cfg.Dir, "clusters"), libs, delays, cfg.SourceVersion, srcLibs, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	env := &Env{Clusters: cl, Libs: libs, Kmirror: bin, Baseline: cfg.Baseline, Dir: cfg.Dir, Log: cfg.Log, TasksMax: cfg.TasksMax, KmirrorSet: cfg.KmirrorSet, Timeout: cfg.Timeout}
	defer env.Close()

	for _, w := range wls {
		if w.Delay == 0 {
			continue
		}
		rtt, err := cl.DelayedRTT(ctx, w.Delay)
		if err != nil {
			return res, fmt.Errorf("round trip through the proxy: %w", err)
		}
		if res.Meta.RTTMillis == nil {
			res.Meta.RTTMillis = map[string]float64{}
		}
		res.Meta.RTTMillis[w.Name] = float64(rtt.Microseconds()) / 1000
		fmt.Fprintf(cfg.Log, "kbench: %s: request round trip to the source through the proxy: %v\n", w.Name, rtt.Round(100*time.Microsecond))
	}
	loaded := map[string]bool{}
	for i, w := range wls {
		n := w.Records
		if cfg.Quick {
			n = w.Quick
		}
		if !loaded[w.DataName()] {
			codecs, err := Load(ctx, cl.Source, w, n, cfg.Log)
			if err != nil {
				return res, err
			}
			res.Meta.Descriptions[w.Name] += "; source batches: " + codecs
			for _, o := range wls {
				if o.Name != w.Name && o.DataName() == w.DataName() {
					res.Meta.Descriptions[o.Name] += "; source batches: " + codecs
				}
			}
			loaded[w.DataName()] = true
		}
		for round := 1; round <= cfg.Runs; round++ {
			order := append([]string{}, cfg.Replicators...)
			if round%2 == 0 {
				for a, b := 0, len(order)-1; a < b; a, b = a+1, b-1 {
					order[a], order[b] = order[b], order[a]
				}
			}
			limitProcs := cfg.LimitProcs
			if limitProcs <= 0 {
				limitProcs = DefaultLimitProcs(w)
			}
			if cfg.Limit && w.Delay == 0 && (len(cfg.LimitOn) == 0 || slices.Contains(cfg.LimitOn, w.Name)) {
				order = append([]string{Limit}, order...)
				if res.Meta.LimitProcs == nil {
					res.Meta.LimitProcs = map[string]int{}
				}
				res.Meta.LimitProcs[w.Name] = limitProcs
				res.Meta.LimitProps = limitProducerProps
			}
			for _, r := range order {
				fmt.Fprintf(cfg.Log, "kbench: %s round %d/%d: %s...\n", w.Name, round, cfg.Runs, r)
				var rr Result
				switch {
				case r == Limit:
					rr = env.MeasureLimit(ctx, w, n, round, limitProcs)
				case slices.Contains(cfg.Profile, w.Name) && round == cfg.Runs && r != MM2 && r != MM2EOS:
					rr = env.Replicate(ctx, r, w, n, round, profileSeconds(res, w.Name, r))
				default:
					rr = env.Replicate(ctx, r, w, n, round, 0)
				}
				rr.Load1 = loadAvg()
				res.Runs = append(res.Runs, rr)
				fmt.Fprintf(cfg.Log, "kbench:   %s\n", rr.Summary())
				if err := save(); err != nil {
					return res, err
				}
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
			}
		}
		// Drop source topics no later workload reads.
		if !usedLater(w.DataName(), wls[i+1:]) {
			if err := deleteAll(ctx, env.source, func(t string) bool {
				return !strings.HasPrefix(t, "bench-"+w.DataName()+"-")
			}); err != nil {
				return res, err
			}
		}
	}
	res.Meta.Finished = time.Now()
	return res, save()
}

// profileSeconds is how long to profile a run of repl on workload w: 80 %
// of the median copy time of its earlier runs, so that the profile covers
// most of the copy; 1 s without earlier runs.
func profileSeconds(res *Results, w, repl string) int {
	s := Summarize(res, w, repl)
	if s.OK == 0 {
		return 1
	}
	return max(1, int(0.8*s.Seconds.Med))
}

// loadAvg is the 1-minute load average, 0 if unknown.
func loadAvg() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f", &l)
	}
	return l
}

func usedLater(data string, rest []Workload) bool {
	for _, w := range rest {
		if w.DataName() == data {
			return true
		}
	}
	return false
}

// Summary is one line about a run for the progress log.
func (r Result) Summary() string {
	if r.Error != "" {
		return fmt.Sprintf("%s: FAILED: %s", r.Replicator, r.Error)
	}
	if r.Replicator == Limit {
		return fmt.Sprintf("%s: %d ProducerPerformance process(es): %d records in %.2fs (%.0f rec/s, %.1f MB/s), startup %.1fs",
			r.Replicator, max(1, r.Procs), r.Records, r.Seconds, r.RecordsPerSec, r.MBPerSec, r.StartupSeconds)
	}
	return fmt.Sprintf("%s: %d records in %.2fs (%.0f rec/s, %.1f MB/s), CPU %.1fs (%.1f s/GB), peak RSS %.0f MiB, startup %.1fs",
		r.Replicator, r.Records, r.Seconds, r.RecordsPerSec, r.MBPerSec, r.CPUSeconds, r.CPUPerGB(),
		float64(r.PeakRSS)/(1<<20), r.StartupSeconds)
}

// Merge joins the results of several benchmark runs on the same machine
// into one report: the first's metadata, the time span of all, the
// workloads of each in order (a later run's figures for a workload add to
// an earlier one's).
func Merge(rs ...*Results) *Results {
	if len(rs) == 0 {
		return &Results{}
	}
	out := *rs[0]
	out.Meta.Descriptions = maps.Clone(out.Meta.Descriptions)
	out.Meta.RTTMillis = maps.Clone(out.Meta.RTTMillis)
	out.Meta.LimitProcs = maps.Clone(out.Meta.LimitProcs)
	out.Meta.Workloads = slices.Clone(out.Meta.Workloads)
	out.Runs = slices.Clone(out.Runs)
	for _, r := range rs[1:] {
		m := r.Meta
		if m.Started.Before(out.Meta.Started) {
			out.Meta.Started = m.Started
		}
		if m.Finished.After(out.Meta.Finished) {
			out.Meta.Finished = m.Finished
		}
		out.Meta.Rounds = max(out.Meta.Rounds, m.Rounds)
		for _, w := range m.Workloads {
			if !slices.Contains(out.Meta.Workloads, w) {
				out.Meta.Workloads = append(out.Meta.Workloads, w)
				if out.Meta.Descriptions == nil {
					out.Meta.Descriptions = map[string]string{}
				}
				out.Meta.Descriptions[w] = m.Descriptions[w]
			}
		}
		for w, v := range m.LimitProcs {
			if out.Meta.LimitProcs == nil {
				out.Meta.LimitProcs = map[string]int{}
			}
			out.Meta.LimitProcs[w] = v
		}
		if len(out.Meta.LimitProps) == 0 {
			out.Meta.LimitProps = m.LimitProps
		}
		if out.Meta.Baseline == "" {
			out.Meta.Baseline, out.Meta.BaselineRev = m.Baseline, m.BaselineRev
		}
		for w, v := range m.RTTMillis {
			if out.Meta.RTTMillis == nil {
				out.Meta.RTTMillis = map[string]float64{}
			}
			out.Meta.RTTMillis[w] = v
		}
		out.Runs = append(out.Runs, r.Runs...)
	}
	out.VsBase = BaseRatios(&out)
	return &out
}

// LoadResults reads a results.json.
func LoadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	return &r, json.Unmarshal(b, &r)
}

func meta(cfg Config, libs string, wls []Workload) Meta {
	m := Meta{
		Started: time.Now(), Quick: cfg.Quick, Rounds: cfg.Runs, Cores: runtime.NumCPU(),
		Go: runtime.Version(), Kafka: kafkalocal.KafkaVersion, SourceKafka: cfg.SourceVersion, TasksMax: cfg.TasksMax, KmirrorSet: cfg.KmirrorSet,
		Baseline: cfg.Baseline, BaselineRev: cfg.BaselineRev,
		Descriptions: map[string]string{}, BrokerJVM: BrokerJVMOpts, MM2JVM: MM2JVMOpts,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%f", &kb)
		m.MemoryGiB = kb / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(javaPath(), "-version").CombinedOutput(); err == nil {
		m.Java = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	git := exec.Command("git", "describe", "--always", "--dirty")
	git.Dir = cfg.Root
	if out, err := git.Output(); err == nil {
		m.KmirrorRev = string(bytes.TrimSpace(out))
	}
	for _, w := range wls {
		m.Workloads = append(m.Workloads, w.Name)
		m.Descriptions[w.Name] = w.Describe(cfg.Quick)
	}
	if len(wls) > 0 {
		m.Properties = MM2Properties("s1", "t1", "SOURCE", "TARGET", wls[0], cfg.TasksMax)
	}
	_ = libs
	return m
}

// Command kbench benchmarks kmirror against Apache MirrorMaker 2 on two
// local Kafka clusters and writes docs/benchmarks.md with a PNG chart.
//
//	kbench run [--quick] [--runs N] [--workloads a,b] [--no-limit] [--limit-procs N] [--profile W] [--baseline BIN] [--out DIR] [--docs]
//	kbench report [--docs DIR] RESULTS.json...
//	kbench scale [--topics N] [--partitions N] [--out DIR]
//
// bench/run is a thin wrapper; see docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/bench/harness"
	"github.com/kmirror/kmirror/internal/kafkalocal"
)

const usage = `kbench: kmirror vs Apache MirrorMaker 2 on local Kafka clusters

Usage:
  kbench run [flags]            run the benchmark; results in --out/results.json
  kbench report [--docs DIR] [--json FILE] RESULTS.json...
                                (re)write the report from saved results;
                                several runs' results are merged (--json
                                writes the merged results)
  kbench scale [flags]          many idle partitions: catch-up, idle CPU and
                                RSS, new-topic detection, kmirror vs MM2;
                                writes --out/scale.json and scale.md (a
                                section for docs/benchmarks.md)
  kbench rebalance [flags]      workers joining, killed and stopped under a
                                steady producer: time until every partition
                                copies again, duplicates, missing; kmirror
                                group mode vs MM2 dedicated nodes; writes
                                --out/rebalance.json and rebalance.md

Scale flags: --topics N (1000) --partitions N (5) --per-partition N (20)
  --new-topics N (10) --idle D (60s) --refresh D (10s, refresh.topics.interval.seconds
  of both) --profile D (20s, kmirror's CPU profile after the idle window)
  --tasks-max N (4) --replicators kmirror,mm2 --timeout D (5m) --out DIR

Rebalance flags: --topics N (20) --partitions N (6) --rate N (3000 records/s)
  --workers N (2) --settle D (15s) --timeout D (90s, per event) --session D
  (10s, the group session timeout of both) --mm2-delay D (10s, MM2's
  scheduled.rebalance.max.delay.ms) --tasks-max N (6)
  --replicators kmirror-group,mm2,kmirror-group-eos,mm2-eos --out DIR
  --report FILE (print the section of a saved rebalance.json, run nothing)

Run flags:
  --quick             a few seconds per run (CI smoke test)
  --runs N            rounds per workload (default 3)
  --workloads LIST    comma-separated: small,kb,wan,zstd,keys-headers,kb-raw,wan-raw,wan-few (default all)
  --replicators LIST  kmirror,kmirror-pt,mm2 (default all three), and with
                      --baseline also base,base-pt (then the default is
                      kmirror,base,kmirror-pt,base-pt,mm2)
  --baseline BIN      a prebuilt kmirror binary (the build before a change),
                      run as "base" and "base-pt" exactly like kmirror and
                      kmirror-pt, in the same rounds; the report adds the
                      new/base ratios
  --baseline-rev TEXT which build BIN is, for the report (default: its VCS
                      revision, else the start of its SHA-256)
  --no-limit          skip the ProducerPerformance limit runs
  --limit-on LIST     run the limit only on these workloads (default small,kb,kb-raw)
  --limit-procs N     parallel ProducerPerformance processes of a limit run,
                      each writing its share to its own topic (default: the
                      workload's topic count, at least 2; 1 is the single
                      producer of earlier reports)
  --profile LIST      CPU-profile the last round's kmirror and kmirror-pt runs
                      (and base, base-pt) on these workloads (default
                      kb,zstd,kb-raw; "" for none)
  --tasks-max N       tasks.max in mm2.properties (default 4)
  --out DIR           results folder (default bench/results/<time>)
  --kmirror-set LINE  add a properties line to kmirror's mm2.properties, e.g.
                      "kmirror.fetches.per.broker = 1" (repeatable; for
                      tuning experiments, listed in the report)
  --source-version V  run the source on the older Kafka release V (0.11.0.3,
                      1.1.1, 2.8.2 or 3.9.1, via kafkalocal as
                      scripts/kafka-local up --version); the target stays
                      on the pinned release; no delayed workloads
  --timeout D         longest one run may take to copy everything (default
                      15m, 4m with --quick); a replicator that cannot
                      connect fails after it
  --docs DIR          also write benchmarks.md and benchmarks.png into DIR
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := kafkalocal.FindRoot()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("kbench "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	docs := fs.String("docs", "", "write benchmarks.md and benchmarks.png into this folder")
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "run":
		quick := fs.Bool("quick", false, "small record counts")
		runs := fs.Int("runs", 3, "rounds per workload")
		wls := fs.String("workloads", "", "comma-separated workloads")
		repls := fs.String("replicators", "", "comma-separated replicators")
		noLimit := fs.Bool("no-limit", false, "skip the ProducerPerformance limit")
		limitOn := fs.String("limit-on", "small,kb,kb-raw", "workloads with a limit run")
		limitProcs := fs.Int("limit-procs", 0, "parallel ProducerPerformance processes of a limit run (0: the workload's topic count, at least 2)")
		tasks := fs.Int("tasks-max", 4, "tasks.max in mm2.properties")
		profile := fs.String("profile", "kb,zstd,kb-raw", "workloads whose last-round kmirror runs are CPU-profiled")
		out := fs.String("out", "", "results folder")
		baseline := fs.String("baseline", "", "a prebuilt kmirror binary run as base and base-pt")
		baselineRev := fs.String("baseline-rev", "", "which build the --baseline binary is")
		timeout := fs.Duration("timeout", 0, "longest a run may take to copy everything (default 15m, 4m with --quick)")
		srcVersion := fs.String("source-version", "", "run the source on this older Kafka release (e.g. 0.11.0.3, 2.8.2); the target stays on the pinned one")
		var set listFlag
		fs.Var(&set, "kmirror-set", "a properties line added to kmirror's mm2.properties (repeatable)")
		if fs.Parse(args) != nil {
			return 2
		}
		if *limitProcs < 0 {
			fmt.Fprintln(stderr, "kbench run: --limit-procs must be 1 or more (0: the default)")
			return 2
		}
		if *out == "" {
			*out = filepath.Join(root, "bench", "results", time.Now().Format("20060102-150405"))
		}
		cfg := harness.Config{
			Root: root, Dir: *out, Workloads: split(*wls), Replicators: split(*repls),
			Runs: *runs, Quick: *quick, Limit: !*noLimit, LimitOn: split(*limitOn), LimitProcs: *limitProcs, TasksMax: *tasks, Profile: split(*profile), KmirrorSet: set, Log: stderr,
			Baseline: *baseline, BaselineRev: *baselineRev, SourceVersion: *srcVersion, Timeout: *timeout,
		}
		res, err := harness.Run(ctx, cfg)
		if res != nil && *docs != "" {
			if werr := harness.WriteReport(res, *docs, readAnalysis(root)); werr != nil {
				fmt.Fprintln(stderr, "kbench: report:", werr)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "kbench:", err)
			return 1
		}
		fmt.Fprint(stdout, harness.Table(res))
		fmt.Fprintf(stdout, "\nresults in %s\n", filepath.Join(*out, "results.json"))
		return 0
	case "scale":
		c := harness.ScaleConfig{Root: root, Log: stderr}
		fs.IntVar(&c.Topics, "topics", 1000, "source topics")
		parts := fs.Int("partitions", 5, "partitions per topic")
		fs.IntVar(&c.PerPart, "per-partition", 20, "backlog records per partition")
		fs.IntVar(&c.NewTopics, "new-topics", 10, "topics created while idle")
		fs.DurationVar(&c.Idle, "idle", time.Minute, "idle window")
		fs.DurationVar(&c.Refresh, "refresh", 10*time.Second, "refresh.topics.interval.seconds of both replicators")
		fs.DurationVar(&c.Profile, "profile", 20*time.Second, "kmirror CPU profile after the idle window (0: none)")
		fs.IntVar(&c.TasksMax, "tasks-max", 4, "tasks.max in mm2.properties")
		fs.DurationVar(&c.Timeout, "timeout", 5*time.Minute, "longest catch-up, and longest detection")
		repls := fs.String("replicators", "kmirror,mm2", "replicators, in order")
		out := fs.String("out", "", "results folder")
		if fs.Parse(args) != nil {
			return 2
		}
		if c.Topics < 1 || *parts < 1 || c.PerPart < 1 || c.Refresh < time.Second {
			fmt.Fprintln(stderr, "kbench scale: --topics, --partitions and --per-partition must be 1 or more, --refresh at least 1s")
			return 2
		}
		c.Partitions, c.Replicators = int32(*parts), split(*repls)
		if *out == "" {
			*out = filepath.Join(root, "bench", "results", "scale-"+time.Now().Format("20060102-150405"))
		}
		c.Dir = *out
		res, err := harness.RunScale(ctx, c)
		if res != nil {
			sec := harness.ScaleSection(res)
			if werr := os.WriteFile(filepath.Join(*out, "scale.md"), []byte(sec), 0o644); werr != nil {
				fmt.Fprintln(stderr, "kbench:", werr)
			}
			fmt.Fprint(stdout, sec)
		}
		if err != nil {
			fmt.Fprintln(stderr, "kbench:", err)
			return 1
		}
		return 0
	case "rebalance":
		c := harness.RebalanceConfig{Root: root, Log: stderr}
		fs.IntVar(&c.Topics, "topics", 20, "source topics")
		parts := fs.Int("partitions", 6, "partitions per topic")
		fs.IntVar(&c.Rate, "rate", 3000, "records per second over all partitions")
		fs.IntVar(&c.Workers, "workers", 2, "workers at the start")
		fs.DurationVar(&c.Settle, "settle", 15*time.Second, "wait after every partition copies again, before the next event")
		fs.DurationVar(&c.Timeout, "timeout", 90*time.Second, "longest wait for every partition to copy again")
		fs.DurationVar(&c.Session, "session", 10*time.Second, "group session timeout of both replicators")
		fs.DurationVar(&c.MM2Delay, "mm2-delay", 10*time.Second, "MM2's scheduled.rebalance.max.delay.ms")
		fs.IntVar(&c.TasksMax, "tasks-max", 6, "tasks.max in mm2.properties")
		repls := fs.String("replicators", "kmirror-group,mm2,kmirror-group-eos,mm2-eos", "replicators, in order")
		out := fs.String("out", "", "results folder")
		report := fs.String("report", "", "only print the section for this rebalance.json")
		if fs.Parse(args) != nil {
			return 2
		}
		if *report != "" {
			var res harness.RebalanceResults
			b, err := os.ReadFile(*report)
			if err == nil {
				err = json.Unmarshal(b, &res)
			}
			if err != nil {
				fmt.Fprintln(stderr, "kbench:", err)
				return 1
			}
			fmt.Fprint(stdout, harness.RebalanceSection(&res))
			return 0
		}
		if c.Topics < 1 || *parts < 1 || c.Rate < 1 || c.Workers < 2 || c.Session < time.Second {
			fmt.Fprintln(stderr, "kbench rebalance: --topics, --partitions and --rate must be 1 or more, --workers 2 or more, --session at least 1s")
			return 2
		}
		c.Partitions, c.Replicators = int32(*parts), split(*repls)
		if *out == "" {
			*out = filepath.Join(root, "bench", "results", "rebalance-"+time.Now().Format("20060102-150405"))
		}
		c.Dir = *out
		res, err := harness.RunRebalance(ctx, c)
		if res != nil {
			sec := harness.RebalanceSection(res)
			if werr := os.WriteFile(filepath.Join(*out, "rebalance.md"), []byte(sec), 0o644); werr != nil {
				fmt.Fprintln(stderr, "kbench:", werr)
			}
			fmt.Fprint(stdout, sec)
		}
		if err != nil {
			fmt.Fprintln(stderr, "kbench:", err)
			return 1
		}
		return 0
	case "report":
		jsonOut := fs.String("json", "", "also write the (merged) results to this file")
		if fs.Parse(args) != nil {
			return 2
		}
		if fs.NArg() == 0 {
			fmt.Fprintln(stderr, "kbench report: want RESULTS.json")
			return 2
		}
		var all []*harness.Results
		for _, f := range fs.Args() {
			r, err := harness.LoadResults(f)
			if err == nil {
				err = harness.RefreshProfiles(ctx, r, filepath.Dir(f))
			}
			if err != nil {
				fmt.Fprintln(stderr, "kbench:", err)
				return 1
			}
			all = append(all, r)
		}
		res := harness.Merge(all...)
		if *jsonOut != "" {
			b, err := json.MarshalIndent(res, "", "  ")
			if err == nil {
				err = os.WriteFile(*jsonOut, b, 0o644)
			}
			if err != nil {
				fmt.Fprintln(stderr, "kbench:", err)
				return 1
			}
		}
		if *docs != "" {
			if err := harness.WriteReport(res, *docs, readAnalysis(root)); err != nil {
				fmt.Fprintln(stderr, "kbench:", err)
				return 1
			}
		}
		fmt.Fprint(stdout, harness.Table(res))
		return 0
	}
	fmt.Fprintf(stderr, "kbench: unknown command %q\n%s", cmd, usage)
	return 2
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readAnalysis returns the hand-written analysis for the report, if any.
func readAnalysis(root string) string {
	b, err := os.ReadFile(filepath.Join(root, harness.AnalysisFile))
	if err != nil {
		return ""
	}
	return string(b)
}

// listFlag collects the values of a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, "; ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

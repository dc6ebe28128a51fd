package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/metrics"
)

// runCmd is "kmirror run": every enabled flow of an MM2 properties file.
func runCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	clusters := fs.String("clusters", "", "comma-separated target cluster aliases: run only flows into these (all when empty)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	memLimit := fs.String("memory-limit", "128MiB", "soft limit of the Go heap (GOMEMLIMIT syntax; the GOMEMLIMIT variable wins); 'off' for none")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics and profiles at /debug/pprof/ (off when empty)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "kmirror run: want exactly one MM2 properties file")
		return 2
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror run:", err)
		return 2
	}
	if err := setMemoryLimit(*memLimit); err != nil {
		fmt.Fprintln(stderr, "kmirror run:", err)
		return 2
	}
	cfg, err := config.Load(fs.Arg(0), os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror run: invalid configuration:")
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	var only []string
	if *clusters != "" {
		for _, c := range strings.Split(*clusters, ",") {
			only = append(only, strings.TrimSpace(c))
		}
	}
	flows := cfg.Flows
	if len(only) > 0 {
		if flows, err = cfg.FlowsTargeting(only); err != nil {
			fmt.Fprintln(stderr, "kmirror run:", err)
			return 1
		}
	}
	if len(flows) == 0 {
		fmt.Fprintf(stderr, "kmirror run: %s enables no flow (set A->B.enabled = true)\n", fs.Arg(0))
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := metrics.New()
	if *metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		srv := &http.Server{Addr: *metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server failed", "addr", *metricsAddr, "err", err)
			}
		}()
		defer srv.Close()
	}

	origin := flow.OriginHeaderFlows(cfg, flows)
	beats := heartbeatPairs(cfg, only, log)
	var wg sync.WaitGroup
	errs := make([]error, len(flows)+len(beats))
	for i, fc := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := flow.New(fc, flow.Options{AddOrigin: origin[fc.Name()]}, m, log)
			if errs[i] = f.Run(ctx); errs[i] != nil {
				// One broken flow stops the process: a partial replicator
				// that looks alive is worse than a loud exit.
				stop()
			}
		}()
	}
	for i, fc := range beats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[len(flows)+i] = flow.New(fc, flow.Options{}, m, log).RunHeartbeatsOnly(ctx); errs[len(flows)+i] != nil {
				stop()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		log.Error("kmirror stopped with an error", "err", err)
		return 1
	}
	return 0
}

// heartbeatPairs returns the pairs that replicate nothing but, as in MM2,
// emit heartbeats: every ordered pair of clusters whose flow is disabled,
// whose target is selected by --clusters, and whose heartbeats are on.
func heartbeatPairs(cfg *config.Config, only []string, log *slog.Logger) []*config.Flow {
	enabled := make(map[string]bool)
	for _, f := range cfg.Flows {
		enabled[f.Name()] = true
	}
	var out []*config.Flow
	for _, s := range cfg.Clusters {
		for _, t := range cfg.Clusters {
			if s == t || enabled[s+"->"+t] || (len(only) > 0 && !slices.Contains(only, t)) {
				continue
			}
			f, err := cfg.Pair(s, t)
			if err != nil {
				log.Warn("no heartbeats for pair", "pair", s+"->"+t, "err", err)
				continue
			}
			if f.EmitHeartbeatsEnabled {
				out = append(out, f)
			}
		}
	}
	return out
}

// setMemoryLimit applies --memory-limit unless GOMEMLIMIT is set. A
// replicator's heap is mostly data passing through; a soft limit keeps the
// garbage collector from letting it grow to twice the live data.
func setMemoryLimit(v string) error {
	if os.Getenv("GOMEMLIMIT") != "" || v == "off" {
		return nil
	}
	n, err := parseBytes(v)
	if err != nil {
		return fmt.Errorf("--memory-limit %q: %v", v, err)
	}
	debug.SetMemoryLimit(n)
	return nil
}

// parseBytes reads a size in GOMEMLIMIT's syntax: a number with an optional
// B, KiB, MiB, GiB or TiB suffix.
func parseBytes(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size such as 128MiB")
	}
	return n * mult, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

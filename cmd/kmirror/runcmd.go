package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/dashboard"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/rest"
	"github.com/kmirror/kmirror/internal/runner"
	"github.com/kmirror/kmirror/internal/topology"
)

// runCmd is "kmirror run": every enabled flow of an MM2 properties file.
func runCmd(args []string, stdout, stderr io.Writer) int {
	return runExplained(args, stdout, stderr, nil)
}

// runExplained is runCmd whose flow errors in the status (REST API,
// dashboard) and the dashboard's log pass through explain when it is not
// nil (kmirror mm1's flags for MM2 keys; its stderr explains the log).
func runExplained(args []string, stdout, stderr io.Writer, explain func(string) string) int {
	o := parseRunArgs(args, stderr)
	if o == nil {
		return 2
	}
	log, logs, err := startProcess(stderr, o.logFormat, o.logLevel, o.memLimit, explain)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror run:", err)
		return 2
	}
	var only []string
	if o.clusters != "" {
		for _, c := range strings.Split(o.clusters, ",") {
			only = append(only, strings.TrimSpace(c))
		}
	}
	cfg, err := runner.Load(o.file, only, log)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror run: invalid configuration:")
		fmt.Fprintln(stderr, err)
		return 1
	}
	return runFlows(o, cfg, only, logs, log, explain, stderr)
}

// runOptions is a parsed "kmirror run" command line.
type runOptions struct {
	file                                                           string
	clusters, logFormat, logLevel, memLimit, restAddr, metricsAddr string
	stopTimeout                                                    time.Duration
}

// parseRunArgs reads run's flags and file; on a usage error it says so on
// stderr and returns nil.
func parseRunArgs(args []string, stderr io.Writer) *runOptions {
	fs := flag.NewFlagSet("kmirror run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	clusters := fs.String("clusters", "", "comma-separated target cluster aliases: run only flows into these (all when empty)")
	proc := addProcFlags(fs)
	restAddr := fs.String("rest-addr", "", "serve the REST API at ADDR (overrides kmirror.rest.listener)")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty); Go profiles are on the REST API, behind its token")
	if err := fs.Parse(args); err != nil {
		return nil
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "kmirror run: want exactly one MM2 properties file")
		return nil
	}
	if *proc.stopTimeout <= 0 {
		fmt.Fprintln(stderr, "kmirror run:", errShutdownTimeout)
		return nil
	}
	return &runOptions{file: fs.Arg(0), clusters: *clusters, logFormat: *proc.logFormat, logLevel: *proc.logLevel, memLimit: *proc.memLimit,
		restAddr: *restAddr, metricsAddr: *metricsAddr, stopTimeout: *proc.stopTimeout}
}

// runFlows serves the metrics, the REST API and the dashboard, runs the
// flows of cfg until a signal stops them, and returns the exit code.
func runFlows(o *runOptions, cfg *config.Config, only []string, logs *dashboard.LogRing, log *slog.Logger, explain func(string) string, stderr io.Writer) int {
	sigs, unnotify := stopSignals()
	defer unnotify()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	m := metrics.New()
	if o.metricsAddr != "" {
		srv, err := serveMetrics(o.metricsAddr, m, log)
		if err != nil {
			fmt.Fprintln(stderr, "kmirror run:", err)
			return 1
		}
		defer srv.Close()
	}

	run := runner.New(o.file, cfg, only, m, log)
	run.SetStopTimeout(o.stopTimeout)
	run.Explain = explain
	// The topology view scans the heartbeats of the configuration in
	// effect (a reload may change it).
	dash := dashboard.New(dashboard.Config{Source: run, Metrics: m, Logs: logs,
		Topology: func(context.Context) topology.Report { return scanTopology(run.Config(), topologyScanTimeout) }})
	restSrv, err := startREST(cfg, o.restAddr, run, dash, log)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror run:", err)
		return 1
	}
	if restSrv != nil {
		defer restSrv.Close()
		go dash.Run(ctx)
	}
	defer reloadOnHangup(run, log)()
	done := make(chan error, 1)
	go func() { done <- run.Run(ctx) }()
	return waitRun(stop, sigs, done, o.stopTimeout, log)
}

// reloadOnHangup reloads the configuration on each SIGHUP until the
// returned function is called.
func reloadOnHangup(run *runner.Runner, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			switch err := run.Reload(); {
			case errors.Is(err, runner.ErrNotRunning):
				log.Warn("reload on SIGHUP ignored: kmirror is stopping")
			case err != nil:
				log.Error("reload on SIGHUP refused; the running flows go on", "err", err)
			}
		}
	}()
	return func() { signal.Stop(hup) }
}

// procFlags are the flags kmirror run and kmirror connect share: the
// log's format and level, the heap's soft limit and how long a stop may
// take.
type procFlags struct {
	logFormat, logLevel, memLimit *string
	stopTimeout                   *time.Duration
}

func addProcFlags(fs *flag.FlagSet) procFlags {
	return procFlags{
		logFormat:   fs.String("log-format", "text", "log format: text or json"),
		logLevel:    fs.String("log-level", "info", "log level: debug, info, warn or error"),
		memLimit:    fs.String("memory-limit", "128MiB", "soft limit of the Go heap (GOMEMLIMIT syntax; the GOMEMLIMIT variable wins); 'off' for none"),
		stopTimeout: shutdownTimeoutFlag(fs),
	}
}

// startProcess makes the logger, whose records the ring keeps for the
// dashboard (passed through explain when it is not nil), and applies the
// memory limit.
func startProcess(stderr io.Writer, format, level, memLimit string, explain func(string) string) (*slog.Logger, *dashboard.LogRing, error) {
	log, err := newLogger(stderr, format, level)
	if err != nil {
		return nil, nil, err
	}
	if err := setMemoryLimit(memLimit); err != nil {
		return nil, nil, err
	}
	logs := dashboard.NewLogRing(dashboard.DefaultLogs)
	logs.Explain = explain
	return slog.New(logs.Wrap(log.Handler())), logs, nil
}

// shutdownTimeoutFlag defines --shutdown-timeout on fs: how long a stop
// waits for the flows (runner.SetStopTimeout, waitRun).
func shutdownTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("shutdown-timeout", runner.DefaultStopTimeout, "on SIGTERM/SIGINT, how long to wait for the flows to stop (records in flight, progress saved) before exiting anyway; a second signal exits at once")
}

var errShutdownTimeout = errors.New("--shutdown-timeout must be positive")

// stopSignals returns the channel of SIGTERM and SIGINT for waitRun (room
// for two: the second exits at once) and the func that stops it.
func stopSignals() (<-chan os.Signal, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return sigs, func() { signal.Stop(sigs) }
}

// waitRun waits for Run to return (done) and returns the exit code. The
// first signal stops the flows (cancel); a second one does not wait for
// them: it returns 1 at once.
func waitRun(cancel context.CancelFunc, sigs <-chan os.Signal, done <-chan error, timeout time.Duration, log *slog.Logger) int {
	stopping := false
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Error("kmirror stopped with an error", "err", err)
				return 1
			}
			if stopping {
				log.Info("kmirror stopped")
			}
			return 0
		case s := <-sigs:
			if !stopping {
				stopping = true
				log.Info("stopping: records in flight finish and progress is saved; a second signal exits at once",
					"signal", s.String(), "timeout", timeout)
				cancel()
				continue
			}
			log.Error("second signal: exiting at once, without waiting for the flows to stop; progress since their last save is not saved and those records are copied again at the next start",
				"signal", s.String())
			return 1
		}
	}
}

// topologyScanTimeout bounds each cluster's heartbeat scan for the
// dashboard's topology view.
const topologyScanTimeout = 10 * time.Second

// restTokenEnv holds the REST token when the file has none.
const restTokenEnv = "KMIRROR_REST_TOKEN"

// startREST serves the REST API when --rest-addr or kmirror.rest.listener
// asks for it. Without a token it refuses to start unless
// kmirror.rest.auth = none says the API may be open. A reload applies a
// changed kmirror.rest.token (restReload).
func startREST(cfg *config.Config, addr string, run *runner.Runner, dash *dashboard.Dashboard, log *slog.Logger) (*http.Server, error) {
	if addr == "" {
		addr = cfg.REST.Listener
	}
	if addr == "" {
		run.BeforeReload = restReload(cfg.REST, nil, log)
		return nil, nil
	}
	token := cfg.REST.Token
	if token == "" {
		token = os.Getenv(restTokenEnv)
	}
	if token == "" && !cfg.REST.Open {
		return nil, fmt.Errorf("the REST API needs a token: set %s (through a config provider) or %s, or %s = none for an open API", config.RESTTokenKey, restTokenEnv, config.RESTAuthKey)
	}
	tok := rest.NewToken(token)
	run.BeforeReload = restReload(cfg.REST, tok, log)
	srv, _, err := rest.StartToken(run, rest.Listen{Name: "REST API", Addr: addr, CertFile: cfg.REST.TLSCert, Key: cfg.REST.TLSKey, AllowedHosts: cfg.REST.AllowedHosts}, tok, log,
		rest.Mount{Patterns: []string{"/ui/"}, Build: dash.Mount})
	return srv, err
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

// serveMetrics serves m's Prometheus metrics at http://addr/metrics.
func serveMetrics(addr string, m *metrics.Metrics, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv, a, err := rest.Serve(rest.Listen{Name: "metrics", Addr: addr}, mux, log)
	if err != nil {
		return nil, err
	}
	log.Info("metrics listening", "addr", a.String())
	return srv, nil
}

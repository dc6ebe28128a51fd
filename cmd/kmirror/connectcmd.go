package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/connect"
	"github.com/kmirror/kmirror/internal/dashboard"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/rest"
	"github.com/kmirror/kmirror/internal/runner"
)

// connectCmd is "kmirror connect": a Connect distributed worker's REST API
// for MM2's connectors, whose configs live in the worker's config topic.
func connectCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	proc := addProcFlags(fs)
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "kmirror connect: want exactly one Connect worker properties file")
		return 2
	}
	if *proc.stopTimeout <= 0 {
		fmt.Fprintln(stderr, "kmirror connect:", errShutdownTimeout)
		return 2
	}
	log, logs, err := startProcess(stderr, *proc.logFormat, *proc.logLevel, *proc.memLimit, nil)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror connect:", err)
		return 2
	}
	w, err := connect.LoadWorker(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "kmirror connect: invalid worker file:")
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, warn := range w.Warnings {
		log.Warn(warn)
	}
	token := w.REST.Token
	if token == "" {
		token = os.Getenv(restTokenEnv)
	}
	if token == "" && !w.REST.Open {
		fmt.Fprintf(stderr, "kmirror connect: the REST API needs a token: set %s or %s, or %s = none for an open API (as Connect's default)\n", config.RESTTokenKey, restTokenEnv, config.RESTAuthKey)
		return 1
	}
	if token == "" && !w.ListenerSet {
		// Connect listens on every interface by default; an API without a
		// token does so only when the file says where (listeners or
		// rest.host.name).
		w.Listener = connect.LoopbackListener(w.Listener)
		log.Info("the Connect REST API has no token, so it listens on loopback only: set listeners (or rest.host.name) to choose the interface", "addr", w.Listener)
	}
	// As kmirror run: the first SIGTERM / SIGINT stops (the flows, then
	// the worker's clients), a second one exits at once (waitRun).
	sigs, unnotify := stopSignals()
	defer unnotify()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- serveConnect(ctx, w, token, *metricsAddr, *proc.stopTimeout, logs, log) }()
	return waitRun(stop, sigs, done, *proc.stopTimeout, log)
}

// serveConnect runs the worker until ctx ends or it fails.
func serveConnect(ctx context.Context, w *connect.Worker, token, metricsAddr string, stopTimeout time.Duration, logs *dashboard.LogRing, log *slog.Logger) error {
	m := metrics.New()
	if metricsAddr != "" {
		srv, err := serveMetrics(metricsAddr, m, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	store, err := connect.OpenStore(ctx, w, log)
	if err != nil {
		return err
	}
	defer store.Close()
	statuses, err := connect.OpenStatusStore(ctx, w, log)
	if err != nil {
		return err
	}
	defer statuses.Close()
	run := runner.New("", &config.Config{Path: w.Path}, nil, m, log)
	run.SetStopTimeout(stopTimeout)
	h := connect.NewHerder(w, store, run, log)
	api := connect.NewAPI(h, clusterID(ctx, w))
	// The dashboard shows every connector's flow on this worker.
	dash := dashboard.New(dashboard.Config{Source: h, Metrics: m, Logs: logs})
	srv, _, err := rest.Start(run, rest.Listen{Name: "Connect REST API", Addr: w.Listener, CertFile: w.REST.TLSCert, Key: w.REST.TLSKey, AllowedHosts: w.REST.AllowedHosts}, token, log,
		rest.Mount{Patterns: connect.Patterns, Build: api.Handler}, rest.Mount{Patterns: []string{"/ui/"}, Build: dash.Mount})
	if err != nil {
		return err
	}
	defer srv.Close()
	// Join the workers' group once the API answers: the others forward
	// requests to this worker as soon as the group lists it.
	cluster, err := connect.JoinCluster(w, w.URL(), h.Kick, log)
	if err != nil {
		return err
	}
	defer cluster.Close()
	h.SetCluster(cluster, statuses)
	log.Info("connect worker started", "worker_id", w.WorkerID, "url", w.URL(), "group", w.GroupID, "config_topic", w.ConfigTopic, "status_topic", w.StatusTopic, "connectors", len(store.List()))
	go h.Run(ctx)
	go dash.Run(ctx)
	return run.Run(ctx)
}

// clusterID is the worker cluster's ID, for GET /; "" when unknown.
func clusterID(ctx context.Context, w *connect.Worker) string {
	cl, _, err := clients.New(clients.ID("connect", "admin"), clients.Admin, w.Client)
	if err != nil {
		return ""
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return ""
	}
	return md.Cluster
}

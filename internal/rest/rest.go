// Package rest serves kmirror's HTTP API: health for probes, and, behind a
// bearer token, flow status, pause, resume, restart, configuration reload
// and Go profiles; and the limits every kmirror HTTP listener has.
package rest

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/runner"
)

// Control is what the API acts on; *runner.Runner implements it.
type Control interface {
	Status() []runner.FlowStatus
	Pause(name string) error
	Resume(name string) error
	Restart(name string) error
	Reload() error
}

// Start serves the API as l says, with token (see Handler), and warns
// when an API without a token listens beyond loopback.
func Start(c Control, l Listen, token string, log *slog.Logger, mounts ...Mount) (*http.Server, net.Addr, error) {
	srv, addr, err := Serve(l, Handler(c, token, log, mounts...), log)
	if err != nil {
		return nil, nil, err
	}
	log.Info(l.Name+" listening", "addr", addr.String(), "tls", l.CertFile != "", "auth", token != "")
	if token == "" && !Loopback(l.Addr) {
		log.Warn(l.Name+" has no authentication and listens beyond loopback: whoever reaches it can pause, restart and reload flows", "addr", addr.String())
	}
	return srv, addr, nil
}

// Handler returns the API. token guards every endpoint but /health and
// /ready; an empty token turns the guard off (kmirror.rest.auth = none
// must say so), and then Go profiles (/debug/pprof/) are not served.
// Requests that change state are refused when a browser sends them from
// another origin (net/http's CrossOriginProtection), so a web page cannot
// pause or reload flows through a visitor's browser even without a token.
func Handler(c Control, token string, log *slog.Logger, mounts ...Mount) http.Handler {
	a := &api{c: c, token: token, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", a.health)
	mux.HandleFunc("GET /ready", a.ready)
	mux.HandleFunc("GET /status", a.auth(a.status))
	mux.HandleFunc("GET /flows/{name}", a.auth(a.flow))
	mux.HandleFunc("POST /flows/{name}/pause", a.auth(a.act("pause", c.Pause)))
	mux.HandleFunc("POST /flows/{name}/resume", a.auth(a.act("resume", c.Resume)))
	mux.HandleFunc("POST /flows/{name}/restart", a.auth(a.act("restart", c.Restart)))
	mux.HandleFunc("POST /reload", a.auth(a.reload))
	connect := false
	for _, m := range mounts {
		h := m.Build(func(h http.Handler) http.Handler { return a.auth(h.ServeHTTP) })
		for _, p := range m.Patterns {
			mux.Handle(p, h)
			connect = connect || p == "/connectors"
		}
	}
	if !connect {
		// Kafka Connect's connector API, which articles show for MM2, is
		// served by kmirror connect; here it says so (no token needed: it
		// reveals nothing).
		mux.HandleFunc("/connectors", connectors)
		mux.HandleFunc("/connectors/", connectors)
	}
	if token != "" {
		mux.HandleFunc("GET /debug/pprof/", a.auth(pprof.Index))
		mux.HandleFunc("GET /debug/pprof/cmdline", a.auth(pprof.Cmdline))
		mux.HandleFunc("GET /debug/pprof/profile", a.auth(pprof.Profile))
		mux.HandleFunc("GET /debug/pprof/symbol", a.auth(pprof.Symbol))
		mux.HandleFunc("GET /debug/pprof/trace", a.auth(pprof.Trace))
	}
	return http.NewCrossOriginProtection().Handler(mux)
}

// Mount serves more on the API's listener: the handler Build makes, given
// the API's token guard for what must be authenticated, answers the
// ServeMux patterns in Patterns (such as "/ui/").
type Mount struct {
	Patterns []string
	Build    func(guard func(http.Handler) http.Handler) http.Handler
}

type api struct {
	c     Control
	token string
	log   *slog.Logger
}

func (a *api) auth(next http.HandlerFunc) http.HandlerFunc {
	if a.token == "" {
		return next
	}
	want := []byte("Bearer " + a.token)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kmirror"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{"missing or wrong bearer token"})
			return
		}
		next(w, r)
	}
}

// connectorsMsg answers Kafka Connect's /connectors API.
const connectorsMsg = "kmirror run serves no Kafka Connect connectors: run kmirror connect WORKER-FILE for Connect's REST API " +
	"(docs/operations.md, Connect REST API), or put the connector's settings into the MM2 properties file: source.cluster.alias A and target.cluster.alias B " +
	"become A->B.enabled = true, source.cluster.bootstrap.servers becomes A.bootstrap.servers, other keys become A->B.<key>; " +
	"then POST /reload (or SIGHUP)"

func connectors(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusNotImplemented, errorBody{connectorsMsg})
}

type errorBody struct {
	Error string `json:"error"`
}

// health answers while the process serves requests: a liveness probe.
func (a *api) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready answers 200 when every flow runs (paused counts: an operator chose
// it) and no partition is stopped, stalled or otherwise held back by a
// problem (datapath.NotReady) and no flow reports a problem (its progress
// topic missing on the target), 503 otherwise: a readiness probe. It names
// no flow, so it needs no token; a problem names internal topics only.
func (a *api) ready(w http.ResponseWriter, _ *http.Request) {
	flows, parts := 0, 0
	var problems []string // a running flow's trouble, such as its progress topic missing
	for _, f := range a.c.Status() {
		if f.State != "running" && f.State != "paused" {
			flows++
		}
		if f.Problem != "" {
			problems = append(problems, f.Problem)
		}
		parts += datapath.NotReady(f.Partitions)
	}
	if flows > 0 || parts > 0 || len(problems) > 0 {
		body := map[string]any{"status": "not ready", "flows_not_running": flows, "partitions_stopped_or_stalled": parts}
		if len(problems) > 0 {
			body["problems"] = problems
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"flows": a.c.Status()})
}

func (a *api) flow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	for _, f := range a.c.Status() {
		if f.Name == name {
			writeJSON(w, http.StatusOK, f)
			return
		}
	}
	writeJSON(w, http.StatusNotFound, errorBody{"unknown flow " + quote(name)})
}

func (a *api) act(what string, fn func(string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := fn(name); err != nil {
			code := http.StatusConflict
			if errors.Is(err, runner.ErrUnknownFlow) {
				code = http.StatusNotFound
			}
			writeJSON(w, code, errorBody{err.Error()})
			return
		}
		a.log.Info("flow "+what+" through the REST API", "flow", name, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, map[string]string{"flow": name, "done": what})
	}
}

func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	if err := a.c.Reload(); err != nil {
		// Config errors name file, line and key; values of secrets are
		// never part of them (internal/config).
		writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
		return
	}
	a.log.Info("configuration reloaded through the REST API", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"done": "reload"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

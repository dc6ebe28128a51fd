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
	"strings"
	"sync/atomic"

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

// Token is the API's bearer token; Set changes it while the API serves,
// as a reload of kmirror.rest.token does.
type Token struct {
	empty bool
	want  atomic.Pointer[[]byte] // "Bearer " + the token
}

// NewToken returns token; "" is an API without a token.
func NewToken(token string) *Token {
	t := &Token{empty: token == ""}
	t.store(token)
	return t
}

// ErrTokenOnOff is Set's error when token would turn the guard on or
// off: an API started without a token has no profiles and another origin
// check, so that takes a restart.
var ErrTokenOnOff = errors.New("turning the REST API's token on or off takes a restart")

// Set makes token the one requests must bring, from the next request on;
// the previous one is refused from then.
func (t *Token) Set(token string) error {
	if (token == "") != t.empty {
		return ErrTokenOnOff
	}
	t.store(token)
	return nil
}

// Matches reports whether token is the one requests must bring.
func (t *Token) Matches(token string) bool { return t.bearer("Bearer " + token) }

// bearer reports whether an Authorization header brings the token.
func (t *Token) bearer(header string) bool {
	return subtle.ConstantTimeCompare([]byte(header), *t.want.Load()) == 1
}

func (t *Token) store(token string) {
	b := []byte("Bearer " + token)
	t.want.Store(&b)
}

// Start serves the API as l says, with token (see Handler) and, without
// a token, the hosts l.AllowedHosts names (see HostGuard), and warns when
// an API without a token listens beyond loopback.
func Start(c Control, l Listen, token string, log *slog.Logger, mounts ...Mount) (*http.Server, net.Addr, error) {
	return StartToken(c, l, NewToken(token), log, mounts...)
}

// StartToken is Start with a token that may change while the API serves.
func StartToken(c Control, l Listen, tok *Token, log *slog.Logger, mounts ...Mount) (*http.Server, net.Addr, error) {
	token := ""
	if !tok.empty {
		token = "set" // whether there is one
	}
	srv, addr, err := Serve(l, handler(c, tok, l.AllowedHosts, log, mounts...), log)
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
// another origin (net/http's CrossOriginProtection). That alone does not
// stop a page whose name was rebound to the API's address (DNS
// rebinding), which the browser takes for the same origin: without a
// token, HostGuard also refuses every Host and Origin but localhost and
// IP addresses. Handler serves no other names; Start adds the operator's.
func Handler(c Control, token string, log *slog.Logger, mounts ...Mount) http.Handler {
	return handler(c, NewToken(token), nil, log, mounts...)
}

// HandlerToken is Handler with a token that may change while the API
// serves (Token.Set).
func HandlerToken(c Control, tok *Token, log *slog.Logger, mounts ...Mount) http.Handler {
	return handler(c, tok, nil, log, mounts...)
}

func handler(c Control, tok *Token, hosts []string, log *slog.Logger, mounts ...Mount) http.Handler {
	token := ""
	if !tok.empty {
		token = "set" // whether there is one; requests are checked against tok
	}
	a := &api{c: c, token: token, tok: tok, log: log}
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
		profiles(mux, a.auth)
	}
	return HostGuard(token, hosts, http.NewCrossOriginProtection().Handler(mux))
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
	token string // "" for an API without a token
	tok   *Token // what requests must bring
	log   *slog.Logger
}

func (a *api) auth(next http.HandlerFunc) http.HandlerFunc {
	if a.token == "" {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.tok.bearer(r.Header.Get("Authorization")) {
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

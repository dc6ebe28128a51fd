package connect

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/version"
)

// API serves Connect's REST resources for a herder. In a cluster it
// answers for all workers, as Connect does: status from the status topic,
// connector creates and config updates forwarded to the leader (which
// takes them one at a time, so of two creates of a name one gets 409),
// and restarts forwarded to the worker that runs the task or connector.
type API struct {
	h         *Herder
	clusterID string

	createMu sync.Mutex // the leader's creates and updates, one at a time

	clientOnce sync.Once
	client     *http.Client // to the other workers
	clientErr  error
}

// NewAPI returns the API of h; clusterID is the worker cluster's ID, for
// GET /.
func NewAPI(h *Herder, clusterID string) *API { return &API{h: h, clusterID: clusterID} }

// forwardedKey is the query parameter of a forwarded request, as
// Connect's: forward=false asks the worker to handle it itself.
const forwardedKey = "forward"

func forwarded(r *http.Request) bool { return r.URL.Query().Get(forwardedKey) == "false" }

// peers is the HTTP client to the other workers: with an https listener
// it trusts the system's roots and this worker's own certificate (the
// workers of a cluster usually share one).
func (a *API) peers() (*http.Client, error) {
	a.clientOnce.Do(func() {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cert := a.h.w.REST.TLSCert; cert != "" {
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			pem, err := os.ReadFile(cert)
			if err != nil {
				a.clientErr = err
				return
			}
			pool.AppendCertsFromPEM(pem)
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		a.client = &http.Client{Transport: tr, Timeout: 35 * time.Second}
	})
	return a.client, a.clientErr
}

// forward sends request r, whose body is body, to worker to and copies
// its answer back, as Connect forwards to the leader or a task's worker.
// The bearer token goes along. A success is first read back from the
// config topic here, so the client's next request to this worker sees its
// change.
func (a *API) forward(w http.ResponseWriter, r *http.Request, to Member, body []byte) {
	cl, err := a.peers()
	if err != nil {
		fail(w, http.StatusInternalServerError, "Cannot forward the request to worker "+to.ID+": "+err.Error())
		return
	}
	u, err := url.Parse(to.URL)
	if err != nil || u.Host == "" {
		fail(w, http.StatusInternalServerError, "Worker "+to.ID+" has no usable URL")
		return
	}
	target := *r.URL
	target.Scheme, target.Host = u.Scheme, u.Host
	q := target.Query()
	q.Set(forwardedKey, "false")
	target.RawQuery = q.Encode()
	c, cancel := ctx(r)
	defer cancel()
	req, err := http.NewRequestWithContext(c, r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := cl.Do(req)
	if err != nil {
		fail(w, http.StatusInternalServerError, "Error trying to forward the request to worker "+to.ID+": "+err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		if err := a.h.store.CatchUp(c); err != nil {
			a.h.log.Warn("reading the connect config topic after a forwarded request", "err", err)
		}
		a.h.Kick()
	}
	for _, h := range []string{"Content-Type", "Location"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxBody))
}

// readBody reads r's body (up to maxBody) and puts it back for the
// handler, so a request can be forwarded or handled here.
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// toLeader forwards r to the leader unless this worker leads (or r was
// forwarded already); it reports whether it did.
func (a *API) toLeader(w http.ResponseWriter, r *http.Request) bool {
	v := a.h.view()
	if forwarded(r) || v.Leader == v.Workers[v.Self] {
		return false
	}
	a.forward(w, r, v.Leader, readBody(r))
	return true
}

// toOwner forwards r to worker owner unless it is this one (or r was
// forwarded already); it reports whether it did.
func (a *API) toOwner(w http.ResponseWriter, r *http.Request, v View, owner int) bool {
	if forwarded(r) || owner == v.Self || owner >= len(v.Workers) {
		return false
	}
	a.forward(w, r, v.Workers[owner], readBody(r))
	return true
}

// syncStatus reads the status topic to its end before an answer; when
// that takes over 15 s (the cluster is down) the answer is what was read.
func (a *API) syncStatus(r *http.Request) {
	_, statuses := a.h.clusterOf()
	if statuses == nil {
		return
	}
	c, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	if err := statuses.CatchUp(c); err != nil {
		a.h.log.Warn("reading the connect status topic", "topic", statuses.topic, "err", err)
	}
}

// Patterns are the ServeMux patterns Connect's REST API answers.
var Patterns = []string{"/{$}", "/connectors", "/connectors/", "/connector-plugins", "/connector-plugins/"}

// Handler serves the API's routes behind guard (the REST API's bearer
// token): rest.Mount's Build, for Patterns.
func (a *API) Handler(guard func(http.Handler) http.Handler) http.Handler {
	in := http.NewServeMux()
	in.HandleFunc("GET /{$}", a.root)
	in.HandleFunc("GET /connectors", a.list)
	in.HandleFunc("POST /connectors", a.create)
	in.HandleFunc("GET /connectors/{name}", a.withConnector(a.info))
	in.HandleFunc("DELETE /connectors/{name}", a.withConnector(a.delete))
	in.HandleFunc("GET /connectors/{name}/config", a.withConnector(a.getConfig))
	in.HandleFunc("PUT /connectors/{name}/config", a.putConfig)
	in.HandleFunc("GET /connectors/{name}/status", a.withConnector(a.status))
	in.HandleFunc("GET /connectors/{name}/tasks", a.withConnector(a.tasks))
	in.HandleFunc("GET /connectors/{name}/tasks/{task}/status", a.withConnector(a.taskStatus))
	in.HandleFunc("POST /connectors/{name}/tasks/{task}/restart", a.withConnector(a.taskRestart))
	in.HandleFunc("PUT /connectors/{name}/pause", a.withConnector(a.setState(Paused, http.StatusAccepted)))
	in.HandleFunc("PUT /connectors/{name}/resume", a.withConnector(a.setState(Started, http.StatusAccepted)))
	in.HandleFunc("PUT /connectors/{name}/stop", a.withConnector(a.setState(Stopped, http.StatusNoContent)))
	in.HandleFunc("POST /connectors/{name}/restart", a.withConnector(a.restart))
	in.HandleFunc("GET /connectors/{name}/offsets", a.withConnector(a.getOffsets))
	in.HandleFunc("PATCH /connectors/{name}/offsets", a.withConnector(a.alterOffsets))
	in.HandleFunc("DELETE /connectors/{name}/offsets", a.withConnector(a.alterOffsets))
	in.HandleFunc("GET /connector-plugins", a.plugins)
	in.HandleFunc("GET /connector-plugins/{class}/config", a.pluginConfig)
	in.HandleFunc("PUT /connector-plugins/{class}/config/validate", a.validate)
	return guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := in.Handler(r); pattern == "" {
			fail(w, http.StatusNotFound, "HTTP 404 Not Found")
			return
		}
		in.ServeHTTP(w, r)
	}))
}

// errorBody is Connect's error entity.
type errorBody struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func fail(w http.ResponseWriter, code int, msg string) {
	reply(w, code, errorBody{code, msg})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if v != nil {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
	}
}

func (a *API) root(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, map[string]string{"version": version.Version, "commit": version.String(), "kafka_cluster_id": a.clusterID})
}

// info is Connect's ConnectorInfo.
type info struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []taskID          `json:"tasks"`
	Type   string            `json:"type"`
}

type taskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

type status struct {
	Name      string      `json:"name"`
	Connector State       `json:"connector"`
	Tasks     []taskState `json:"tasks"`
	Type      string      `json:"type"`
}

type taskState struct {
	ID int `json:"id"`
	State
}

// tasks is how many tasks a connector has: one per worker (each runs its
// share of the connector's flow), none when stopped.
func (a *API) taskCount(c Connector, v View) int {
	if c.State == Stopped {
		return 0
	}
	return len(v.Workers)
}

func (a *API) infoOf(c Connector) info {
	in := info{Name: c.Name, Config: c.Props, Tasks: []taskID{}, Type: "source"}
	for i := range a.taskCount(c, a.h.view()) {
		in.Tasks = append(in.Tasks, taskID{c.Name, i})
	}
	return in
}

// statusOf reports the connector and its tasks, one per worker: this
// worker's own from its flow, the others' from the status topic.
func (a *API) statusOf(c Connector) status {
	v := a.h.view()
	local := a.h.status(c)
	s := status{Name: c.Name, Connector: a.entry(c.Name, -1, v.ConnectorOwner(c.Name), v, local), Tasks: []taskState{}, Type: "source"}
	if s.Connector.State != "FAILED" {
		s.Connector.Trace = ""
	}
	for i := range a.taskCount(c, v) {
		s.Tasks = append(s.Tasks, taskState{i, a.entry(c.Name, i, i, v, local)})
	}
	return s
}

// entry is the state of connector name (task -1) or of one of its tasks,
// which worker owner runs: local when that is this worker, else the
// status topic's record, else UNASSIGNED (the owner has not written yet).
func (a *API) entry(name string, task, owner int, v View, local State) State {
	if owner == v.Self {
		local.WorkerID = v.Workers[owner].ID
		return local
	}
	var rec StatusRecord
	ok := false
	if _, statuses := a.h.clusterOf(); statuses != nil {
		if task < 0 {
			rec, ok = statuses.Connector(name)
		} else {
			rec, ok = statuses.Task(name, task)
		}
	}
	if !ok {
		return State{State: "UNASSIGNED", WorkerID: v.Workers[owner].ID}
	}
	st := State{State: rec.State, WorkerID: rec.WorkerID}
	if rec.Trace != nil {
		st.Trace = *rec.Trace
	}
	return st
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	conns := a.h.store.List()
	expand := r.URL.Query()["expand"]
	if len(expand) == 0 {
		names := make([]string, 0, len(conns))
		for _, c := range conns {
			names = append(names, c.Name)
		}
		reply(w, http.StatusOK, names)
		return
	}
	if slices.Contains(expand, "status") {
		a.syncStatus(r)
	}
	out := make(map[string]map[string]any, len(conns))
	for _, c := range conns {
		m := map[string]any{}
		for _, e := range expand {
			switch e {
			case "status":
				m["status"] = a.statusOf(c)
			case "info":
				m["info"] = a.infoOf(c)
			}
		}
		out[c.Name] = m
	}
	reply(w, http.StatusOK, out)
}

func (a *API) withConnector(fn func(http.ResponseWriter, *http.Request, Connector)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		c, ok := a.h.store.Get(name)
		if !ok {
			// Created through another worker a moment ago?
			cx, cancel := ctx(r)
			err := a.h.store.CatchUp(cx)
			cancel()
			if err == nil {
				c, ok = a.h.store.Get(name)
			}
		}
		if !ok {
			fail(w, http.StatusNotFound, "Connector "+name+" not found")
			return
		}
		fn(w, r, c)
	}
}

// maxBody bounds a request body.
const maxBody = 1 << 20

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		// The decoder's message names the JSON position, not a value.
		fail(w, http.StatusBadRequest, "Request body is not valid JSON: "+jsonError(err))
		return false
	}
	return true
}

func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s: want %s", te.Field, te.Type)
	case errors.Is(err, io.EOF):
		return "empty body"
	}
	return "malformed"
}

// props reads a Connect config map: values may be JSON strings, numbers
// or booleans, as Connect's Jackson reads them into strings.
func props(raw map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = strconv.FormatBool(v)
		case nil:
			continue
		default:
			return nil, fmt.Errorf("the value of %s must be a string", k)
		}
	}
	return out, nil
}

// check validates a config as a create or update would.
func (a *API) check(w http.ResponseWriter, name string, p map[string]string) bool {
	if err := CheckName(name); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return false
	}
	if _, err := Translate(name, p, a.h.w); err != nil {
		var es Errors
		n := 1
		if errors.As(err, &es) {
			n = len(es)
		}
		fail(w, http.StatusBadRequest, fmt.Sprintf("Connector configuration is invalid and contains the following %d error(s):\n%s\nValidate a config at /connector-plugins/{class}/config/validate for each key's errors.", n, err))
		return false
	}
	return true
}

func ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 30*time.Second)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	if a.toLeader(w, r) {
		return
	}
	var body struct {
		Name         string         `json:"name"`
		Config       map[string]any `json:"config"`
		InitialState string         `json:"initial_state"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	p, err := props(body.Config)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.Config == nil {
		fail(w, http.StatusBadRequest, "Connector config is missing")
		return
	}
	// Connect trims the name as Java's String.trim does: every char up to
	// U+0020 at either end.
	name := strings.TrimFunc(body.Name, func(r rune) bool { return r <= ' ' })
	if n, ok := p["name"]; ok && n != name {
		fail(w, http.StatusBadRequest, fmt.Sprintf("Connector name configuration (%s) doesn't match connector name in the URL (%s)", n, name))
		return
	}
	p["name"] = name
	state := Started
	switch body.InitialState {
	case "", "RUNNING":
	case Paused, Stopped:
		state = body.InitialState
	default:
		fail(w, http.StatusBadRequest, "initial_state must be RUNNING, PAUSED or STOPPED")
		return
	}
	if !a.check(w, name, p) {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	a.createMu.Lock()
	defer a.createMu.Unlock()
	if err := a.h.store.CatchUp(c); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	if _, ok := a.h.store.Get(name); ok {
		fail(w, http.StatusConflict, "Connector "+name+" already exists")
		return
	}
	if err := a.h.store.Put(c, name, p, state); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.h.wait()
	a.h.publish(c) // the leader owns the connector: its status is there at once
	conn, _ := a.h.store.Get(name)
	w.Header().Set("Location", "/connectors/"+name)
	reply(w, http.StatusCreated, a.infoOf(conn))
}

func (a *API) info(w http.ResponseWriter, _ *http.Request, c Connector) {
	reply(w, http.StatusOK, a.infoOf(c))
}

func (a *API) getConfig(w http.ResponseWriter, _ *http.Request, c Connector) {
	reply(w, http.StatusOK, c.Props)
}

func (a *API) putConfig(w http.ResponseWriter, r *http.Request) {
	if a.toLeader(w, r) {
		return
	}
	name := r.PathValue("name")
	var raw map[string]any
	if !readJSON(w, r, &raw) {
		return
	}
	p, err := props(raw)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if n, ok := p["name"]; ok && n != name {
		fail(w, http.StatusBadRequest, fmt.Sprintf("Connector name configuration (%s) doesn't match connector name in the URL (%s)", n, name))
		return
	}
	p["name"] = name
	if !a.check(w, name, p) {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	a.createMu.Lock()
	defer a.createMu.Unlock()
	if err := a.h.store.CatchUp(c); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	_, exists := a.h.store.Get(name)
	state := ""
	if !exists {
		state = Started
	}
	if err := a.h.store.Put(c, name, p, state); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.h.wait()
	a.h.publish(c)
	conn, _ := a.h.store.Get(name)
	code := http.StatusOK
	if !exists {
		code = http.StatusCreated
		w.Header().Set("Location", "/connectors/"+name)
	}
	reply(w, code, a.infoOf(conn))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request, c Connector) {
	cx, cancel := ctx(r)
	defer cancel()
	if err := a.h.store.Delete(cx, c.Name); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.h.wait()
	reply(w, http.StatusNoContent, nil)
}

func (a *API) status(w http.ResponseWriter, r *http.Request, c Connector) {
	a.syncStatus(r)
	reply(w, http.StatusOK, a.statusOf(c))
}

func (a *API) tasks(w http.ResponseWriter, _ *http.Request, c Connector) {
	type task struct {
		ID     taskID            `json:"id"`
		Config map[string]string `json:"config"`
	}
	out := []task{}
	for i := range a.taskCount(c, a.h.view()) {
		out = append(out, task{taskID{c.Name, i}, c.Props})
	}
	reply(w, http.StatusOK, out)
}

// task returns the task of the path and the view it is in.
func (a *API) task(w http.ResponseWriter, r *http.Request, c Connector) (int, View, bool) {
	v := a.h.view()
	id, err := strconv.Atoi(r.PathValue("task"))
	if err != nil || id < 0 || id >= a.taskCount(c, v) || strconv.Itoa(id) != r.PathValue("task") {
		fail(w, http.StatusNotFound, fmt.Sprintf("Task %s-%s not found", c.Name, r.PathValue("task")))
		return 0, v, false
	}
	return id, v, true
}

func (a *API) taskStatus(w http.ResponseWriter, r *http.Request, c Connector) {
	if id, v, ok := a.task(w, r, c); ok {
		a.syncStatus(r)
		reply(w, http.StatusOK, taskState{id, a.entry(c.Name, id, id, v, a.h.status(c))})
	}
}

// taskRestart restarts a task on the worker that runs it: here, or
// forwarded there.
func (a *API) taskRestart(w http.ResponseWriter, r *http.Request, c Connector) {
	if id, v, ok := a.task(w, r, c); ok && !a.toOwner(w, r, v, id) {
		a.doRestart(w, c)
	}
}

func (a *API) setState(state string, code int) func(http.ResponseWriter, *http.Request, Connector) {
	return func(w http.ResponseWriter, r *http.Request, c Connector) {
		cx, cancel := ctx(r)
		defer cancel()
		if err := a.h.store.SetState(cx, c.Name, state); err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		a.h.wait()
		reply(w, code, nil)
	}
}

// restart restarts the connector. Alone, it is the flow of the worker
// that owns the connector (View.ConnectorOwner), here or forwarded there.
// With includeTasks or onlyFailed, as Connect (KIP-745), a restart
// request goes to the config topic and every worker restarts its share
// (onlyFailed: only a failed one); the answer is 202 and the status.
func (a *API) restart(w http.ResponseWriter, r *http.Request, c Connector) {
	q := r.URL.Query()
	withTasks, onlyFailed := q.Get("includeTasks") == "true", q.Get("onlyFailed") == "true"
	if !withTasks && !onlyFailed {
		v := a.h.view()
		if !a.toOwner(w, r, v, v.ConnectorOwner(c.Name)) {
			a.doRestart(w, c)
		}
		return
	}
	if c.State == Stopped {
		fail(w, http.StatusConflict, "Connector "+c.Name+" is stopped")
		return
	}
	cx, cancel := ctx(r)
	defer cancel()
	if err := a.h.store.Restart(cx, RestartRequest{c.Name, withTasks, onlyFailed}); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.h.wait()
	a.syncStatus(r)
	reply(w, http.StatusAccepted, a.statusOf(c))
}

// doRestart restarts this worker's flow of c: 204.
func (a *API) doRestart(w http.ResponseWriter, c Connector) {
	if c.State == Stopped {
		fail(w, http.StatusConflict, "Connector "+c.Name+" is stopped")
		return
	}
	if err := a.h.restart(c.Name); err != nil {
		fail(w, http.StatusConflict, err.Error())
		return
	}
	reply(w, http.StatusNoContent, nil)
}

func (a *API) spec(w http.ResponseWriter, c Connector) (*Spec, bool) {
	spec, err := Translate(c.Name, c.Props, a.h.w)
	if err != nil {
		fail(w, http.StatusBadRequest, "Connector configuration is invalid:\n"+err.Error())
		return nil, false
	}
	return spec, true
}

func (a *API) getOffsets(w http.ResponseWriter, r *http.Request, c Connector) {
	spec, ok := a.spec(w, c)
	if !ok {
		return
	}
	cx, cancel := ctx(r)
	defer cancel()
	offs, err := readOffsets(cx, spec, a.h.log)
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	reply(w, http.StatusOK, map[string]any{"offsets": offs})
}

// alterOffsets is PATCH (alter) and DELETE (reset) of a stopped
// connector's offsets.
func (a *API) alterOffsets(w http.ResponseWriter, r *http.Request, c Connector) {
	if c.State != Stopped {
		fail(w, http.StatusBadRequest, "Connector "+c.Name+" must be STOPPED before its offsets change: PUT /connectors/"+c.Name+"/stop")
		return
	}
	if a.h.status(c).State != Stopped {
		fail(w, http.StatusConflict, "Connector "+c.Name+" is still stopping")
		return
	}
	spec, ok := a.spec(w, c)
	if !ok {
		return
	}
	cx, cancel := ctx(r)
	defer cancel()
	var changes []offsetChange
	msg := "The offsets for this connector have been reset successfully"
	if r.Method == http.MethodDelete {
		offs, err := readOffsets(cx, spec, a.h.log)
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		for _, o := range offs {
			changes = append(changes, offsetChange{o.Partition["topic"].(string), o.Partition["partition"].(int32), nil})
		}
	} else {
		msg = "The offsets for this connector have been altered successfully"
		var body struct {
			Offsets []struct {
				Partition map[string]any `json:"partition"`
				Offset    map[string]any `json:"offset"`
			} `json:"offsets"`
		}
		if !readJSON(w, r, &body) {
			return
		}
		if spec.Heartbeats || spec.Checkpoints {
			fail(w, http.StatusBadRequest, spec.Class[strings.LastIndex(spec.Class, ".")+1:]+" keeps no offsets kmirror can alter")
			return
		}
		for i, o := range body.Offsets {
			ch, err := parseOffset(spec.Flow.Source, o.Partition, o.Offset)
			if err != nil {
				fail(w, http.StatusBadRequest, fmt.Sprintf("offsets[%d]: %v", i, err))
				return
			}
			changes = append(changes, ch)
		}
		if len(changes) == 0 {
			fail(w, http.StatusBadRequest, "The offsets to alter are missing")
			return
		}
	}
	if len(changes) > 0 {
		if err := writeOffsets(cx, spec, changes); err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	reply(w, http.StatusOK, map[string]string{"message": msg})
}

// parseOffset reads one of MirrorSourceConnector's source partitions
// ({"cluster","topic","partition"}) and offsets ({"offset"} or null).
func parseOffset(source string, part, off map[string]any) (offsetChange, error) {
	var ch offsetChange
	cluster, _ := part["cluster"].(string)
	topic, _ := part["topic"].(string)
	if cluster != source {
		return ch, fmt.Errorf("partition.cluster must be the source alias %q", source)
	}
	if topic == "" {
		return ch, errors.New("partition.topic is missing")
	}
	n, ok := part["partition"].(json.Number)
	p, err := n.Int64()
	if !ok || err != nil || p < 0 || p > 1<<31-1 {
		return ch, errors.New("partition.partition must be a partition number")
	}
	ch.topic, ch.partition = topic, int32(p)
	if off == nil {
		return ch, nil
	}
	v, ok := off["offset"].(json.Number)
	o, err := v.Int64()
	if !ok || err != nil || o < 0 {
		return ch, errors.New("offset.offset must be a non-negative number")
	}
	ch.offset = &o
	return ch, nil
}

type plugin struct {
	Class   string `json:"class"`
	Type    string `json:"type"`
	Version string `json:"version"`
}

func (a *API) plugins(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, []plugin{{CheckpointClass, "source", version.Version}, {HeartbeatClass, "source", version.Version}, {SourceClass, "source", version.Version}})
}

func pluginClass(w http.ResponseWriter, r *http.Request) (string, bool) {
	class, ok := classOf(r.PathValue("class"))
	if !ok {
		fail(w, http.StatusNotFound, "Unknown connector plugin "+r.PathValue("class"))
		return "", false
	}
	return class, true
}

// definition is Connect's ConfigKeyInfo.
type definition struct {
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	Required      bool     `json:"required"`
	DefaultValue  *string  `json:"default_value"`
	Importance    string   `json:"importance"`
	Documentation string   `json:"documentation"`
	Group         *string  `json:"group"`
	Width         string   `json:"width"`
	DisplayName   string   `json:"display_name"`
	Dependents    []string `json:"dependents"`
	Order         int      `json:"order_in_group"`
}

var requiredKeys = []string{"connector.class", "source.cluster.alias", "target.cluster.alias", "source.cluster.bootstrap.servers"}

func defOf(k string) definition {
	d := definition{Name: k, Type: "STRING", Importance: "MEDIUM", Width: "NONE", DisplayName: k, Dependents: []string{}, Order: -1}
	for _, r := range requiredKeys {
		if r == k {
			d.Required, d.Importance = true, "HIGH"
		}
	}
	if config.IsSensitive(k) {
		d.Type = "PASSWORD"
	}
	return d
}

func (a *API) pluginConfig(w http.ResponseWriter, r *http.Request) {
	if _, ok := pluginClass(w, r); !ok {
		return
	}
	out := make([]definition, 0, len(requiredKeys))
	for _, k := range requiredKeys {
		out = append(out, defOf(k))
	}
	reply(w, http.StatusOK, out)
}

// validate answers Connect's ConfigInfos: one entry per key given or
// required, with that key's errors. Secret values come back hidden.
func (a *API) validate(w http.ResponseWriter, r *http.Request) {
	class, ok := pluginClass(w, r)
	if !ok {
		return
	}
	var raw map[string]any
	if !readJSON(w, r, &raw) {
		return
	}
	p, err := props(raw)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if c, ok := p["connector.class"]; ok {
		if cc, _ := classOf(c); cc != class {
			fail(w, http.StatusBadRequest, "connector.class in the body differs from the plugin in the URL")
			return
		}
	}
	p["connector.class"] = class
	byKey := map[string][]string{}
	if _, err := Translate(p["name"], p, a.h.w); err != nil {
		var es Errors
		if !errors.As(err, &es) {
			es = Errors{{"config", err.Error()}}
		}
		for _, e := range es {
			byKey[e.Key] = append(byKey[e.Key], e.Msg)
		}
	}
	if n, ok := p["name"]; !ok || n == "" {
		delete(byKey, "name")
	}
	keys := map[string]bool{}
	for k := range p {
		keys[k] = true
	}
	for _, k := range requiredKeys {
		keys[k] = true
	}
	for k := range byKey {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	type value struct {
		Name        string   `json:"name"`
		Value       *string  `json:"value"`
		Recommended []string `json:"recommended_values"`
		Errors      []string `json:"errors"`
		Visible     bool     `json:"visible"`
	}
	type entry struct {
		Definition definition `json:"definition"`
		Value      value      `json:"value"`
	}
	count := 0
	configs := make([]entry, 0, len(names))
	for _, k := range names {
		e := entry{defOf(k), value{Name: k, Recommended: []string{}, Errors: byKey[k], Visible: true}}
		if e.Value.Errors == nil {
			e.Value.Errors = []string{}
		}
		count += len(e.Value.Errors)
		if v, ok := p[k]; ok {
			if config.IsSensitive(k) {
				v = "[hidden]"
			}
			e.Value.Value = &v
		}
		configs = append(configs, e)
	}
	reply(w, http.StatusOK, map[string]any{"name": class, "error_count": count, "groups": []string{"Common"}, "configs": configs})
}

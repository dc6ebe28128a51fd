package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/runner"
)

// Flows is what the herder starts and stops flows with; *runner.Runner
// implements it.
type Flows interface {
	Add(name string, fc *config.Flow, kind runner.Kind) error
	Remove(name string) error
	Pause(name string) error
	Resume(name string) error
	Restart(name string) error
	Status() []runner.FlowStatus
}

// Herder makes the flows of this worker match the config topic: a flow
// per connector that is not stopped, paused when its target state is. In
// a cluster (SetCluster) it also writes this worker's share of every
// connector to the status topic and acts on restart requests.
type Herder struct {
	w     *Worker
	store *Store
	flows Flows
	log   *slog.Logger

	clMu     sync.Mutex
	cluster  Viewer       // nil: a worker on its own
	statuses *StatusStore // nil: status only in memory
	pubMu    sync.Mutex   // one publish at a time

	mu      sync.Mutex
	running map[string]map[string]string // connector -> the props its flow runs
	invalid map[string]error             // connectors whose config does not translate
	kick    chan struct{}
}

// NewHerder returns a herder of the connectors in store.
func NewHerder(w *Worker, store *Store, flows Flows, log *slog.Logger) *Herder {
	return &Herder{w: w, store: store, flows: flows, log: log,
		running: map[string]map[string]string{}, invalid: map[string]error{}, kick: make(chan struct{}, 1)}
}

// Viewer gives the cluster's current assignment; *Cluster is one.
type Viewer interface{ View() View }

// SetCluster makes the herder one worker of a cluster: v tells its share,
// st is the status topic it writes that share to.
func (h *Herder) SetCluster(v Viewer, st *StatusStore) {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	h.cluster, h.statuses = v, st
}

// clusterOf returns what SetCluster set.
func (h *Herder) clusterOf() (Viewer, *StatusStore) {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	return h.cluster, h.statuses
}

// view returns the cluster's assignment; a worker on its own, or one not
// yet assigned, is the only worker.
func (h *Herder) view() View {
	if cl, _ := h.clusterOf(); cl != nil {
		if v := cl.View(); v.Joined() {
			return v
		}
	}
	self := Member{ID: h.w.WorkerID, URL: h.w.URL()}
	return View{Leader: self, Workers: []Member{self}, Self: 0}
}

// Run follows the config topic and reconciles the flows until ctx ends;
// once a second it also retries what a flow was not ready for (pausing a
// flow that is still starting). Beside, once a second, it writes this
// worker's changes to the status topic.
func (h *Herder) Run(ctx context.Context) {
	go h.store.Follow(ctx, 500*time.Millisecond, h.Kick)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			h.publish(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		h.reconcile()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

// Kick asks Run to reconcile now.
func (h *Herder) Kick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *Herder) reconcile() {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.restarts()
	want := map[string]bool{}
	states := map[string]string{}
	for _, f := range h.flows.Status() {
		states[f.Name] = f.State
	}
	for _, c := range h.store.List() {
		if c.State == Stopped {
			continue
		}
		want[c.Name] = true
		if old, ok := h.running[c.Name]; !ok || !maps.Equal(old, c.Props) {
			spec, err := Translate(c.Name, c.Props, h.w)
			if err != nil {
				h.invalid[c.Name] = err
				if ok {
					_ = h.flows.Remove(c.Name)
					delete(h.running, c.Name)
				}
				continue
			}
			delete(h.invalid, c.Name)
			for _, w := range spec.Warnings {
				h.log.Warn(w, "connector", c.Name)
			}
			if err := h.flows.Add(c.Name, spec.Flow, spec.Kind()); err != nil {
				h.log.Warn("starting connector", "connector", c.Name, "err", err)
				continue
			}
			h.running[c.Name] = c.Props
			states[c.Name] = "starting"
		}
		switch st := states[c.Name]; {
		case c.State == Paused && st == "running":
			_ = h.flows.Pause(c.Name)
		case c.State == Started && st == "paused":
			_ = h.flows.Resume(c.Name)
		}
	}
	for name := range h.running {
		if !want[name] {
			_ = h.flows.Remove(name)
			delete(h.running, name)
		}
	}
	for name := range h.invalid {
		if !want[name] {
			delete(h.invalid, name)
		}
	}
}

// State is a connector's or task's state in Connect's terms.
type State struct {
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace,omitempty"`
}

// status returns the state of connector c on this worker.
func (h *Herder) status(c Connector) State {
	h.mu.Lock()
	inv := h.invalid[c.Name]
	h.mu.Unlock()
	st := State{WorkerID: h.w.WorkerID}
	if inv != nil {
		st.State, st.Trace = "FAILED", "invalid connector configuration:\n"+inv.Error()
		return st
	}
	if c.State == Stopped {
		st.State = Stopped
		return st
	}
	for _, f := range h.flows.Status() {
		if f.Name != c.Name {
			continue
		}
		switch f.State {
		case "running", "starting":
			st.State = "RUNNING"
		case "paused":
			st.State = Paused
		case "failed":
			st.State, st.Trace = "FAILED", f.Error
		default:
			st.State = "UNASSIGNED"
		}
		return st
	}
	st.State = "UNASSIGNED"
	return st
}

// ErrNotFound is returned for a connector the config topic lacks.
var ErrNotFound = errors.New("not found")

// restart restarts a connector's flow on this worker.
func (h *Herder) restart(name string) error {
	h.mu.Lock()
	_, ok := h.running[name]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("connector %s is not running on this worker", name)
	}
	return h.flows.Restart(name)
}

// restarts acts on the restart requests read from the config topic:
// this worker's share of each connector restarts (only a failed one with
// only-failed). h.mu is held.
func (h *Herder) restarts() {
	reqs := h.store.TakeRestarts()
	if len(reqs) == 0 {
		return
	}
	failed := map[string]bool{}
	for _, f := range h.flows.Status() {
		failed[f.Name] = f.State == "failed"
	}
	for _, r := range reqs {
		if _, ok := h.running[r.Connector]; !ok || (r.OnlyFailed && !failed[r.Connector]) {
			continue
		}
		h.log.Info("restarting this worker's share of a connector, as requested in the config topic", "connector", r.Connector, "only_failed", r.OnlyFailed)
		if err := h.flows.Restart(r.Connector); err != nil {
			h.log.Warn("restarting connector", "connector", r.Connector, "err", err)
		}
	}
}

// wait reconciles now, so a request's change shows in the next status.
func (h *Herder) wait() { h.reconcile() }

// publish writes to the status topic what changed of this worker's share:
// task View.Self of every connector that is not stopped, and the status
// of the connectors this worker owns (View.ConnectorOwner); a deleted
// connector's records become tombstones, as Connect writes them.
func (h *Herder) publish(ctx context.Context) {
	cl, statuses := h.clusterOf()
	if statuses == nil || cl == nil {
		return
	}
	v := cl.View()
	if !v.Joined() {
		return
	}
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := statuses.CatchUp(ctx); err != nil {
		if parent.Err() == nil {
			h.log.Warn("reading the connect status topic", "topic", statuses.topic, "err", err)
		}
		return
	}
	self := v.Workers[v.Self]
	for _, c := range h.store.List() {
		st := h.status(c)
		rec := StatusRecord{State: st.State, WorkerID: self.ID, Generation: v.Generation}
		if st.Trace != "" {
			tr := st.Trace
			rec.Trace = &tr
		}
		if c.State != Stopped {
			h.put(ctx, statuses, TaskStatusKey(c.Name, v.Self), &rec)
		}
		if v.ConnectorOwner(c.Name) == v.Self {
			h.put(ctx, statuses, ConnectorStatusKey(c.Name), &rec)
		}
	}
	// The leader also removes what workers gone since left behind: tasks
	// numbered past the workers of this generation, and every record of a
	// deleted connector; another worker removes its own.
	leads := v.Workers[v.Self] == v.Leader
	caughtUp := false
	for _, name := range statuses.Names() {
		c, ok := h.store.Get(name)
		if !ok && !caughtUp {
			// A connector created a moment ago may not be read yet.
			caughtUp = true
			if err := h.store.CatchUp(ctx); err != nil {
				return
			}
			c, ok = h.store.Get(name)
		}
		if !ok {
			if r, has := statuses.Connector(name); has && (leads || r.WorkerID == self.ID) {
				h.put(ctx, statuses, ConnectorStatusKey(name), nil)
			}
		}
		for _, id := range statuses.Tasks(name) {
			r, _ := statuses.Task(name, id)
			gone := !ok || c.State == Stopped || id >= len(v.Workers)
			if gone && (leads || r.WorkerID == self.ID) {
				h.put(ctx, statuses, TaskStatusKey(name, id), nil)
			}
		}
	}
}

// put writes rec under key unless the topic holds it already.
func (h *Herder) put(ctx context.Context, statuses *StatusStore, key string, rec *StatusRecord) {
	name, task, _ := ParseStatusKey(key)
	var cur StatusRecord
	var ok bool
	if task < 0 {
		cur, ok = statuses.Connector(name)
	} else {
		cur, ok = statuses.Task(name, task)
	}
	if rec == nil && !ok || rec != nil && ok && sameStatus(cur, *rec) {
		return
	}
	if err := statuses.Put(ctx, key, rec); err != nil && ctx.Err() == nil {
		h.log.Warn("writing the connect status topic", "topic", statuses.topic, "key", key, "err", err)
	}
}

func sameStatus(a, b StatusRecord) bool {
	at, bt := "", ""
	if a.Trace != nil {
		at = *a.Trace
	}
	if b.Trace != nil {
		bt = *b.Trace
	}
	return a.State == b.State && a.WorkerID == b.WorkerID && a.Generation == b.Generation && at == bt && (a.Trace == nil) == (b.Trace == nil)
}

// Status lists every connector's flow on this worker, for the dashboard:
// the runner's flows, and a stopped or invalid connector (which has no
// flow) with its state.
func (h *Herder) Status() []runner.FlowStatus {
	out := h.flows.Status()
	have := map[string]bool{}
	for _, f := range out {
		have[f.Name] = true
	}
	for _, c := range h.store.List() {
		if have[c.Name] {
			continue
		}
		f := runner.FlowStatus{Name: c.Name, Kind: runner.Replication, State: "stopped"}
		if spec, err := Translate(c.Name, c.Props, h.w); err == nil {
			f.Kind = spec.Kind()
		}
		if st := h.status(c); st.State == "FAILED" {
			f.State, f.Error = "failed", st.Trace
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

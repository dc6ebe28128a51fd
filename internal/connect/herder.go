package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
// per connector that is not stopped, paused when its target state is.
type Herder struct {
	w     *Worker
	store *Store
	flows Flows
	log   *slog.Logger

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

// Run follows the config topic and reconciles the flows until ctx ends;
// once a second it also retries what a flow was not ready for (pausing a
// flow that is still starting).
func (h *Herder) Run(ctx context.Context) {
	go h.store.Follow(ctx, 500*time.Millisecond, h.Kick)
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

// wait reconciles now, so a request's change shows in the next status.
func (h *Herder) wait() { h.reconcile() }

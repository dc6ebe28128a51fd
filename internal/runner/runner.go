// Package runner runs the flows of one MM2 configuration file and lets an
// operator pause, resume and restart them, and reload the file.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/metrics"
)

// ErrUnknownFlow is returned for a flow name the configuration lacks.
var ErrUnknownFlow = errors.New("unknown flow")

// Runner runs the flows of a configuration file.
type Runner struct {
	path string
	only []string // --clusters: targets to run flows into; all when empty
	m    *metrics.Metrics
	log  *slog.Logger

	ctx   context.Context // Run's; flows run under it
	fatal chan error      // a flow failed on its own

	mu    sync.Mutex
	cfg   *config.Config
	flows map[string]*managed
}

// Kind is what a flow runs.
type Kind string

// The kinds of flow: a whole flow, a pair that only emits heartbeats
// (MM2's heartbeat-only herders, MirrorHeartbeatConnector) and a pair that
// only emits checkpoints and syncs group offsets (MirrorCheckpointConnector).
const (
	Replication Kind = "replication"
	Heartbeats  Kind = "heartbeats"
	Checkpoints Kind = "checkpoints"
)

// managed is one running flow.
type managed struct {
	name   string
	kind   Kind
	eos    bool
	added  *config.Flow // set for a flow Add started: not from the file
	f      *flow.Flow
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	state   string // starting, running, stopped, failed
	err     error
	started time.Time
}

// Load reads and checks the configuration file; warnings are logged. It
// returns an error when the file is invalid or enables no flow.
func Load(path string, only []string, log *slog.Logger) (*config.Config, error) {
	cfg, err := config.Load(path, os.LookupEnv)
	if cfg != nil {
		for _, w := range cfg.Warnings {
			log.Warn(w)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(only) > 0 {
		if _, err := cfg.FlowsTargeting(only); err != nil {
			return nil, err
		}
	}
	// As MM2, a file whose flows are all disabled still runs the
	// heartbeat-only pairs.
	if len(selected(cfg, only)) == 0 && len(heartbeatPairs(cfg, only, log)) == 0 {
		return nil, fmt.Errorf("%s enables no flow and no heartbeats (set A->B.enabled = true)", path)
	}
	return cfg, nil
}

// New returns a Runner for a configuration that Load returned.
func New(path string, cfg *config.Config, only []string, m *metrics.Metrics, log *slog.Logger) *Runner {
	r := &Runner{path: path, cfg: cfg, only: only, m: m, log: log, fatal: make(chan error, 1), flows: make(map[string]*managed)}
	if m != nil {
		m.Registry.MustRegister(stateCollector{r})
	}
	return r
}

func selected(cfg *config.Config, only []string) []*config.Flow {
	var out []*config.Flow
	for _, f := range cfg.Flows {
		if len(only) == 0 || slices.Contains(only, f.Target) {
			out = append(out, f)
		}
	}
	return out
}

// Config returns the configuration in effect.
func (r *Runner) Config() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// Run starts every flow and returns when ctx ends (nil) or a flow fails on
// its own (its error): a replicator that is partly broken but looks alive is
// worse than one that exits loudly. Flows are stopped before Run returns.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.startAll()
	r.mu.Unlock()
	var err error
	select {
	case <-ctx.Done():
	case err = <-r.fatal:
	}
	r.mu.Lock()
	r.stopAll(false)
	r.ctx = nil
	r.mu.Unlock()
	return err
}

// startAll starts the flows of r.cfg; r.mu is held.
func (r *Runner) startAll() {
	flows := selected(r.cfg, r.only)
	origin := flow.OriginHeaderFlows(r.cfg, flows)
	for _, fc := range flows {
		r.start(fc.Name(), fc, Replication, false, flow.Options{AddOrigin: origin[fc.Name()]})
	}
	for _, fc := range heartbeatPairs(r.cfg, r.only, r.log) {
		r.start(fc.Name(), fc, Heartbeats, false, flow.Options{})
	}
}

// start runs one flow under name; r.mu is held.
func (r *Runner) start(name string, fc *config.Flow, kind Kind, added bool, opts flow.Options) {
	ctx, cancel := context.WithCancel(r.ctx)
	mf := &managed{name: name, kind: kind, eos: fc.ExactlyOnce, f: flow.New(fc, opts, r.m, r.log),
		cancel: cancel, done: make(chan struct{}), state: "running", started: time.Now()}
	if added {
		mf.added = fc
	}
	r.flows[mf.name] = mf
	go func() {
		defer close(mf.done)
		var err error
		switch kind {
		case Heartbeats:
			err = mf.f.RunHeartbeatsOnly(ctx)
		case Checkpoints:
			err = mf.f.RunCheckpointsOnly(ctx)
		default:
			err = mf.f.Run(ctx)
		}
		mf.mu.Lock()
		switch {
		case err != nil && ctx.Err() == nil:
			mf.state, mf.err = "failed", err
		default:
			mf.state = "stopped"
		}
		mf.mu.Unlock()
		if err != nil && ctx.Err() == nil && mf.added == nil {
			select {
			case r.fatal <- err:
			default:
			}
		}
	}()
}

// stopAll stops every flow and waits for them; r.mu is held. With
// fileOnly, flows that Add started go on.
func (r *Runner) stopAll(fileOnly bool) {
	for _, mf := range r.flows {
		if !fileOnly || mf.added == nil {
			mf.cancel()
		}
	}
	for name, mf := range r.flows {
		if !fileOnly || mf.added == nil {
			<-mf.done
			delete(r.flows, name)
		}
	}
}

// Restart stops a flow and starts it again with the same configuration.
func (r *Runner) Restart(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	mf, ok := r.flows[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownFlow, name)
	}
	mf.cancel()
	<-mf.done
	if mf.added != nil {
		r.log.Info("restarting flow", "flow", name)
		r.start(name, mf.added, mf.kind, true, flow.Options{})
		return nil
	}
	fc, err := r.flowConfig(name, mf.kind == Heartbeats)
	if err != nil {
		return err
	}
	opts := flow.Options{}
	if mf.kind == Replication {
		opts.AddOrigin = flow.OriginHeaderFlows(r.cfg, []*config.Flow{fc})[name]
	}
	r.log.Info("restarting flow", "flow", name)
	r.start(name, fc, mf.kind, false, opts)
	return nil
}

func (r *Runner) flowConfig(name string, heartbeats bool) (*config.Flow, error) {
	for _, fc := range r.cfg.Flows {
		if fc.Name() == name {
			return fc, nil
		}
	}
	if heartbeats {
		for _, fc := range heartbeatPairs(r.cfg, r.only, r.log) {
			if fc.Name() == name {
				return fc, nil
			}
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownFlow, name)
}

// Pause stops a flow's fetching until Resume.
func (r *Runner) Pause(name string) error { return r.each(name, (*flow.Flow).Pause) }

// Resume undoes Pause.
func (r *Runner) Resume(name string) error { return r.each(name, (*flow.Flow).Resume) }

func (r *Runner) each(name string, fn func(*flow.Flow) bool) error {
	r.mu.Lock()
	mf, ok := r.flows[name]
	r.mu.Unlock()
	if !ok || mf.kind != Replication {
		return fmt.Errorf("%w %q", ErrUnknownFlow, name)
	}
	if !fn(mf.f) {
		return fmt.Errorf("flow %q is not replicating yet", name)
	}
	return nil
}

// Reload reads the configuration file again. An invalid file changes
// nothing and its error is returned; a valid one replaces the running flows.
func (r *Runner) Reload() error {
	if r.path == "" {
		return errors.New("there is no MM2 file to reload: this kmirror's flows come from the Connect REST API")
	}
	cfg, err := Load(r.path, r.only, r.log)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.Info("reloading configuration", "file", r.path)
	r.stopAll(true)
	r.cfg = cfg
	r.startAll()
	return nil
}

// ErrNotRunning is returned by Add and Remove when Run is not running.
var ErrNotRunning = errors.New("the runner is not running")

// Add starts fc under name, beside the flows of the file, or replaces the
// flow of that name; kind says whether the whole flow runs or the pair's
// heartbeats or checkpoints only. Such a
// flow is not stopped by Reload, and when it fails it shows as failed in
// Status instead of stopping Run. Internal/connect adds the connectors'
// flows this way.
func (r *Runner) Add(name string, fc *config.Flow, kind Kind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return ErrNotRunning
	}
	if old, ok := r.flows[name]; ok {
		old.cancel()
		<-old.done
	}
	r.log.Info("starting flow", "flow", name, "pair", fc.Name(), "kind", kind)
	r.start(name, fc, kind, true, flow.Options{})
	return nil
}

// Remove stops a flow Add started and waits for it.
func (r *Runner) Remove(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	mf, ok := r.flows[name]
	if !ok || mf.added == nil {
		return fmt.Errorf("%w %q", ErrUnknownFlow, name)
	}
	mf.cancel()
	<-mf.done
	delete(r.flows, name)
	r.log.Info("stopped flow", "flow", name)
	return nil
}

// FlowStatus is the state of one flow.
type FlowStatus struct {
	Name        string                     `json:"name"`
	Kind        Kind                       `json:"kind"`           // replication, heartbeats or checkpoints
	Pair        string                     `json:"pair,omitempty"` // SOURCE->TARGET of a flow Add started under another name
	State       string                     `json:"state"`
	ExactlyOnce bool                       `json:"exactly_once,omitempty"`
	Since       time.Time                  `json:"since"`
	Error       string                     `json:"error,omitempty"`
	Problem     string                     `json:"problem,omitempty"` // a running flow's trouble (flow.Flow.Problem); /ready is 503
	Partitions  []datapath.PartitionStatus `json:"partitions,omitempty"`
}

// Status returns the state of every flow, sorted by name.
func (r *Runner) Status() []FlowStatus {
	r.mu.Lock()
	flows := make([]*managed, 0, len(r.flows))
	for _, mf := range r.flows {
		flows = append(flows, mf)
	}
	r.mu.Unlock()
	out := make([]FlowStatus, 0, len(flows))
	for _, mf := range flows {
		mf.mu.Lock()
		st := FlowStatus{Name: mf.name, Kind: mf.kind, State: mf.state, ExactlyOnce: mf.eos, Since: mf.started}
		if mf.err != nil {
			st.Error = mf.err.Error()
		}
		if mf.added != nil {
			st.Pair = mf.added.Name()
		}
		mf.mu.Unlock()
		if mf.kind == Replication {
			st.Partitions = mf.f.Partitions()
			st.Problem = mf.f.Problem()
			if st.State == "running" && st.Partitions == nil {
				st.State = "starting"
			}
			if st.State == "running" && mf.f.Paused() {
				st.State = "paused"
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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

// HeartbeatPairs returns the pairs that Run runs for heartbeats only.
func HeartbeatPairs(cfg *config.Config, only []string, log *slog.Logger) []*config.Flow {
	return heartbeatPairs(cfg, only, log)
}

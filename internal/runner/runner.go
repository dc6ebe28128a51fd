// Package runner runs the flows of one MM2 configuration file and lets an
// operator pause, resume and restart them, and reload the file.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
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

	stopTimeout time.Duration // see SetStopTimeout
	// runFlow runs one flow until ctx ends; runKind unless a test
	// replaces it.
	runFlow func(ctx context.Context, kind Kind, fc *config.Flow, f *flow.Flow) error

	// ctl serializes the operations that stop and start flows (Reload,
	// Restart, Add, Remove); they wait for flows to stop under it. mu
	// guards the fields below and is never held while a flow stops, so
	// Status answers while one does.
	ctl   sync.Mutex
	mu    sync.Mutex
	cfg   *config.Config
	flows map[string]*managed

	// BeforeReload, when set, is given the configuration Reload read
	// before it replaces the running one; its error refuses the reload
	// (nothing changes) and is Reload's. kmirror run applies the REST
	// token here.
	BeforeReload func(*config.Config) error

	// Explain, when set, rewrites the errors and problems Status shows;
	// kmirror mm1 names its --replication.factor where an error names
	// an MM2 key its user never wrote, as it does in the log.
	Explain func(string) string
}

// DefaultStopTimeout is how long Run waits for its flows to stop (records
// in flight acknowledged, progress saved) before it gives up on them.
const DefaultStopTimeout = 30 * time.Second

// ErrStopTimeout is returned by Run when a flow did not stop in time.
var ErrStopTimeout = errors.New("flows did not stop in time")

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
	state   string // running, stopping, stopped, failed
	err     error
	late    string // why a stopping flow is a problem: it did not stop in time
	started time.Time
	// fatal: the flow's failure stops Run. Flows Run started are; those
	// a Reload started or Add started are not: they show as failed.
	fatal bool
}

// stop cancels the flow; Status shows it stopping until it has.
func (mf *managed) stop() {
	mf.mu.Lock()
	if mf.state == "running" {
		mf.state = "stopping"
	}
	mf.mu.Unlock()
	mf.cancel()
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
	r := &Runner{path: path, cfg: cfg, only: only, m: m, log: log, fatal: make(chan error, 1), flows: make(map[string]*managed),
		stopTimeout: DefaultStopTimeout, runFlow: runKind}
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

// SetStopTimeout sets how long Run waits for the flows to stop once its
// context ends (DefaultStopTimeout unless set; call it before Run). Each
// flow waits up to half of it for its records in flight, so that saving
// its progress fits in the rest.
func (r *Runner) SetStopTimeout(d time.Duration) {
	if d > 0 {
		r.stopTimeout = d
	}
}

// Run starts every flow and returns when ctx ends (nil) or a flow fails on
// its own (its error): a replicator that is partly broken but looks alive is
// worse than one that exits loudly. A flow a Reload started that fails only
// shows as failed: a reload never ends Run. Flows are stopped before Run
// returns, waiting for them up to the stop timeout (SetStopTimeout): a flow
// that has not stopped by then (a target that does not answer) is left
// behind and Run returns an error wrapping ErrStopTimeout that names it.
// Status answers all along; the flows show as stopping.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.startAll(nil, true)
	r.mu.Unlock()
	var err error
	select {
	case <-ctx.Done():
	case err = <-r.fatal:
	}
	r.mu.Lock()
	r.ctx = nil // Reload, Restart and Add refuse from now on
	flows := make([]*managed, 0, len(r.flows))
	for _, mf := range r.flows {
		mf.stop()
		flows = append(flows, mf)
	}
	r.mu.Unlock()
	r.log.Info("stopping flows", "flows", len(flows), "timeout", r.stopTimeout)
	late := waitStopped(flows, time.Now().Add(r.stopTimeout))
	r.mu.Lock()
	for _, mf := range flows {
		if !slices.Contains(late, mf) && r.flows[mf.name] == mf {
			delete(r.flows, mf.name)
		}
	}
	r.mu.Unlock()
	if len(late) > 0 {
		left := flowNames(late)
		sort.Strings(left)
		r.log.Error("flows did not stop in time; their progress since the last save is not saved, and those records are copied again at the next start",
			"flows", left, "timeout", r.stopTimeout)
		err = errors.Join(err, fmt.Errorf("%w (%v): %s", ErrStopTimeout, r.stopTimeout, strings.Join(left, ", ")))
	}
	return err
}

// waitStopped waits until every flow has stopped or the deadline passes,
// and returns those that have not stopped.
func waitStopped(flows []*managed, deadline time.Time) []*managed {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var left []*managed
	for _, mf := range flows {
		select {
		case <-mf.done:
			continue
		default:
		}
		select {
		case <-mf.done:
		case <-t.C:
			// The deadline passed: no more waiting, but what has
			// stopped meanwhile is not reported left.
			t.Reset(0)
			left = append(left, mf)
		}
	}
	return left
}

func flowNames(flows []*managed) []string {
	out := make([]string, len(flows))
	for i, mf := range flows {
		out[i] = mf.name
	}
	return out
}

// fileFlow is a flow of the file: its configuration and how it runs.
type fileFlow struct {
	fc   *config.Flow
	kind Kind
	opts flow.Options
}

// fileFlows returns the flows the file cfg runs, by name.
func (r *Runner) fileFlows(cfg *config.Config) map[string]fileFlow {
	out := make(map[string]fileFlow)
	flows := selected(cfg, r.only)
	origin := flow.OriginHeaderFlows(cfg, flows)
	for _, fc := range flows {
		out[fc.Name()] = fileFlow{fc, Replication, flow.Options{AddOrigin: origin[fc.Name()]}}
	}
	for _, fc := range heartbeatPairs(cfg, r.only, r.log) {
		out[fc.Name()] = fileFlow{fc, Heartbeats, flow.Options{}}
	}
	return out
}

// startAll starts the flows of r.cfg but those in keep; r.mu is held.
// fatal says whether their failure stops Run.
func (r *Runner) startAll(keep map[string]bool, fatal bool) {
	for name, ff := range r.fileFlows(r.cfg) {
		if !keep[name] {
			r.start(name, ff.fc, ff.kind, false, ff.opts, fatal)
		}
	}
}

// sameFlow reports whether a flow of the file runs the same in both
// configurations: same settings for the flow, its clients and the worker
// view, same kind and options. Every typed field of config.Flow is built
// from these settings.
func sameFlow(a, b fileFlow) bool {
	x, y := a.fc, b.fc
	return a.kind == b.kind && a.opts == b.opts && x.Enabled == y.Enabled &&
		maps.Equal(x.Settings, y.Settings) && maps.Equal(x.Worker, y.Worker) &&
		maps.Equal(x.SourceConsumer, y.SourceConsumer) && maps.Equal(x.SourceAdmin, y.SourceAdmin) &&
		maps.Equal(x.TargetProducer, y.TargetProducer) && maps.Equal(x.TargetAdmin, y.TargetAdmin) &&
		maps.Equal(x.TargetConsumer, y.TargetConsumer)
}

// start runs one flow under name; r.mu is held.
func (r *Runner) start(name string, fc *config.Flow, kind Kind, added bool, opts flow.Options, fatal bool) {
	ctx, cancel := context.WithCancel(r.ctx)
	if opts.Drain == 0 {
		opts.Drain = r.stopTimeout / 2
	}
	mf := &managed{name: name, kind: kind, eos: fc.ExactlyOnce, f: flow.New(fc, opts, r.m, r.log),
		cancel: cancel, done: make(chan struct{}), state: "running", started: time.Now(), fatal: fatal && !added}
	if added {
		mf.added = fc
	}
	r.flows[mf.name] = mf
	go func() {
		defer close(mf.done)
		err := r.runFlow(ctx, kind, fc, mf.f)
		mf.mu.Lock()
		switch {
		case err != nil && ctx.Err() == nil:
			mf.state, mf.err = "failed", err
		default:
			mf.state = "stopped"
		}
		mf.mu.Unlock()
		if err != nil && ctx.Err() != nil {
			r.log.Warn("flow stopped without finishing cleanly; records after its last saved progress are copied again at the next start",
				"flow", name, "err", err)
		}
		if err != nil && ctx.Err() == nil {
			if !mf.fatal {
				r.log.Error("flow failed; the other flows go on", "flow", name, "err", err)
				return
			}
			select {
			case r.fatal <- err:
			default:
			}
		}
	}()
}

// runKind runs f as kind says until ctx ends.
func runKind(ctx context.Context, kind Kind, _ *config.Flow, f *flow.Flow) error {
	switch kind {
	case Heartbeats:
		return f.RunHeartbeatsOnly(ctx)
	case Checkpoints:
		return f.RunCheckpointsOnly(ctx)
	}
	return f.Run(ctx)
}

// stopWait stops flows and waits for them up to the stop timeout (as
// Run's stop), r.mu not held (r.ctl is), so Status answers meanwhile. It
// returns the flows that did not stop in time (a cluster that does not
// answer): each is logged, and shows in Status as stopping with a problem
// (so /ready is 503) until it has stopped; then, if Run still runs and
// the flow is still the one of its name, then(mf) runs under r.ctl and
// r.mu to do what the caller could not (start the flow again).
func (r *Runner) stopWait(flows []*managed, why string, then func(*managed)) []*managed {
	for _, mf := range flows {
		mf.stop()
	}
	late := waitStopped(flows, time.Now().Add(r.stopTimeout))
	for _, mf := range late {
		msg := fmt.Sprintf("flow %s did not stop within %v (%s): a cluster that does not answer? It goes on when the old one has stopped", mf.name, r.stopTimeout, why)
		mf.mu.Lock()
		mf.late = msg
		mf.mu.Unlock()
		r.log.Error("flow did not stop in time; it goes on once it has stopped", "flow", mf.name, "for", why, "timeout", r.stopTimeout)
		go func() {
			<-mf.done
			r.ctl.Lock()
			defer r.ctl.Unlock()
			r.mu.Lock()
			defer r.mu.Unlock()
			mf.mu.Lock()
			mf.late = ""
			mf.mu.Unlock()
			if r.ctx == nil || r.flows[mf.name] != mf {
				return
			}
			r.log.Info("flow stopped late; going on", "flow", mf.name, "for", why)
			then(mf)
		}()
	}
	return late
}

// get returns the flow of that name, if any.
func (r *Runner) get(name string) (*managed, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	mf, ok := r.flows[name]
	return mf, ok
}

// Restart stops a flow and starts it again with the same configuration.
// A flow that does not stop within the stop timeout restarts once it has
// stopped; Restart returns an error wrapping ErrStopTimeout that says so.
func (r *Runner) Restart(name string) error {
	r.ctl.Lock()
	defer r.ctl.Unlock()
	mf, ok := r.get(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownFlow, name)
	}
	late := r.stopWait([]*managed{mf}, "restart", func(mf *managed) {
		if err := r.restart(mf); err != nil {
			r.log.Error("restarting flow", "flow", mf.name, "err", err)
		}
	})
	if len(late) > 0 {
		return fmt.Errorf("%w: flow %q did not stop within %v; it starts again once it has stopped", ErrStopTimeout, name, r.stopTimeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restart(mf)
}

// restart starts the stopped flow mf again; r.mu is held.
func (r *Runner) restart(mf *managed) error {
	name := mf.name
	if r.ctx == nil {
		return ErrNotRunning
	}
	if mf.added != nil {
		r.log.Info("restarting flow", "flow", name)
		r.start(name, mf.added, mf.kind, true, flow.Options{}, false)
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
	r.start(name, fc, mf.kind, false, opts, mf.fatal)
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
	mf, ok := r.get(name)
	if !ok || mf.kind != Replication {
		return fmt.Errorf("%w %q", ErrUnknownFlow, name)
	}
	if !fn(mf.f) {
		return fmt.Errorf("flow %q is not replicating yet", name)
	}
	return nil
}

// Reload reads the configuration file again. An invalid file changes
// nothing and its error is returned; a valid one replaces the running
// flows: the flows whose settings changed, and those the file no longer
// runs, are stopped; new and changed ones are started; the others go on
// untouched. A flow Reload starts that fails (an unreachable cluster)
// shows as failed in Status, with its error, and the others go on: a
// reload never stops Run. Reloading the file again restarts it.
func (r *Runner) Reload() error {
	if r.path == "" {
		return errors.New("there is no MM2 file to reload: this kmirror's flows come from the Connect REST API")
	}
	cfg, err := Load(r.path, r.only, r.log)
	if err != nil {
		return err
	}
	if r.BeforeReload != nil {
		if err := r.BeforeReload(cfg); err != nil {
			return err
		}
	}
	r.ctl.Lock()
	defer r.ctl.Unlock()
	r.mu.Lock()
	if r.ctx == nil {
		r.mu.Unlock()
		return ErrNotRunning
	}
	r.log.Info("reloading configuration", "file", r.path)
	oldFlows, newFlows := r.fileFlows(r.cfg), r.fileFlows(cfg)
	keep := make(map[string]bool)
	var stop []*managed
	for name, mf := range r.flows {
		if mf.added != nil {
			continue
		}
		old, wasOld := oldFlows[name]
		nf, ok := newFlows[name]
		mf.mu.Lock()
		failed := mf.state == "failed"
		mf.mu.Unlock()
		if ok && wasOld && !failed && sameFlow(old, nf) {
			keep[name] = true
			continue
		}
		stop = append(stop, mf)
	}
	r.mu.Unlock()
	// A flow that does not stop in time keeps its place (Status shows
	// it stopping, with the problem) and starts from the file in effect
	// once it has stopped.
	late := r.stopWait(stop, "reload", func(mf *managed) {
		delete(r.flows, mf.name)
		if ff, ok := r.fileFlows(r.cfg)[mf.name]; ok {
			r.start(mf.name, ff.fc, ff.kind, false, ff.opts, false)
		}
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, mf := range stop {
		if slices.Contains(late, mf) {
			keep[mf.name] = true
		} else if r.flows[mf.name] == mf {
			delete(r.flows, mf.name)
		}
	}
	r.cfg = cfg
	if r.ctx == nil {
		return ErrNotRunning
	}
	r.startAll(keep, false)
	r.log.Info("configuration reloaded", "flows_restarted", len(stop), "flows_unchanged", len(keep),
		"flows_started", len(newFlows)-len(keep))
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
	r.ctl.Lock()
	defer r.ctl.Unlock()
	r.mu.Lock()
	running := r.ctx != nil
	r.mu.Unlock()
	if !running {
		return ErrNotRunning
	}
	if old, ok := r.get(name); ok {
		late := r.stopWait([]*managed{old}, "replace", func(*managed) {
			r.log.Info("starting flow", "flow", name, "pair", fc.Name(), "kind", kind)
			r.start(name, fc, kind, true, flow.Options{}, false)
		})
		if len(late) > 0 {
			return nil // starts once the old one has stopped
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return ErrNotRunning
	}
	r.log.Info("starting flow", "flow", name, "pair", fc.Name(), "kind", kind)
	r.start(name, fc, kind, true, flow.Options{}, false)
	return nil
}

// Remove stops a flow Add started and waits for it.
func (r *Runner) Remove(name string) error {
	r.ctl.Lock()
	defer r.ctl.Unlock()
	mf, ok := r.get(name)
	if !ok || mf.added == nil {
		return fmt.Errorf("%w %q", ErrUnknownFlow, name)
	}
	if late := r.stopWait([]*managed{mf}, "remove", func(mf *managed) { delete(r.flows, mf.name) }); len(late) > 0 {
		return nil // gone from Status once it has stopped
	}
	r.mu.Lock()
	if r.flows[name] == mf {
		delete(r.flows, name)
	}
	r.mu.Unlock()
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
		late := mf.late
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
		if late != "" && st.State == "stopping" {
			st.Problem = late
		}
		if r.Explain != nil {
			st.Error, st.Problem = r.Explain(st.Error), r.Explain(st.Problem)
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

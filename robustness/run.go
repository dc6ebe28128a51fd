package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/latproxy"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// Cluster aliases in kmirror's configuration.
const (
	srcAlias = "src"
	dstAlias = "dst"
	flowName = srcAlias + "->" + dstAlias
)

// Options of a run.
type Options struct {
	Seed     uint64
	Duration time.Duration // of the traffic and faults
	// FaultGap is the mean time between two fault starts (faults may
	// overlap). Default 12 s.
	FaultGap time.Duration
	// Rate is the plain producer's records per second. Default 150.
	Rate int
	// Sample, when set, is called every 10 s with the live workers (soak).
	Sample func(r *Run, elapsed time.Duration)
	// NoRace builds kmirror without the race detector (the soak: the
	// detector's shadow memory and histories would be what it measures).
	NoRace bool
}

// Setup is what the seed chose besides the faults.
type Setup struct {
	Workers    int
	ExactlyOne bool
	RecordPath bool
}

func (s Setup) String() string {
	path := "passthrough"
	if s.RecordPath {
		path = "record path"
	}
	mode := "at-least-once"
	if s.ExactlyOne {
		mode = "exactly-once"
	}
	return fmt.Sprintf("%d worker(s) in group mode, %s, %s", s.Workers, mode, path)
}

// Run is one robustness run.
type Run struct {
	t     testing.TB
	opts  Options
	setup Setup
	dir   string // worker configs and logs

	src, dst       *testkafka.Cluster
	srcCl, dstCl   *kgo.Client
	srcAdm, dstAdm *kadm.Client
	proxies        map[string][]*latproxy.Proxy // "source", "target"
	workers        []*worker
	traffic        *traffic
	faults         []fault

	mu        sync.Mutex
	busy      map[string]bool
	doomedCut map[int32]int64 // source ends of doomed at its last remote deletion
	done      map[string]int  // faults injected per kind
	skipped   int
	crashes   []string
	start     time.Time
}

// Result is what a run checked.
type Result struct {
	Seed           uint64
	Setup          Setup
	Duration       time.Duration
	Faults         string // per kind
	FaultsDone     int
	SourceRecords  int // checked, record by record
	TargetRecords  int
	Duplicates     int
	Lost           int
	GoneWithRemote int // records of doomed before its remote topic's deletion (not copied again, by design)
	Checkpoints    int
	Produced       int64
	TxCommitted    int64
	TxAborted      int64
}

func (r Result) String() string {
	return fmt.Sprintf("seed %d, %v, %s: faults %d (%s); source records checked %d, target %d, duplicates %d, lost %d, gone with the deleted remote topic %d, checkpoints checked %d; produced %d plain, %d in committed and %d in aborted transactions",
		r.Seed, r.Duration, r.Setup, r.FaultsDone, r.Faults, r.SourceRecords, r.TargetRecords, r.Duplicates, r.Lost, r.GoneWithRemote, r.Checkpoints, r.Produced, r.TxCommitted, r.TxAborted)
}

func (r *Run) logf(format string, args ...any) {
	r.t.Helper()
	el := time.Duration(0)
	if !r.start.IsZero() {
		el = time.Since(r.start).Round(100 * time.Millisecond)
	}
	r.t.Logf("[%7s] %s", el, fmt.Sprintf(format, args...))
}

// Execute runs the whole thing: clusters, workers, traffic, faults, then
// the checks, which fail t.
func Execute(tt *testing.T, opts Options) Result {
	t := &failT{TB: tt}
	if opts.FaultGap <= 0 {
		opts.FaultGap = 12 * time.Second
	}
	if opts.Rate <= 0 {
		opts.Rate = 150
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 22))
	r := &Run{t: t, opts: opts, busy: map[string]bool{}, done: map[string]int{}, proxies: map[string][]*latproxy.Proxy{}}
	r.setup = Setup{Workers: 1 + rng.IntN(3), ExactlyOne: rng.IntN(2) == 0, RecordPath: rng.IntN(3) == 0}
	r.faults = plan(rng, opts.Duration, opts.FaultGap, r.setup.Workers)
	t.Logf("robustness seed %d (reproduce: make test-robustness SEED=%d DURATION=%v): %v, %d faults planned:", opts.Seed, opts.Seed, opts.Duration, r.setup, len(r.faults))
	for _, f := range r.faults {
		t.Logf("  %v", f)
	}

	dir, err := os.MkdirTemp("", fmt.Sprintf("kmirror-robustness-%d-", opts.Seed))
	if err != nil {
		t.Fatal(err)
	}
	r.dir = dir
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker configs and logs kept in %s", dir)
			for _, w := range r.workers {
				t.Logf("%v log tail:\n%s", w, tail(w.logPath, 60))
			}
			for _, m := range t.failures() {
				t.Logf("FAILED (said above, before the logs): %s", m)
			}
		} else {
			os.RemoveAll(dir)
		}
	})

	// Build while the clusters start.
	built := make(chan string, 1)
	go func() { built <- buildKmirror(dir, !r.opts.NoRace) }()
	cs := testkafka.Start(t, testkafka.Options{Clusters: 2, Nodes: 3, Proxied: true})
	bin := <-built
	if bin == "" {
		t.Fatalf("go build failed:\n%s", tail(filepath.Join(dir, "build.log"), 40))
	}
	r.src, r.dst = cs[0], cs[1]
	r.srcCl, r.dstCl = r.src.Client(t), r.dst.Client(t)
	r.srcAdm, r.dstAdm = kadm.NewClient(r.srcCl), kadm.NewClient(r.dstCl)
	r.startProxies(t)
	for _, ts := range initialTopics() {
		r.src.CreateTopic(t, ts.name, ts.partitions, ts.configs)
	}
	r.traffic = newTraffic(r.src, opts.Rate, opts.Seed)
	cfg := r.writeConfig(t, bin)
	for i := range r.setup.Workers {
		w := &worker{id: i + 1, bin: bin, cfg: cfg, logPath: filepath.Join(dir, fmt.Sprintf("worker-%d.log", i+1)),
			rest: freeAddr(t), metrics: freeAddr(t), onCrash: r.crashed}
		r.workers = append(r.workers, w)
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, w := range r.workers {
			w.kill()
		}
	})
	if err := r.traffic.start(); err != nil {
		t.Fatal(err)
	}
	r.start = time.Now()
	r.logf("traffic started; %d workers at %s", len(r.workers), r.restAddrs())

	r.drive()
	return r.finish()
}

// drive runs the faults on their schedule, the mid-run topic changes and
// the soak sampler, until the run's duration has passed and every fault
// has healed.
func (r *Run) drive() {
	var wg sync.WaitGroup
	r.startTopicChanges(&wg)
	r.startFaults(&wg)
	stopSampler := r.startSampler()
	r.logProgress()
	wg.Wait()
	stopSampler()
	r.logf("faults over; stopping the traffic")
	r.traffic.stop()
}

// startTopicChanges creates topicLate at a quarter of the run and grows
// topicEvents at half of it, each in a goroutine of wg.
func (r *Run) startTopicChanges(wg *sync.WaitGroup) {
	timers := []struct {
		at time.Duration
		fn func()
	}{
		{r.opts.Duration / 4, func() {
			r.src.CreateTopic(r.t, topicLate, 2, nil)
			r.traffic.addTopic(topicLate)
			r.logf("created topic %s (2 partitions)", topicLate)
		}},
		{r.opts.Duration / 2, func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := r.srcAdm.CreatePartitions(ctx, 2, topicEvents)
			r.logf("grew topic %s from 3 to 5 partitions: %v", topicEvents, err)
		}},
	}
	for _, tm := range timers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(r.start.Add(tm.at)))
			tm.fn()
		}()
	}
}

// startFaults runs every planned fault at its time, each in a goroutine
// of wg.
func (r *Run) startFaults(wg *sync.WaitGroup) {
	for _, f := range r.faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(r.start.Add(f.at)))
			r.runFault(f)
		}()
	}
}

// runFault injects f and counts it as done or skipped.
func (r *Run) runFault(f fault) {
	r.logf("fault %s begins", f.kind)
	what, err := r.inject(f)
	switch {
	case err != nil:
		r.t.Errorf("fault %v: %v", f, err)
	case strings.HasPrefix(what, "skipped"):
		r.mu.Lock()
		r.skipped++
		r.mu.Unlock()
		r.logf("fault %s %s", f.kind, what)
	default:
		r.mu.Lock()
		r.done[f.kind]++
		r.mu.Unlock()
		r.logf("fault %s done: %s", f.kind, what)
	}
}

// startSampler calls the soak sampler every 10 s, if there is one; the
// function it returns stops it and waits for it.
func (r *Run) startSampler() func() {
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	if r.opts.Sample != nil {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			tick := time.NewTicker(10 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stopSampling:
					return
				case <-tick.C:
					r.opts.Sample(r, time.Since(r.start))
				}
			}
		}()
	}
	return func() {
		close(stopSampling)
		sampler.Wait()
	}
}

// logProgress logs the traffic's counters every 30 s until the run's
// duration has passed.
func (r *Run) logProgress() {
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
	end := time.After(time.Until(r.start.Add(r.opts.Duration)))
	for {
		select {
		case <-end:
			return
		case <-progress.C:
			r.logf("traffic: %d produced (%d failed), transactions %d committed / %d aborted records (%d errors), groups read %d",
				r.traffic.produced.Load(), r.traffic.failed.Load(), r.traffic.txCommitted.Load(), r.traffic.txAborted.Load(), r.traffic.txErr.Load(), r.traffic.consumed.Load())
		}
	}
}

// crashed records a worker that exited by itself.
func (r *Run) crashed(w *worker, status string) {
	r.mu.Lock()
	r.crashes = append(r.crashes, fmt.Sprintf("%v exited by itself: %s", w, status))
	r.mu.Unlock()
}

// startProxies puts a proxy in front of every broker of both clusters;
// kmirror reaches the brokers only through them.
func (r *Run) startProxies(t testing.TB) {
	for name, c := range map[string]*testkafka.Cluster{"source": r.src, "target": r.dst} {
		for listen, target := range c.ProxyTargets() {
			p, err := latproxy.Start(latproxy.Options{Listen: listen, Target: target, QueueBytes: 8 << 20})
			if err != nil {
				t.Fatalf("proxy %s -> %s: %v", listen, target, err)
			}
			t.Cleanup(func() { p.Close() })
			r.proxies[name] = append(r.proxies[name], p)
		}
	}
}

// writeConfig writes the workers' MM2 properties file.
func (r *Run) writeConfig(t testing.TB, bin string) string {
	var topics []string
	for _, ts := range initialTopics() {
		topics = append(topics, ts.name)
	}
	topics = append(topics, topicLate)
	lines := []string{
		"clusters = " + srcAlias + ", " + dstAlias,
		srcAlias + ".bootstrap.servers = " + strings.Join(r.src.ProxyBootstrap, ","),
		dstAlias + ".bootstrap.servers = " + strings.Join(r.dst.ProxyBootstrap, ","),
		flowName + ".enabled = true",
		flowName + ".topics = " + strings.Join(topics, ", "),
		flowName + ".groups = g-.*",
		dstAlias + "->" + srcAlias + ".emit.heartbeats.enabled = false",
		"replication.factor = 3",
		"refresh.topics.interval.seconds = 2",
		"refresh.groups.interval.seconds = 2",
		"emit.checkpoints.interval.seconds = 1",
		"sync.group.offsets.enabled = true",
		"sync.group.offsets.interval.seconds = 1",
		"offset.flush.interval.ms = 1000",
		"kmirror.workers = group",
		"kmirror.rest.auth = none",
		srcAlias + ".consumer.session.timeout.ms = 6000",
		srcAlias + ".consumer.heartbeat.interval.ms = 500",
	}
	if r.setup.ExactlyOne {
		lines = append(lines, flowName+".kmirror.exactly.once.slots = 6", dstAlias+".exactly.once.source.support = enabled")
	}
	if r.setup.RecordPath {
		lines = append(lines, "kmirror.passthrough.enabled = false")
	}
	p := filepath.Join(r.dir, "mm2.properties")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *Run) restAddrs() string {
	var s []string
	for _, w := range r.workers {
		s = append(s, w.rest)
	}
	return strings.Join(s, " ")
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

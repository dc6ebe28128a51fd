package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// ScaleConfig says what the scale benchmark (kbench scale) runs: many idle
// partitions with a small backlog each, then new topics while idle.
type ScaleConfig struct {
	Root        string
	Dir         string
	Replicators []string // Kmirror (default path: passthrough) and MM2
	Topics      int
	Partitions  int32
	PerPart     int           // backlog records per partition
	NewTopics   int           // topics created while idle
	Idle        time.Duration // idle window measured after catch-up
	Refresh     time.Duration // refresh.topics.interval.seconds of both
	Profile     time.Duration // CPU profile of kmirror after the idle window (0: none)
	TasksMax    int
	Timeout     time.Duration // for catch-up and for detection each
	Log         io.Writer
}

// ScaleResult is one replicator's run of the scale benchmark.
type ScaleResult struct {
	Replicator string  `json:"replicator"`
	Partitions int     `json:"partitions"`
	Records    int64   `json:"records"`
	FirstSec   float64 `json:"first_record_seconds"` // process start to the first record on the target
	CatchUpSec float64 `json:"catch_up_seconds"`     // process start to every backlog on the target
	CPUCatchUp float64 `json:"cpu_catch_up_seconds"` // CPU from start to catch-up
	IdleSec    float64 `json:"idle_seconds"`
	IdleCPU    float64 `json:"idle_cpu_seconds"` // CPU within the idle window
	RSS        int64   `json:"rss_bytes"`        // VmRSS at the end of the idle window
	PeakRSS    int64   `json:"peak_rss_bytes"`   // VmHWM then
	// DetectSec is from creating each new topic (and writing one record to
	// each partition) to its first record on the target, per topic.
	DetectSec []float64 `json:"detect_seconds"`
	Load1     float64   `json:"load1"`
	Profile   *Profile  `json:"profile,omitempty"`
	Error     string    `json:"error,omitempty"`
}

// IdleCPUPercent is the idle window's CPU as a percentage of one core.
func (r ScaleResult) IdleCPUPercent() float64 {
	if r.IdleSec <= 0 {
		return 0
	}
	return 100 * r.IdleCPU / r.IdleSec
}

// DetectMax is the slowest new topic's detection time (0 without any).
func (r ScaleResult) DetectMax() float64 {
	if len(r.DetectSec) == 0 {
		return 0
	}
	return slices.Max(r.DetectSec)
}

// ScaleResults is what scale.json holds.
type ScaleResults struct {
	Meta ScaleMeta     `json:"meta"`
	Runs []ScaleResult `json:"runs"`
}

// ScaleMeta describes a scale run.
type ScaleMeta struct {
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	CPU        string    `json:"cpu"`
	Cores      int       `json:"cores"`
	Kafka      string    `json:"kafka"`
	KmirrorRev string    `json:"kmirror_rev"`
	Topics     int       `json:"topics"`
	Partitions int32     `json:"partitions_per_topic"`
	PerPart    int       `json:"records_per_partition"`
	NewTopics  int       `json:"new_topics"`
	IdleSec    float64   `json:"idle_seconds"`
	RefreshSec float64   `json:"refresh_topics_interval_seconds"`
	TasksMax   int       `json:"tasks_max"`
	MM2JVM     []string  `json:"mm2_jvm"`
	Properties string    `json:"properties"`
	Load1Start float64   `json:"load1_start"`
}

// scaleWorkload names the scale topics: bench-scale-N.
func scaleWorkload(c ScaleConfig) Workload {
	return Workload{Name: "scale", Topics: c.Topics, Partitions: c.Partitions, ValueBytes: 100, Compression: "none"}
}

// ScaleProperties is the mm2.properties of a scale run: the benchmark's
// file plus the topic refresh interval both replicators use.
func ScaleProperties(src, dst, srcBootstrap, dstBootstrap string, c ScaleConfig) string {
	return MM2Properties(src, dst, srcBootstrap, dstBootstrap, scaleWorkload(c), c.TasksMax) +
		fmt.Sprintf("refresh.topics.interval.seconds = %d\n", int(c.Refresh.Seconds()))
}

// newTopicNames are the topics created while run seq is idle; they match
// the scale regex and no backlog topic.
func newTopicNames(c ScaleConfig, seq int) []string {
	var ts []string
	for i := range c.NewTopics {
		ts = append(ts, fmt.Sprintf("bench-scale-%d", 1_000_000+seq*1000+i))
	}
	return ts
}

// RunScale starts a source and a target cluster, loads the backlog, then
// runs each replicator in turn under fresh aliases and measures it. It
// saves scale.json after every run and always stops what it started.
func RunScale(ctx context.Context, c ScaleConfig) (*ScaleResults, error) {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if len(c.Replicators) == 0 {
		c.Replicators = []string{Kmirror, MM2}
	}
	libs, bin, err := prepareRun(ctx, c.Root, c.Dir, c.Log)
	if err != nil {
		return nil, err
	}
	m := meta(Config{Root: c.Root, TasksMax: c.TasksMax}, libs, nil)
	res := &ScaleResults{Meta: ScaleMeta{Started: time.Now(), CPU: m.CPU, Cores: m.Cores, Kafka: m.Kafka, KmirrorRev: m.KmirrorRev,
		Topics: c.Topics, Partitions: c.Partitions, PerPart: c.PerPart, NewTopics: c.NewTopics, IdleSec: c.Idle.Seconds(),
		RefreshSec: c.Refresh.Seconds(), TasksMax: c.TasksMax, MM2JVM: MM2JVMOpts, Load1Start: loadAvg(),
		Properties: ScaleProperties("s1", "t1", "SOURCE", "TARGET", c)}}
	save := func() error {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(c.Dir, "scale.json"), b, 0o644)
	}
	cl, err := StartClusters(ctx, filepath.Join(c.Dir, "clusters"), libs, nil, "", "", c.Log)
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	env := &Env{Clusters: cl, Libs: libs, Kmirror: bin, Dir: c.Dir, Log: c.Log, TasksMax: c.TasksMax, Timeout: c.Timeout}
	defer env.Close()
	if err := env.admins(); err != nil {
		return nil, err
	}
	w := scaleWorkload(c)
	start := time.Now()
	if err := loadScale(ctx, env.source, cl.Source, w.TopicNames(), c.Partitions, c.PerPart); err != nil {
		return res, err
	}
	fmt.Fprintf(c.Log, "kbench: scale: %d topics × %d partitions, %d records each, loaded in %v\n",
		c.Topics, c.Partitions, c.PerPart, time.Since(start).Round(time.Millisecond))
	for _, r := range c.Replicators {
		fmt.Fprintf(c.Log, "kbench: scale: %s...\n", r)
		rr := env.scale(ctx, r, c)
		rr.Load1 = loadAvg()
		res.Runs = append(res.Runs, rr)
		fmt.Fprintf(c.Log, "kbench:   %s\n", rr.Summary())
		if err := save(); err != nil {
			return res, err
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	res.Meta.Finished = time.Now()
	return res, save()
}

// loadScale creates topics with parts partitions each and writes per
// records of 100 bytes to every partition.
func loadScale(ctx context.Context, adm *kadm.Client, bootstrap string, topics []string, parts int32, per int) error {
	for b := 0; b < len(topics); b += 100 {
		resp, err := adm.CreateTopics(ctx, parts, 1, nil, topics[b:min(b+100, len(topics))]...)
		if err != nil {
			return err
		}
		if err := resp.Error(); err != nil {
			return err
		}
	}
	if err := waitLeaders(ctx, adm, topics, parts); err != nil {
		return err
	}
	return produceEach(ctx, bootstrap, topics, parts, per)
}

// waitLeaders waits up to three minutes until every partition of topics has a
// leader: a producer gives up on a topic its broker does not host yet.
func waitLeaders(ctx context.Context, adm *kadm.Client, topics []string, parts int32) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		td, err := adm.ListTopics(ctx, topics...)
		ready := 0
		if err == nil {
			for _, t := range td {
				if t.Err == nil && len(t.Partitions) == int(parts) {
					led := 0
					for _, p := range t.Partitions {
						if p.Err == nil && p.Leader >= 0 {
							led++
						}
					}
					if led == int(parts) {
						ready++
					}
				}
			}
		}
		if ready == len(topics) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d new topics have leaders: %w", ready, len(topics), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// produceEach writes per records to each partition of topics.
func produceEach(ctx context.Context, bootstrap string, topics []string, parts int32, per int) error {
	p, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond), kgo.UnknownTopicRetries(50))
	if err != nil {
		return err
	}
	defer p.Close()
	value := make([]byte, 100)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	var rs []*kgo.Record
	for _, t := range topics {
		for part := range parts {
			for range per {
				rs = append(rs, &kgo.Record{Topic: t, Partition: part, Value: value})
			}
		}
	}
	return p.ProduceSync(ctx, rs...).FirstErr()
}

// scale runs one replicator of the scale benchmark.
func (e *Env) scale(ctx context.Context, repl string, c ScaleConfig) ScaleResult {
	parts := c.Topics * int(c.Partitions)
	res := ScaleResult{Replicator: repl, Partitions: parts, Records: int64(parts * c.PerPart)}
	e.seq++
	src, dst := fmt.Sprintf("s%d", e.seq), fmt.Sprintf("t%d", e.seq)
	base := filepath.Join(e.Dir, "scale-"+repl)
	props := base + ".properties"
	if err := os.WriteFile(props, []byte(ScaleProperties(src, dst, e.Clusters.Source, e.Clusters.Target, c)), 0o644); err != nil {
		res.Error = err.Error()
		return res
	}
	var cmd *exec.Cmd
	var prof *profiler
	switch repl {
	case Kmirror:
		args := []string{"run", "--clusters", dst}
		if c.Profile > 0 {
			ports, err := kafkalocal.FreePorts(2)
			if err != nil {
				res.Error = err.Error()
				return res
			}
			prof = &profiler{addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), restAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
				seconds: int(c.Profile.Seconds()), path: base + "-idle.cpu.pprof"}
			args = append(args, "--metrics-addr", prof.addr, "--rest-addr", prof.restAddr)
		}
		cmd = exec.Command(e.Kmirror, append(args, props)...)
		cmd.Env = append(os.Environ(), "KMIRROR_REST_TOKEN="+profileToken)
	case MM2:
		var err error
		if cmd, err = e.mm2Command(props, dst); err != nil {
			res.Error = err.Error()
			return res
		}
	default:
		res.Error = "scale runs only " + Kmirror + " and " + MM2
		return res
	}
	newTopics := newTopicNames(c, e.seq)
	defer func() {
		if err := e.cleanup(ctx); err != nil && res.Error == "" {
			res.Error = "cleanup: " + err.Error()
		}
		if err := deleteAll(ctx, e.source, func(t string) bool { return !slices.Contains(newTopics, t) }); err != nil && res.Error == "" {
			res.Error = "cleanup: " + err.Error()
		}
	}()
	logf, err := os.Create(base + ".log")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.Error = err.Error()
		return res
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if err := stop(cmd, exited, 60*time.Second); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}()
	// sleep waits d unless the run is cancelled or the process exits.
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			exited <- err // for stop
			return fmt.Errorf("process exited early (%v); log %s", err, base+".log")
		case <-time.After(d):
			return nil
		}
	}

	var remote []string
	for _, t := range scaleWorkload(c).TopicNames() {
		remote = append(remote, src+"."+t)
	}
	deadline := start.Add(e.Timeout)
	for {
		if err := sleep(time.Second); err != nil {
			res.Error = err.Error()
			return res
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := e.copied(qctx, remote)
		cancel()
		now := time.Now()
		if err == nil && n > 0 && res.FirstSec == 0 {
			res.FirstSec = now.Sub(start).Seconds()
		}
		if err == nil && n >= res.Records {
			res.CatchUpSec = now.Sub(start).Seconds()
			res.CPUCatchUp, _ = cpuSeconds(pid)
			break
		}
		if now.After(deadline) {
			res.Error = fmt.Sprintf("catch-up timeout after %v: target holds %d of %d records; log %s", e.Timeout, n, res.Records, base+".log")
			return res
		}
	}

	// Idle: nothing polls the target, nothing is written to the source.
	cpu0, err := cpuSeconds(pid)
	idleStart := time.Now()
	if err == nil {
		err = sleep(c.Idle)
	}
	cpu1, cerr := cpuSeconds(pid)
	res.IdleSec = time.Since(idleStart).Seconds()
	res.RSS, _ = statusBytes(pid, "VmRSS:")
	res.PeakRSS, _ = statusBytes(pid, "VmHWM:")
	if err != nil || cerr != nil {
		res.Error = fmt.Sprint("idle window: ", err, cerr)
		return res
	}
	res.IdleCPU = cpu1 - cpu0
	if prof != nil {
		prof.start()
		prof.wait()
		if p, err := prof.summarize(ctx); err != nil {
			fmt.Fprintf(e.Log, "kbench:   idle CPU profile: %v\n", err)
		} else {
			res.Profile = p
		}
	}

	// Detection: new topics, one record in each partition.
	created := time.Now()
	if err := loadScale(ctx, e.source, e.Clusters.Source, newTopics, c.Partitions, 1); err != nil {
		res.Error = "new topics: " + err.Error()
		return res
	}
	seen := map[string]float64{}
	deadline = created.Add(e.Timeout)
	for len(seen) < len(newTopics) {
		if err := sleep(200 * time.Millisecond); err != nil {
			res.Error = err.Error()
			return res
		}
		var want []string
		for _, t := range newTopics {
			if _, ok := seen[t]; !ok {
				want = append(want, src+"."+t)
			}
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		per, err := e.copiedPer(qctx, want, e.target.ListEndOffsets)
		cancel()
		now := time.Now()
		if err == nil {
			for t, n := range per {
				if n > 0 {
					seen[strings.TrimPrefix(t, src+".")] = now.Sub(created).Seconds()
				}
			}
		}
		if now.After(deadline) {
			res.Error = fmt.Sprintf("detection timeout after %v: %d of %d new topics on the target", e.Timeout, len(seen), len(newTopics))
			break
		}
	}
	for _, t := range newTopics {
		if s, ok := seen[t]; ok {
			res.DetectSec = append(res.DetectSec, s)
		}
	}
	return res
}

// Summary is one line about a scale run for the progress log.
func (r ScaleResult) Summary() string {
	if r.Error != "" {
		return fmt.Sprintf("%s: FAILED: %s", r.Replicator, r.Error)
	}
	return fmt.Sprintf("%s: %d partitions caught up in %.1fs (first record %.1fs), idle CPU %.2fs in %.0fs (%.2f %% of a core), RSS %.0f MiB (peak %.0f MiB), new topics on the target after %.1fs (slowest)",
		r.Replicator, r.Partitions, r.CatchUpSec, r.FirstSec, r.IdleCPU, r.IdleSec, r.IdleCPUPercent(),
		float64(r.RSS)/(1<<20), float64(r.PeakRSS)/(1<<20), r.DetectMax())
}

// ScaleSection is the "Scale" section of docs/benchmarks.md for res.
func ScaleSection(res *ScaleResults) string {
	m := res.Meta
	var b strings.Builder
	fmt.Fprintf(&b, "## Scale: %d partitions\n\n", m.Topics*int(m.Partitions))
	fmt.Fprintf(&b, "`kbench scale` (one run, %s UTC, %s, %d cores, Kafka %s, kmirror %s): %d topics × %d partitions on a one-node source, %d records of 100 B in each partition; "+
		"each replicator starts on it under fresh aliases (fresh remote topics on the same one-node target), "+
		"then idles %.0f s, then %d new topics (%d partitions, one record each) are created. "+
		"Both run refresh.topics.interval.seconds = %.0f and the benchmark's file otherwise (tasks.max = %d; MM2 JVM %s). kmirror runs its default path (passthrough). "+
		"Load average (1 min) at the start: %.2f.\n\n",
		m.Started.UTC().Format("2006-01-02 15:04"), m.CPU, m.Cores, m.Kafka, m.KmirrorRev, m.Topics, m.Partitions, m.PerPart,
		m.IdleSec, m.NewTopics, m.Partitions, m.RefreshSec, m.TasksMax, strings.Join(m.MM2JVM, " "), m.Load1Start)
	b.WriteString("| replicator | first record (s) | caught up (s) | CPU to catch up (s) | idle CPU (% of a core) | RSS idle (MiB) | peak RSS (MiB) | new topics: slowest (s) | load1 at end | error |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	by := map[string]ScaleResult{}
	for _, r := range res.Runs {
		by[r.Replicator] = r
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.2f | %.0f | %.0f | %.1f | %.2f | %s |\n", replName(r.Replicator), r.FirstSec, r.CatchUpSec, r.CPUCatchUp,
			r.IdleCPUPercent(), float64(r.RSS)/(1<<20), float64(r.PeakRSS)/(1<<20), r.DetectMax(), r.Load1, r.Error)
	}
	k, okK := by[Kmirror]
	mm, okM := by[MM2]
	if okK && okM && k.Error == "" && mm.Error == "" {
		fmt.Fprintf(&b, "\nkmirror/MM2: catch-up time %s, CPU to catch up %s, idle CPU %s, idle RSS %s, new-topic detection %s.\n",
			ratioText(k.CatchUpSec, mm.CatchUpSec), ratioText(k.CPUCatchUp, mm.CPUCatchUp), ratioText(k.IdleCPU, mm.IdleCPU),
			ratioText(float64(k.RSS), float64(mm.RSS)), ratioText(k.DetectMax(), mm.DetectMax()))
	}
	return b.String()
}

// ratioText is a/b to two places, "n/a" when b is 0.
func ratioText(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", ratio(a, b))
}

// prepareRun makes a run's folder, resolves the Kafka jars and builds the
// kmirror binary into the folder, for kbench scale and kbench rebalance.
func prepareRun(ctx context.Context, root, dir string, log io.Writer) (libs, bin string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if libs, err = kafkalocal.ResolveLibs(ctx, root, log); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "kmirror")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kmirror")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
	}
	return libs, bin, nil
}

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// What a run measures.
const (
	Kmirror   = "kmirror"    // bin/kmirror run, record path (kmirror.passthrough.enabled = false)
	KmirrorPT = "kmirror-pt" // the same with kmirror.passthrough.enabled = true
	MM2       = "mm2"        // org.apache.kafka.connect.mirror.MirrorMaker
	Limit     = "limit"      // ProducerPerformance straight to the target
	Base      = "base"       // the --baseline kmirror binary, record path
	BasePT    = "base-pt"    // the --baseline kmirror binary, passthrough
	// KmirrorEOSPT and MM2EOS run exactly-once (TARGET.exactly.once.source.support
	// = enabled): kmirror on passthrough, MM2 in dedicated mode. Their
	// records are counted up to the last stable offsets of the target
	// (what read_committed readers see), which also count one marker per
	// partition and transaction: such a run ends that many records early.
	KmirrorEOSPT = "kmirror-eos-pt"
	MM2EOS       = "mm2-eos"
)

// Replicators are the replicators a benchmark compares, in report order.
var Replicators = []string{Kmirror, KmirrorPT, MM2}

// reportOrder is the order of a workload's rows in the report; rows
// without runs are left out.
var reportOrder = []string{Kmirror, KmirrorPT, KmirrorEOSPT, Base, BasePT, MM2, MM2EOS, Limit}

// replName is a replicator's name in the report.
func replName(r string) string {
	switch r {
	case Kmirror:
		return "kmirror"
	case KmirrorPT:
		return "kmirror-pt (passthrough)"
	case Base:
		return "base (baseline, record path)"
	case BasePT:
		return "base-pt (baseline, passthrough)"
	case MM2:
		return "Apache MM2"
	case KmirrorEOSPT:
		return "kmirror-eos-pt (exactly-once, passthrough)"
	case MM2EOS:
		return "Apache MM2 exactly-once"
	case Limit:
		return "limit (ProducerPerformance)"
	}
	return r
}

// PassthroughProperty is the line kmirror-pt adds to mm2.properties, and
// RecordPathProperty the one kmirror adds (passthrough is kmirror's
// default where a flow allows it).
const (
	PassthroughProperty = "kmirror.passthrough.enabled = true"
	EOSProperty         = "exactly.once.source.support = enabled" // after "TARGET."
	RecordPathProperty  = "kmirror.passthrough.enabled = false"
)

// MM2JVMOpts are those of Kafka's connect-mirror-maker.sh.
var MM2JVMOpts = []string{"-Xms256m", "-Xmx2g"}

// Result is one measured run.
type Result struct {
	Workload   string `json:"workload"`
	Replicator string `json:"replicator"` // kmirror, mm2 or limit
	Round      int    `json:"round"`
	Records    int64  `json:"records"`
	Bytes      int64  `json:"bytes"` // payload bytes: keys, values, headers
	// StartupSeconds is from process start to the first record on the
	// target; it is not part of Seconds.
	StartupSeconds float64 `json:"startup_seconds"`
	// Seconds is from the first record on the target to the last.
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes of payload per second
	// CPUSeconds is user+system CPU of the process (and its children)
	// within Seconds; CPUTotal is from process start to the last record.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUTotal   float64 `json:"cpu_total"`
	PeakRSS    int64   `json:"peak_rss_bytes"` // VmHWM at the last record
	// Load1 is the machine's 1-minute load average when the run ended.
	Load1 float64 `json:"load1,omitempty"`
	// Procs is the number of parallel ProducerPerformance processes of a
	// limit run (0 in results older than --limit-procs: one).
	Procs int `json:"procs,omitempty"`
	// Profile summarises a CPU profile taken during the copy, if any.
	Profile *Profile `json:"profile,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// CPUPerGB is CPU seconds in the window per 10^9 payload bytes.
func (r Result) CPUPerGB() float64 {
	if r.Bytes == 0 {
		return 0
	}
	return r.CPUSeconds / (float64(r.Bytes) / 1e9)
}

// Env is what every run shares.
type Env struct {
	Clusters *Clusters
	Libs     string // Kafka jars
	Kmirror  string // kmirror binary
	Baseline string // the kmirror binary run as Base and BasePT, if any
	Dir      string // logs and properties files of each run
	Log      io.Writer
	TasksMax int // tasks.max in mm2.properties
	// KmirrorSet are lines added to kmirror's properties (Config.KmirrorSet).
	KmirrorSet []string
	Timeout    time.Duration // for one run to copy everything
	seq        int
	target     *kadm.Client
	source     *kadm.Client
}

// Close releases the admin clients.
func (e *Env) Close() {
	if e.target != nil {
		e.target.Close()
		e.source.Close()
	}
}

func (e *Env) admins() error {
	if e.target != nil {
		return nil
	}
	// kadm answers metadata from a cache no older than MetadataMinAge
	// (5 s by default); polling must see new topics at once.
	fresh := kgo.MetadataMinAge(50 * time.Millisecond)
	t, err := kgo.NewClient(kgo.SeedBrokers(e.Clusters.Target), fresh)
	if err != nil {
		return err
	}
	s, err := kgo.NewClient(kgo.SeedBrokers(e.Clusters.Source), fresh)
	if err != nil {
		t.Close()
		return err
	}
	e.target, e.source = kadm.NewClient(t), kadm.NewClient(s)
	return nil
}

// MM2Properties is the mm2.properties that both replicators run: a flow
// src->dst for w's topics, RF 1, progress saved every second, defaults
// otherwise.
func MM2Properties(src, dst, srcBootstrap, dstBootstrap string, w Workload, tasksMax int) string {
	lines := []string{
		"# Written by kbench for workload " + w.Name + "; kmirror and Apache MM2 both run this file.",
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + srcBootstrap,
		dst + ".bootstrap.servers = " + dstBootstrap,
		src + "->" + dst + ".enabled = true",
		src + "->" + dst + ".topics = " + w.TopicRegex(),
		dst + "->" + src + ".emit.heartbeats.enabled = false",
		"tasks.max = " + strconv.Itoa(tasksMax),
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"sync.topic.acls.enabled = false",
		dst + ".offset.flush.interval.ms = 1000",
	}
	return strings.Join(lines, "\n") + "\n"
}

const mm2Log4j = `# Written by kbench: INFO to stdout, as connect-log4j2.yaml does.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
`

// Replicate copies n records of w with replicator repl (Kmirror, KmirrorPT,
// Base, BasePT or MM2), under fresh cluster aliases so that nothing of an earlier run
// is reused, measures it, stops the replicator and deletes what the run
// created. Base and BasePT run the baseline binary exactly as Kmirror and
// KmirrorPT run the new one. If profile > 0 and repl is kmirror, it also takes a CPU profile
// of that many seconds from the first record on.
func (e *Env) Replicate(ctx context.Context, repl string, w Workload, n int64, round, profile int) Result {
	res := Result{Workload: w.Name, Replicator: repl, Round: round, Records: n, Bytes: n * int64(w.RecordBytes())}
	if err := e.admins(); err != nil {
		res.Error = err.Error()
		return res
	}
	e.seq++
	src, dst := fmt.Sprintf("s%d", e.seq), fmt.Sprintf("t%d", e.seq)
	base := filepath.Join(e.Dir, fmt.Sprintf("%s-r%d-%s", w.Name, round, repl))
	props := base + ".properties"
	body := MM2Properties(src, dst, e.Clusters.SourceFor(w), e.Clusters.Target, w, e.TasksMax)
	switch repl {
	case Kmirror, Base:
		body += RecordPathProperty + "\n"
	case KmirrorPT, BasePT:
		body += PassthroughProperty + "\n"
	case KmirrorEOSPT:
		body += PassthroughProperty + "\n" + dst + "." + EOSProperty + "\n"
	case MM2EOS:
		body += dst + "." + EOSProperty + "\n"
	}
	if repl != MM2 && repl != MM2EOS {
		for _, l := range e.KmirrorSet {
			body += l + "\n"
		}
	}
	if err := os.WriteFile(props, []byte(body), 0o644); err != nil {
		res.Error = err.Error()
		return res
	}
	var cmd *exec.Cmd
	var hooks runHooks
	var prof *profiler
	switch repl {
	case Kmirror, KmirrorPT, KmirrorEOSPT, Base, BasePT:
		bin := e.Kmirror
		if repl == Base || repl == BasePT {
			bin = e.Baseline
		}
		if bin == "" {
			res.Error = "no kmirror binary for " + repl + " (--baseline)"
			return res
		}
		args := []string{"run", "--clusters", dst}
		if profile > 0 {
			ports, err := kafkalocal.FreePorts(2)
			if err != nil {
				res.Error = err.Error()
				return res
			}
			addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
			restAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
			args = append(args, "--metrics-addr", addr, "--rest-addr", restAddr)
			prof = &profiler{addr: addr, restAddr: restAddr, seconds: profile, path: base + ".cpu.pprof"}
			hooks = runHooks{first: prof.start, last: prof.wait}
		}
		cmd = exec.Command(bin, append(args, props)...)
		cmd.Env = append(os.Environ(), "KMIRROR_REST_TOKEN="+profileToken)
	case MM2, MM2EOS:
		var err error
		if cmd, err = e.mm2Command(props, dst); err != nil {
			res.Error = err.Error()
			return res
		}
	default:
		res.Error = "unknown replicator " + repl
		return res
	}
	var remote []string
	for _, t := range w.TopicNames() {
		remote = append(remote, src+"."+t)
	}
	count := e.copied
	if repl == KmirrorEOSPT || repl == MM2EOS {
		count = e.copiedCommitted
	}
	e.measure(ctx, &res, cmd, base+".log", remote, hooks, count)
	if prof != nil {
		p, err := prof.summarize(ctx)
		if err != nil {
			fmt.Fprintf(e.Log, "kbench:   CPU profile: %v\n", err)
		} else {
			res.Profile = p
			fmt.Fprintf(e.Log, "kbench:   CPU profile: %s, %.1fs of samples\n", p.File, p.SampleSeconds)
		}
	}
	if err := e.cleanup(ctx); err != nil && res.Error == "" {
		res.Error = "cleanup: " + err.Error()
	}
	return res
}

// runHooks are called by measure: first when the first record is on the
// target, last when all are, before the process is stopped.
type runHooks struct{ first, last func() }

// measure starts cmd and polls the target's end offsets of topics every
// 100 ms until they add up to res.Records, sampling the process's CPU
// time at the first and the last record, then stops it (SIGTERM).
func (e *Env) measure(ctx context.Context, res *Result, cmd *exec.Cmd, logPath string, topics []string, hooks runHooks,
	count func(context.Context, []string) (int64, error)) {
	logf, err := os.Create(logPath)
	if err != nil {
		res.Error = err.Error()
		return
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.Error = err.Error()
		return
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			stop(cmd, exited, 30*time.Second)
		}
	}()

	var first time.Time
	var cpuFirst float64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(e.Timeout)
	var got int64
	for {
		select {
		case <-ctx.Done():
			res.Error = ctx.Err().Error()
			return
		case <-deadline:
			res.Error = fmt.Sprintf("timeout after %v: target holds %d of %d records; log %s", e.Timeout, got, res.Records, logPath)
			return
		case err := <-exited:
			stopped = true
			res.Error = fmt.Sprintf("process exited early (%v) with %d of %d records on the target; log %s", err, got, res.Records, logPath)
			return
		case <-tick.C:
		}
		cpu, cerr := cpuSeconds(pid)
		hwm, herr := peakRSS(pid)
		now := time.Now()
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := count(qctx, topics)
		cancel()
		if err != nil {
			continue
		}
		got = n
		if got > 0 && first.IsZero() {
			first, cpuFirst = now, cpu
			res.StartupSeconds = now.Sub(start).Seconds()
			if hooks.first != nil {
				hooks.first()
			}
		}
		if got >= res.Records {
			if cerr != nil || herr != nil {
				res.Error = fmt.Sprintf("reading /proc: %v", errors.Join(cerr, herr))
			}
			aggregate(res, first, now)
			res.CPUSeconds = cpu - cpuFirst
			res.CPUTotal = cpu
			res.PeakRSS = hwm
			break
		}
	}
	if hooks.last != nil {
		hooks.last()
	}
	stopped = true
	if err := stop(cmd, exited, 60*time.Second); err != nil && res.Error == "" {
		res.Error = err.Error()
	}
}

// copied adds the end offsets of those of topics that exist on the
// target.
func (e *Env) copied(ctx context.Context, topics []string) (int64, error) {
	return total(e.copiedPer(ctx, topics, e.target.ListEndOffsets))
}

// copiedCommitted adds the last stable offsets of those of topics that
// exist on the target.
func (e *Env) copiedCommitted(ctx context.Context, topics []string) (int64, error) {
	return total(e.copiedPer(ctx, topics, e.target.ListCommittedOffsets))
}

func total(per map[string]int64, err error) (int64, error) {
	var sum int64
	for _, n := range per {
		sum += n
	}
	return sum, err
}

// copiedPer adds the end offsets of each of topics that exists on the
// target. Asking for the offsets of a missing topic would make the client
// wait for it to appear, so existence is checked first.
func (e *Env) copiedPer(ctx context.Context, topics []string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[string]int64, error) {
	td, err := e.target.ListTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var have []string
	for _, t := range topics {
		if d, ok := td[t]; ok && d.Err == nil && len(d.Partitions) > 0 {
			have = append(have, t)
		}
	}
	per := map[string]int64{}
	if len(have) == 0 {
		return per, nil
	}
	offs, err := list(ctx, have...)
	if err != nil {
		return nil, err
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			per[o.Topic] += o.Offset
		}
	})
	return per, nil
}

// stop sends SIGTERM and waits, then SIGKILL. A JVM that exits with 143
// on SIGTERM stopped cleanly.
func stop(cmd *exec.Cmd, exited chan error, timeout time.Duration) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("pid %d did not stop within %v of SIGTERM; killed", cmd.Process.Pid, timeout)
	}
}

// cleanup deletes every topic a run created: on the target all but the
// broker's own, on the source all but the workloads' and the broker's
// (Apache MM2 keeps its offset syncs there). It waits until they are gone,
// so the next run starts on a target as empty as the first.
func (e *Env) cleanup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	keepSource := func(t string) bool { return strings.HasPrefix(t, "bench-") }
	return errors.Join(
		deleteAll(ctx, e.target, func(string) bool { return false }),
		deleteAll(ctx, e.source, keepSource))
}

func deleteAll(ctx context.Context, adm *kadm.Client, keep func(string) bool) error {
	for {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		var del []string
		for _, t := range td.Names() {
			if !strings.HasPrefix(t, "__") && !keep(t) {
				del = append(del, t)
			}
		}
		if len(del) == 0 {
			return nil
		}
		if _, err := adm.DeleteTopics(ctx, del...); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v not deleted: %w", del, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// mm2Command is Apache MM2 on props, for the target cluster dst.
func (e *Env) mm2Command(props, dst string) (*exec.Cmd, error) {
	l4j := filepath.Join(e.Dir, "mm2-log4j2.properties")
	if err := os.WriteFile(l4j, []byte(mm2Log4j), 0o644); err != nil {
		return nil, err
	}
	args := append(append([]string{}, MM2JVMOpts...), "-Dlog4j2.configurationFile=file:"+l4j,
		"-cp", filepath.Join(e.Libs, "*"), "org.apache.kafka.connect.mirror.MirrorMaker", props, "--clusters", dst)
	return exec.Command(javaPath(), args...), nil
}

func javaPath() string {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		return filepath.Join(h, "bin", "java")
	}
	return "java"
}

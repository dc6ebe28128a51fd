package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// Replicators of kbench rebalance: kmirror in group mode (its default
// path, passthrough, exactly-once too: a transaction per slot), MM2 as several
// dedicated-mode nodes.
const (
	KmirrorGroup    = "kmirror-group"
	KmirrorGroupEOS = "kmirror-group-eos"
)

// RebalanceConfig says what kbench rebalance runs.
type RebalanceConfig struct {
	Root        string
	Dir         string
	Replicators []string // KmirrorGroup, KmirrorGroupEOS, MM2, MM2EOS
	Topics      int
	Partitions  int32
	Rate        int           // records per second over all partitions
	Workers     int           // at the start; then one joins, one is killed, one stops
	Settle      time.Duration // after each event is over, before the next
	Timeout     time.Duration // longest wait for all partitions to copy again
	Session     time.Duration // consumer group session timeout of both
	MM2Delay    time.Duration // MM2's scheduled.rebalance.max.delay.ms
	TasksMax    int
	Log         io.Writer
}

// RebalanceEvent is one change of the workers and what it cost.
type RebalanceEvent struct {
	Name    string    `json:"name"` // start, steady, join, kill, stop
	At      time.Time `json:"at"`
	Workers int       `json:"workers"` // running after the event
	// LagBefore is the median latency of the two seconds before the
	// event (under 1 s unless the replicator could not keep up).
	LagBefore float64 `json:"lag_before_seconds"`
	// CopyingSec is from the event until every partition had a record
	// produced after the event on the target; -1 if not within Timeout.
	// For kill and stop, "after the event" is after the worker exited,
	// ExitSec after the signal.
	CopyingSec float64 `json:"copying_again_seconds"`
	ExitSec    float64 `json:"exit_seconds,omitempty"`
	// JoinedSec is, for join, from starting the worker to its log saying
	// it was given partitions; CopyingSec counts from then.
	JoinedSec float64 `json:"joined_seconds,omitempty"`
	// StallSec is the longest any partition went without a new record
	// arriving, from the event to the next.
	StallSec       float64 `json:"longest_stall_seconds"`
	StallPartition int     `json:"longest_stall_partition"`
	Slowest        int     `json:"slowest_partition"`
	// Duplicates are the records that arrived again between this event
	// and the next.
	Duplicates int64 `json:"duplicates"`
	// LatencyP50 and LatencyP99 are of the records that arrived between
	// this event and the next: from the source producer to the reader.
	LatencyP50 float64 `json:"latency_p50_seconds"`
	LatencyP99 float64 `json:"latency_p99_seconds"`
	Load1      float64 `json:"load1"`
}

// RebalanceRun is one replicator's run.
type RebalanceRun struct {
	Replicator string           `json:"replicator"`
	Events     []RebalanceEvent `json:"events"`
	Produced   int64            `json:"produced"` // acknowledged by the source
	Distinct   int64            `json:"distinct"` // different records on the target
	Missing    int64            `json:"missing"`
	ProduceErr int64            `json:"produce_errors"`
	Error      string           `json:"error,omitempty"`
}

// RebalanceResults is what rebalance.json holds.
type RebalanceResults struct {
	Meta RebalanceMeta  `json:"meta"`
	Runs []RebalanceRun `json:"runs"`
}

// RebalanceMeta describes a rebalance run.
type RebalanceMeta struct {
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	CPU        string    `json:"cpu"`
	Cores      int       `json:"cores"`
	Kafka      string    `json:"kafka"`
	KmirrorRev string    `json:"kmirror_rev"`
	Topics     int       `json:"topics"`
	Partitions int32     `json:"partitions_per_topic"`
	Rate       int       `json:"records_per_second"`
	Workers    int       `json:"workers"`
	SessionMS  int64     `json:"session_timeout_ms"`
	MM2DelayMS int64     `json:"mm2_scheduled_rebalance_max_delay_ms"`
	TasksMax   int       `json:"tasks_max"`
	SettleSec  float64   `json:"settle_seconds"`
	Properties string    `json:"properties"`
	Load1Start float64   `json:"load1_start"`
	// Note says how the results were put together, if not by one run.
	Note string `json:"note,omitempty"`
	// EOSPath is the data path of kmirror's exactly-once runs; empty
	// in runs from before it was passthrough (the record path).
	EOSPath string `json:"kmirror_eos_path,omitempty"`
}

func (c RebalanceConfig) workload(seq int) Workload {
	return Workload{Name: fmt.Sprintf("rebal%d", seq), Topics: c.Topics, Partitions: c.Partitions, ValueBytes: 100, Compression: "none"}
}

// RebalanceProperties is the mm2.properties of replicator repl's run seq
// (without MM2's per-node REST listener): the benchmark's file, group
// mode for kmirror, and the same group session timeout for both.
func RebalanceProperties(repl, src, dst, srcBootstrap, dstBootstrap string, seq int, c RebalanceConfig) string {
	b := MM2Properties(src, dst, srcBootstrap, dstBootstrap, c.workload(seq), c.TasksMax)
	ms := c.Session.Milliseconds()
	hb := max(ms/3, 100)
	eos := repl == KmirrorGroupEOS || repl == MM2EOS
	switch repl {
	case KmirrorGroup, KmirrorGroupEOS:
		b += "kmirror.workers = group\n" +
			fmt.Sprintf("%s.consumer.session.timeout.ms = %d\n%s.consumer.heartbeat.interval.ms = %d\n", src, ms, src, hb)
	case MM2, MM2EOS:
		b += "dedicated.mode.enable.internal.rest = true\n" +
			fmt.Sprintf("%s.session.timeout.ms = %d\n%s.heartbeat.interval.ms = %d\n", dst, ms, dst, hb) +
			fmt.Sprintf("%s.scheduled.rebalance.max.delay.ms = %d\n", dst, c.MM2Delay.Milliseconds())
	}
	if eos {
		b += dst + "." + EOSProperty + "\n" + src + ".consumer.isolation.level = read_committed\n"
	}
	return b
}

// RunRebalance starts a source and a target cluster and runs each
// replicator in turn: Workers workers under a steady producer, then one
// joins, the oldest is killed with SIGKILL, the next oldest is stopped
// with SIGTERM. It saves rebalance.json after every run.
func RunRebalance(ctx context.Context, c RebalanceConfig) (*RebalanceResults, error) {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if len(c.Replicators) == 0 {
		c.Replicators = []string{KmirrorGroup, MM2, KmirrorGroupEOS, MM2EOS}
	}
	libs, bin, err := prepareRun(ctx, c.Root, c.Dir, c.Log)
	if err != nil {
		return nil, err
	}
	m := meta(Config{Root: c.Root, TasksMax: c.TasksMax}, libs, nil)
	res := &RebalanceResults{Meta: RebalanceMeta{Started: time.Now(), CPU: m.CPU, Cores: m.Cores, Kafka: m.Kafka, KmirrorRev: m.KmirrorRev,
		Topics: c.Topics, Partitions: c.Partitions, Rate: c.Rate, Workers: c.Workers, SessionMS: c.Session.Milliseconds(),
		MM2DelayMS: c.MM2Delay.Milliseconds(), TasksMax: c.TasksMax, SettleSec: c.Settle.Seconds(), Load1Start: loadAvg(),
		Properties: RebalanceProperties(KmirrorGroup, "s1", "t1", "SOURCE", "TARGET", 1, c),
		EOSPath:    "passthrough, a transaction per slot,"}}
	save := func() error {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(c.Dir, "rebalance.json"), b, 0o644)
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
	for _, r := range c.Replicators {
		fmt.Fprintf(c.Log, "kbench: rebalance: %s...\n", r)
		rr := env.rebalance(ctx, r, c)
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

// rebalWorker is one running worker process.
type rebalWorker struct {
	cmd    *exec.Cmd
	exited chan error
	log    *os.File
}

func (w *rebalWorker) signal(sig syscall.Signal, wait time.Duration) error {
	_ = w.cmd.Process.Signal(sig)
	defer w.log.Close()
	select {
	case <-w.exited:
		return nil
	case <-time.After(wait):
		_ = w.cmd.Process.Kill()
		<-w.exited
		return fmt.Errorf("worker pid %d did not stop within %v of %v; killed", w.cmd.Process.Pid, wait, sig)
	}
}

// rebalance runs one replicator through the events.
func (e *Env) rebalance(ctx context.Context, repl string, c RebalanceConfig) (res RebalanceRun) {
	res.Replicator = repl
	switch repl {
	case KmirrorGroup, KmirrorGroupEOS, MM2, MM2EOS:
	default:
		res.Error = fmt.Sprintf("rebalance runs only %s, %s, %s and %s", KmirrorGroup, KmirrorGroupEOS, MM2, MM2EOS)
		return res
	}
	e.seq++
	seq := e.seq
	src, dst := fmt.Sprintf("s%d", seq), fmt.Sprintf("t%d", seq)
	w := c.workload(seq)
	parts := c.Topics * int(c.Partitions)
	base := filepath.Join(e.Dir, "rebalance-"+repl)
	defer func() {
		if err := e.cleanup(ctx); err != nil && res.Error == "" {
			res.Error = "cleanup: " + err.Error()
		}
		if err := deleteAll(ctx, e.source, func(string) bool { return false }); err != nil && res.Error == "" {
			res.Error = "cleanup: " + err.Error()
		}
	}()
	if err := loadScale(ctx, e.source, e.Clusters.Source, w.TopicNames(), c.Partitions, 0); err != nil {
		res.Error = "topics: " + err.Error()
		return res
	}
	body := RebalanceProperties(repl, src, dst, e.Clusters.Source, e.Clusters.Target, seq, c)
	mm2 := repl == MM2 || repl == MM2EOS
	var workers []*rebalWorker
	defer func() {
		for _, wk := range workers {
			if err := wk.signal(syscall.SIGTERM, 60*time.Second); err != nil && res.Error == "" {
				res.Error = err.Error()
			}
		}
	}()
	n := 0
	start := func() error {
		n++
		props := fmt.Sprintf("%s-w%d.properties", base, n)
		b := body
		var cmd *exec.Cmd
		if mm2 {
			ports, err := kafkalocal.FreePorts(1)
			if err != nil {
				return err
			}
			b += fmt.Sprintf("listeners = http://127.0.0.1:%d\nrest.advertised.host.name = 127.0.0.1\n", ports[0])
			if cmd, err = e.mm2Command(props, dst); err != nil {
				return err
			}
		} else {
			cmd = exec.Command(e.Kmirror, "run", "--clusters", dst, props)
		}
		if err := os.WriteFile(props, []byte(b), 0o644); err != nil {
			return err
		}
		logf, err := os.Create(fmt.Sprintf("%s-w%d.log", base, n))
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return err
		}
		wk := &rebalWorker{cmd: cmd, exited: make(chan error, 1), log: logf}
		go func() { wk.exited <- cmd.Wait() }()
		workers = append(workers, wk)
		return nil
	}

	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	prod, err := startRebalProducer(pctx, e.Clusters.Source, w.TopicNames(), c.Partitions, seq, c.Rate)
	if err != nil {
		res.Error = "producer: " + err.Error()
		return res
	}
	var remote []string
	for _, t := range w.TopicNames() {
		remote = append(remote, src+"."+t)
	}
	rd, err := startRebalReader(ctx, e.Clusters.Target, remote, c.Partitions, seq, repl == KmirrorGroupEOS || repl == MM2EOS)
	if err != nil {
		res.Error = "reader: " + err.Error()
		return res
	}
	defer rd.close()

	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	// event runs act, then waits until every partition copies again (or
	// Timeout), then Settle.
	// caughtUp waits (at most Timeout) until the records of the last two
	// seconds took under a second from the producer to the reader, so
	// that every event starts from a replicator that keeps up; it returns
	// their median then.
	caughtUp := func() (time.Duration, error) {
		deadline := time.Now().Add(c.Timeout)
		for {
			p50, _ := latencies(rd.snapshot(), time.Now().Add(-2*time.Second), time.Time{})
			if (p50 > 0 && p50 < time.Second) || time.Now().After(deadline) {
				return p50, nil
			}
			if err := sleep(500 * time.Millisecond); err != nil {
				return 0, err
			}
		}
	}
	// assigned waits until worker w's log says it was given partitions
	// and returns when that was seen.
	assigned := func(w *rebalWorker, deadline time.Time) (time.Time, error) {
		mark := "partition assigned to this worker"
		if mm2 {
			mark = "Starting task MirrorSourceConnector"
		}
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(w.log.Name()); err == nil && strings.Contains(string(b), mark) {
				return time.Now(), nil
			}
			if err := sleep(100 * time.Millisecond); err != nil {
				return time.Time{}, err
			}
		}
		return time.Time{}, fmt.Errorf("the new worker was given no partitions in time (no %q in %s)", mark, w.log.Name())
	}
	event := func(name string, act func() error) error {
		var lag time.Duration
		if name != "start" {
			var err error
			if lag, err = caughtUp(); err != nil {
				return err
			}
		}
		ev := RebalanceEvent{Name: name, At: time.Now(), CopyingSec: -1, LagBefore: lag.Seconds()}
		if err := act(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// A stopping worker copies until it exits: only records produced
		// after that show that the others took its partitions over. A
		// joining one changes nothing until it is given partitions.
		from := ev.At
		switch name {
		case "stop", "kill":
			from = time.Now()
			ev.ExitSec = from.Sub(ev.At).Seconds()
		case "join":
			t, err := assigned(workers[len(workers)-1], ev.At.Add(max(c.Timeout, 3*time.Minute)))
			if err != nil {
				return fmt.Errorf("join: %w", err)
			}
			from = t
			ev.JoinedSec = t.Sub(ev.At).Seconds()
		}
		ev.Workers = len(workers)
		wait := c.Timeout
		if name == "start" { // a JVM on a loaded machine starts slowly
			wait = max(wait, 3*time.Minute)
		}
		deadline := from.Add(wait)
		for time.Now().Before(deadline) {
			if err := sleep(250 * time.Millisecond); err != nil {
				return err
			}
			if d, _, ok := copyingAgain(rd.snapshot(), parts, from); ok {
				ev.CopyingSec = d.Seconds() + ev.ExitSec
				break
			}
		}
		_, ev.Slowest, _ = copyingAgain(rd.snapshot(), parts, from)
		ev.Load1 = loadAvg()
		res.Events = append(res.Events, ev)
		fmt.Fprintf(e.Log, "kbench:   %s: %d workers, all partitions copying again after %.1fs (slowest partition %d)\n",
			name, ev.Workers, ev.CopyingSec, ev.Slowest)
		for i, wk := range workers {
			select {
			case err := <-wk.exited:
				return fmt.Errorf("worker %d exited early (%v); log %s-w%d.log", i+1, err, base, i+1)
			default:
			}
		}
		return sleep(c.Settle)
	}
	stopOldest := func(sig syscall.Signal) func() error {
		return func() error {
			wk := workers[0]
			workers = workers[1:]
			return wk.signal(sig, 60*time.Second)
		}
	}
	err = event("start", func() error {
		for range c.Workers {
			if err := start(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = event("steady", func() error { return nil })
	}
	if err == nil {
		err = event("join", start)
	}
	if err == nil && len(workers) > 1 {
		err = event("kill", stopOldest(syscall.SIGKILL))
	}
	if err == nil && len(workers) > 1 {
		err = event("stop", stopOldest(syscall.SIGTERM))
	}
	stopProducing()
	acked, perr := prod.wait()
	res.ProduceErr = perr
	for _, s := range acked {
		res.Produced += int64(len(s))
	}
	// Drain: wait until the target holds every acknowledged record.
	deadline := time.Now().Add(c.Timeout)
	for err == nil && countMissing(acked, rd.snapshot()) > 0 && time.Now().Before(deadline) {
		err = sleep(time.Second)
	}
	arr := rd.snapshot()
	var bounds []time.Time
	for _, ev := range res.Events {
		bounds = append(bounds, ev.At)
	}
	dups, distinct := countDuplicates(arr, bounds)
	for i := range res.Events {
		res.Events[i].Duplicates = dups[i]
		var to time.Time
		if i+1 < len(bounds) {
			to = bounds[i+1]
		}
		p50, p99 := latencies(arr, bounds[i], to)
		end := to
		if end.IsZero() {
			end = res.Events[i].At.Add(time.Duration(res.Events[i].CopyingSec*float64(time.Second)) + c.Settle)
		}
		st, sp := longestStall(arr, parts, bounds[i], end)
		res.Events[i].StallSec, res.Events[i].StallPartition = st.Seconds(), sp
		res.Events[i].LatencyP50, res.Events[i].LatencyP99 = p50.Seconds(), p99.Seconds()
	}
	res.Distinct, res.Missing = distinct, countMissing(acked, arr)
	if err != nil {
		res.Error = err.Error()
	} else if rerr := rd.err(); rerr != nil {
		res.Error = "reader: " + rerr.Error()
	}
	return res
}

// rebalProducer writes keyed records at a fixed rate round robin over
// every partition and remembers which the source acknowledged.
type rebalProducer struct {
	cl    *kgo.Client
	done  chan struct{}
	mu    sync.Mutex
	acked []map[int64]bool
	errs  int64
}

func startRebalProducer(ctx context.Context, bootstrap string, topics []string, parts int32, run, rate int) (*rebalProducer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond), kgo.UnknownTopicRetries(50))
	if err != nil {
		return nil, err
	}
	n := len(topics) * int(parts)
	p := &rebalProducer{cl: cl, done: make(chan struct{}), acked: make([]map[int64]bool, n)}
	for i := range p.acked {
		p.acked[i] = map[int64]bool{}
	}
	value := make([]byte, 100)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	go func() {
		defer close(p.done)
		seqs := make([]int64, n)
		const tick = 20 * time.Millisecond
		t := time.NewTicker(tick)
		defer t.Stop()
		start := time.Now()
		var sent int64
		next := 0
		for {
			select {
			case <-ctx.Done():
				cl.Flush(context.Background())
				return
			case <-t.C:
			}
			// As many as the rate allows by now: a late tick catches up.
			due := int64(time.Since(start).Seconds() * float64(rate))
			for ; sent < due; sent++ {
				part := next
				next = (next + 1) % n
				s := seqs[part]
				seqs[part]++
				r := &kgo.Record{Topic: topics[part/int(parts)], Partition: int32(part % int(parts)),
					Key: rebalKey(run, part, s), Value: value, Timestamp: time.Now()}
				cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					p.mu.Lock()
					defer p.mu.Unlock()
					if err != nil {
						p.errs++
						return
					}
					p.acked[part][s] = true
				})
			}
		}
	}()
	return p, nil
}

// wait waits for the producer to stop (its context ends) and returns the
// acknowledged sequence numbers per partition and the failed records.
func (p *rebalProducer) wait() ([]map[int64]bool, int64) {
	<-p.done
	p.cl.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked, p.errs
}

// rebalReader reads the remote topics from their start and keeps every
// record of producer run run, in arrival order.
type rebalReader struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	arr    []Arrival
	fail   error
}

func startRebalReader(ctx context.Context, bootstrap string, topics []string, parts int32, run int, committed bool) (*rebalReader, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &rebalReader{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			var got []Arrival
			fs.EachError(func(t string, p int32, err error) {
				// A remote topic the replicator has not created yet is
				// unknown for a while.
				if !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
					r.mu.Lock()
					r.fail = fmt.Errorf("%s[%d]: %w", t, p, err)
					r.mu.Unlock()
				}
			})
			fs.EachRecord(func(rec *kgo.Record) {
				rn, part, seq, ok := parseRebalKey(rec.Key)
				if ok && rn == run {
					got = append(got, Arrival{Partition: part, Seq: seq, Created: rec.Timestamp, At: now})
				}
			})
			r.mu.Lock()
			r.arr = append(r.arr, got...)
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// snapshot is what arrived so far. Arrivals are only appended, so the
// prefix stays valid.
func (r *rebalReader) snapshot() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arr[:len(r.arr):len(r.arr)]
}

func (r *rebalReader) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fail
}

func (r *rebalReader) close() {
	r.cancel()
	<-r.done
	r.cl.Close()
}

// Summary is one line about a rebalance run for the progress log.
func (r RebalanceRun) Summary() string {
	var evs []string
	for _, ev := range r.Events {
		evs = append(evs, fmt.Sprintf("%s %.1fs/%d dup/stall %.1fs (latency p50 %.2fs p99 %.2fs)", ev.Name, ev.CopyingSec, ev.Duplicates, ev.StallSec, ev.LatencyP50, ev.LatencyP99))
	}
	s := fmt.Sprintf("%s: %s; %d produced, %d missing", r.Replicator, strings.Join(evs, ", "), r.Produced, r.Missing)
	if r.Error != "" {
		s += "; FAILED: " + r.Error
	}
	return s
}

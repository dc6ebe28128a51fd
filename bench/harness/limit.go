package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The limit is what the target accepts from plain producers: several
// ProducerPerformance processes (org.apache.kafka.tools.ProducerPerformance
// from kafka-tools) started together, each writing its share of the
// records to its own fresh topic on the target.

// limitProducerProps are the producer settings of every ProducerPerformance
// process, besides bootstrap.servers and compression.type (the workload's).
// They are those of a tuned producer, not Java's defaults (batch.size
// 16384, buffer.memory 32 MiB): full 256 KiB batches as the loader writes,
// twice the default buffer so that no partition waits for memory, and the
// most requests in flight per connection that idempotence allows. acks=all
// and idempotence are the Java producer's defaults, spelled out.
var limitProducerProps = []string{
	"acks=all",
	"enable.idempotence=true",
	"batch.size=262144",
	"linger.ms=20",
	"buffer.memory=67108864",
	"max.in.flight.requests.per.connection=5",
}

// LimitProducerProps is the --command-property list of a limit producer
// for a workload with compression codec.
func LimitProducerProps(codec string) []string {
	return append([]string{"compression.type=" + codec}, limitProducerProps...)
}

// DefaultLimitProcs is the number of parallel ProducerPerformance
// processes of w's limit when --limit-procs is not given: one per source
// topic, at least 2.
func DefaultLimitProcs(w Workload) int {
	return max(2, w.Topics)
}

// limitShare is what one ProducerPerformance process of a limit run
// writes.
type limitShare struct {
	Topic      string
	Partitions int32
	Records    int64
}

// limitShares splits n records and the workload's partitions (topics ×
// partitions in all) as evenly as possible over procs producers, each with
// its own topic named prefix-<i>. There are never more producers than
// records, and every topic has at least one partition.
func limitShares(prefix string, totalPartitions int32, n int64, procs int) []limitShare {
	procs = int(max(1, min(int64(procs), n)))
	p := int32(procs)
	var out []limitShare
	for i := range procs {
		s := limitShare{
			Topic:      fmt.Sprintf("%s-%d", prefix, i),
			Partitions: totalPartitions / p,
			Records:    n / int64(procs),
		}
		if int32(i) < totalPartitions%p {
			s.Partitions++
		}
		s.Partitions = max(1, s.Partitions)
		if int64(i) < n%int64(procs) {
			s.Records++
		}
		out = append(out, s)
	}
	return out
}

// producerPerfArgs are the java arguments of one ProducerPerformance
// process writing s with records of recordSize bytes. It reads its
// --command-config from gate, a FIFO, before it creates its producer: the
// harness holds every producer there until all JVMs are up (see
// openGates).
func producerPerfArgs(libs, bootstrap, gate string, s limitShare, recordSize int, codec string) []string {
	args := append([]string{}, MM2JVMOpts...)
	args = append(args, "-cp", filepath.Join(libs, "*"),
		"org.apache.kafka.tools.ProducerPerformance",
		"--bootstrap-server", bootstrap, "--topic", s.Topic,
		"--num-records", strconv.FormatInt(s.Records, 10), "--record-size", strconv.Itoa(recordSize),
		"--throughput", "-1", "--command-config", gate, "--command-property")
	return append(args, LimitProducerProps(codec)...)
}

// aggregate fills res's rates from its records and bytes over the window
// from the first record of any producer on the target to the last of all.
func aggregate(res *Result, first, last time.Time) {
	res.Seconds = last.Sub(first).Seconds()
	if res.Seconds > 0 {
		res.RecordsPerSec = float64(res.Records) / res.Seconds
		res.MBPerSec = float64(res.Bytes) / 1e6 / res.Seconds
	}
}

// MeasureLimit writes n records of w's size and codec straight to the
// target with procs ProducerPerformance processes started together, each
// writing its share of the records to its own fresh topic (the partitions
// of w's topics split between them; procs 1 is one topic with all of
// them), and measures them like a replicator run: all records and bytes
// over the time from the first of their records on the target to the last
// of all. Their CPU and memory are not measured.
func (e *Env) MeasureLimit(ctx context.Context, w Workload, n int64, round, procs int) Result {
	res := Result{Workload: w.Name, Replicator: Limit, Round: round, Records: n, Bytes: n * int64(w.RecordBytes())}
	if err := e.admins(); err != nil {
		res.Error = err.Error()
		return res
	}
	e.seq++
	shares := limitShares(fmt.Sprintf("limit-%s-%d", w.Name, e.seq), int32(w.Topics)*w.Partitions, n, procs)
	res.Procs = len(shares)
	var cmds []*exec.Cmd
	var logs, gates []string
	for i, s := range shares {
		cr, err := e.target.CreateTopic(ctx, s.Partitions, 1, nil, s.Topic)
		if err == nil {
			err = cr.Err
		}
		if err != nil {
			res.Error = err.Error()
			return res
		}
		name := fmt.Sprintf("%s-r%d-limit", w.Name, round)
		if len(shares) > 1 {
			name += fmt.Sprintf("-%d", i)
		}
		gate := filepath.Join(e.Dir, name+".gate")
		_ = os.Remove(gate)
		if err := syscall.Mkfifo(gate, 0o600); err != nil {
			res.Error = fmt.Sprintf("mkfifo %s: %v", gate, err)
			return res
		}
		defer os.Remove(gate)
		gates = append(gates, gate)
		cmds = append(cmds, exec.Command(javaPath(), producerPerfArgs(e.Libs, e.Clusters.Target, gate, s, w.RecordBytes(), w.Compression)...))
		logs = append(logs, filepath.Join(e.Dir, name+".log"))
	}
	win := e.measureProducers(ctx, &res, cmds, logs, gates, shares)
	for i, l := range logs {
		say := "no summary"
		if b, err := os.ReadFile(l); err == nil {
			if m := ppSummary.FindAllString(string(b), -1); len(m) > 0 {
				say = m[len(m)-1]
			}
		}
		on := ""
		if w, ok := win[shares[i].Topic]; ok {
			on = fmt.Sprintf("; its records on the target %.1f–%.1f s after the first of all", w.first.Seconds(), w.last.Seconds())
		}
		fmt.Fprintf(e.Log, "kbench:   ProducerPerformance %d/%d says: %s%s\n", i+1, len(logs), say, on)
	}
	if err := e.cleanup(ctx); err != nil && res.Error == "" {
		res.Error = "cleanup: " + err.Error()
	}
	return res
}

var ppSummary = regexp.MustCompile(`\d+ records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\)`)

// window is when a topic's first and last records were seen on the
// target, relative to the first record of all topics.
type window struct{ first, last time.Duration }

// measureProducers starts cmds, cmds[i] writing shares[i], lets them
// produce together once all wait at their gates, and polls the end
// offsets of the shares' topics on the target every 100 ms until they add
// up to res.Records, failing if a process fails or all end without
// writing everything. It fills res.StartupSeconds (from the opening of the
// gates to the first record) and the rates, and returns each topic's
// window on the target.
func (e *Env) measureProducers(ctx context.Context, res *Result, cmds []*exec.Cmd, logPaths, gates []string, shares []limitShare) map[string]window {
	exited := make(chan error, len(cmds))
	running := 0
	defer func() {
		if running == 0 {
			return
		}
		for _, c := range cmds {
			if c.Process != nil {
				_ = c.Process.Signal(syscall.SIGTERM) // an error for those that ended
			}
		}
		deadline := time.After(30 * time.Second)
		for ; running > 0; running-- {
			select {
			case <-exited:
			case <-deadline:
				for _, c := range cmds {
					if c.Process != nil {
						_ = c.Process.Kill()
					}
				}
				return
			}
		}
	}()
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i, cmd := range cmds {
		f, err := os.Create(logPaths[i])
		if err != nil {
			res.Error = err.Error()
			return nil
		}
		files = append(files, f)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	logs := strings.Join(logPaths, ", ")
	launched := time.Now()
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			res.Error = err.Error()
			return nil
		}
		running++
		go func() { exited <- cmd.Wait() }()
	}
	if err := openGates(ctx, gates, exited, 2*time.Minute); err != nil {
		res.Error = fmt.Sprintf("%v; logs %s", err, logs)
		return nil
	}
	start := time.Now()
	fmt.Fprintf(e.Log, "kbench:   %d ProducerPerformance JVMs up in %.1fs; released together\n", len(cmds), start.Sub(launched).Seconds())

	type seen struct {
		first, last time.Time
		done        bool
	}
	topics := make([]string, len(shares))
	for i, s := range shares {
		topics[i] = s.Topic
	}
	per := make([]seen, len(shares))
	var first time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(e.Timeout)
	var got int64
	var grace <-chan time.Time
	for got < res.Records {
		select {
		case <-ctx.Done():
			res.Error = ctx.Err().Error()
			return nil
		case <-deadline:
			res.Error = fmt.Sprintf("timeout after %v: target holds %d of %d records; logs %s", e.Timeout, got, res.Records, logs)
			return nil
		case <-grace:
			res.Error = fmt.Sprintf("producers ended with %d of %d records on the target; logs %s", got, res.Records, logs)
			return nil
		case err := <-exited:
			running--
			if err != nil {
				res.Error = fmt.Sprintf("a producer exited early (%v) with %d of %d records on the target; logs %s", err, got, res.Records, logs)
				return nil
			}
			if running == 0 {
				// Their records may still become visible; poll a little longer.
				grace = time.After(10 * time.Second)
			}
			continue
		case <-tick.C:
		}
		now := time.Now()
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		have, err := e.copiedPer(qctx, topics, e.target.ListEndOffsets)
		cancel()
		if err != nil {
			continue
		}
		got = 0
		for i, s := range shares {
			n := have[s.Topic]
			got += n
			if n > 0 && per[i].first.IsZero() {
				per[i].first = now
			}
			if n >= s.Records && !per[i].done {
				per[i].last, per[i].done = now, true
			}
		}
		if got > 0 && first.IsZero() {
			first = now
			res.StartupSeconds = now.Sub(start).Seconds()
		}
		if got >= res.Records {
			aggregate(res, first, now)
		}
	}
	// Let them end by themselves; the deferred SIGTERM is for stragglers.
	deadline = time.After(30 * time.Second)
wait:
	for running > 0 {
		select {
		case err := <-exited:
			running--
			if err != nil && res.Error == "" {
				res.Error = fmt.Sprintf("a producer failed after writing its records: %v; logs %s", err, logs)
			}
		case <-deadline:
			break wait
		}
	}
	out := map[string]window{}
	for i, s := range per {
		if s.done {
			out[shares[i].Topic] = window{s.first.Sub(first), s.last.Sub(first)}
		}
	}
	return out
}

// openGates waits until a reader has opened each of the FIFOs gates (a
// ProducerPerformance reading its --command-config), then writes a comment
// line into every one and closes them, so that all readers go on at about
// the same moment. It fails if a process ends (exited) or timeout passes
// first; an ended process's error is put back into exited.
func openGates(ctx context.Context, gates []string, exited chan error, timeout time.Duration) error {
	fds := make([]int, len(gates))
	for i := range fds {
		fds[i] = -1
	}
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				syscall.Close(fd)
			}
		}
	}()
	deadline := time.Now().Add(timeout)
	for open := 0; open < len(gates); {
		for i, g := range gates {
			if fds[i] >= 0 {
				continue
			}
			// Without a reader, a non-blocking open for writing fails
			// with ENXIO.
			fd, err := syscall.Open(g, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
			switch {
			case err == nil:
				fds[i] = fd
				open++
			case err != syscall.ENXIO:
				return fmt.Errorf("open %s: %w", g, err)
			}
		}
		if open == len(gates) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			exited <- err
			return fmt.Errorf("a producer ended (%v) before it read its config", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d producers did not read their config within %v", len(gates)-open, len(gates), timeout)
		}
	}
	line := []byte("# kbench: go\n")
	for i, fd := range fds {
		if _, err := syscall.Write(fd, line); err != nil {
			return fmt.Errorf("write %s: %w", gates[i], err)
		}
	}
	return nil
}

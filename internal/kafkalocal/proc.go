package kafkalocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStopTimeout is how long a node gets to exit after SIGTERM before
// it is sent SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// startProcess starts argv with stdout and stderr appended to logPath. The
// process gets its own session so it outlives the caller, unless
// dieWithParent is set: then the kernel kills it when the caller exits.
func startProcess(argv []string, dir, logPath string, dieWithParent bool) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		err = spawnFromLockedThread(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return 0, err
	}
	go cmd.Wait() // reap it if it exits while we are still around
	return cmd.Process.Pid, nil
}

// Pdeathsig fires when the forking OS thread exits, not the process. Go may
// retire threads, so children that must die with us are forked from one
// goroutine locked to a thread that never exits.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func spawnFromLockedThread(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error)
	spawner.reqs <- spawnReq{cmd, done}
	return <-done
}

// propsPath is the config file a node's command line names; it identifies
// the process, so a recycled pid is never mistaken for a node.
func propsPath(nodeDir string) string { return filepath.Join(nodeDir, "server.properties") }

// alive reports whether pid is a running (not zombie) process started with
// the node config in nodeDir.
func alive(pid int, nodeDir string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return false
	}
	return bytes.Contains(b, []byte(propsPath(nodeDir)))
}

// readPID returns the pid recorded in nodeDir/pid, or 0.
func readPID(nodeDir string) int {
	b, err := os.ReadFile(filepath.Join(nodeDir, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// livePIDs returns the running node processes recorded under dir, keyed by
// node folder.
func livePIDs(dir string) (map[string]int, error) {
	dirs, err := nodeDirs(dir)
	if err != nil {
		return nil, err
	}
	live := map[string]int{}
	for _, d := range dirs {
		if pid := readPID(d); alive(pid, d) {
			live[d] = pid
		}
	}
	return live, nil
}

// stopAll sends sig to every process, then SIGKILL to those still running
// after timeout, and waits until they are gone.
func stopAll(procs map[string]int, sig syscall.Signal, timeout time.Duration) error {
	for d, pid := range procs {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kafkalocal: kill %d (%s): %w", pid, d, err)
		}
	}
	deadline := time.Now().Add(timeout)
	killed := sig == syscall.SIGKILL
	for {
		left := 0
		for d, pid := range procs {
			if alive(pid, d) {
				left++
				if !killed && time.Now().After(deadline) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if left == 0 {
			break
		}
		if !killed && time.Now().After(deadline) {
			killed = true
			deadline = time.Now().Add(timeout)
		} else if killed && time.Now().After(deadline) {
			return fmt.Errorf("kafkalocal: %d node processes survived SIGKILL", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for d := range procs {
		os.Remove(filepath.Join(d, "pid"))
	}
	return nil
}

// Down stops every node process recorded anywhere under the run folder dir
// (SIGTERM, then SIGKILL after timeout) and returns how many it stopped.
// It only signals processes whose command line names a node config of dir,
// and is a no-op when nothing runs.
func Down(dir string, timeout time.Duration) (int, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	live, err := livePIDs(dir)
	if err != nil || len(live) == 0 {
		return 0, err
	}
	return len(live), stopAll(live, syscall.SIGTERM, timeout)
}

// Alive reports whether the node's process is running.
func (n *Node) Alive() bool { return alive(n.PID, n.Dir) }

// aliveAfter looks again for d: a node just started was once seen gone
// for a moment (its /proc entry read while the process was still being
// set up) although it ran on, and a start must not fail on that.
func aliveAfter(n *Node, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n.Alive() {
			return true
		}
	}
	return false
}

// StopNode stops one node: SIGTERM (a controlled shutdown) and SIGKILL
// after timeout, or SIGKILL right away when kill is set.
func (r *Run) StopNode(cluster string, id int32, kill bool, timeout time.Duration) error {
	n, err := r.node(cluster, id)
	if err != nil {
		return err
	}
	pid := n.PID
	if p := readPID(n.Dir); p != 0 {
		pid = p
	}
	if !alive(pid, n.Dir) {
		return nil
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return stopAll(map[string]int{n.Dir: pid}, sig, timeout)
}

// StartNode starts a stopped node again with its recorded command line and
// waits until the cluster lists it as a live broker.
func (r *Run) StartNode(ctx context.Context, cluster string, id int32, dieWithParent bool) error {
	return r.StartNodes(ctx, cluster, []int32{id}, dieWithParent)
}

// StartNodes starts stopped nodes of a cluster all at once (a controller
// quorum whose nodes all stopped needs a majority back before any of them
// serves) and waits until each is a live broker.
func (r *Run) StartNodes(ctx context.Context, cluster string, ids []int32, dieWithParent bool) error {
	var ns []*Node
	for _, id := range ids {
		n, err := r.node(cluster, id)
		if err != nil {
			return err
		}
		if p := readPID(n.Dir); alive(p, n.Dir) {
			return fmt.Errorf("kafkalocal: node %s/%d already runs as pid %d", cluster, id, p)
		}
		ns = append(ns, n)
	}
	for _, n := range ns {
		if err := launch(n, dieWithParent); err != nil {
			return err
		}
	}
	if err := r.Save(); err != nil {
		return err
	}
	return waitBrokers(ctx, r.Cluster(cluster), ns)
}

// launch starts the node process and records its pid.
func launch(n *Node, dieWithParent bool) error {
	pid, err := startProcess(n.Command, n.Dir, filepath.Join(n.Dir, "server.log"), dieWithParent)
	if err != nil {
		return fmt.Errorf("kafkalocal: start node %d: %w", n.ID, err)
	}
	n.PID = pid
	return os.WriteFile(filepath.Join(n.Dir, "pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func (r *Run) node(cluster string, id int32) (*Node, error) {
	c := r.Cluster(cluster)
	if c == nil {
		return nil, fmt.Errorf("kafkalocal: no cluster %q in %s", cluster, r.Dir)
	}
	n := c.Node(id)
	if n == nil {
		return nil, fmt.Errorf("kafkalocal: cluster %s has no node %d", c.Name, id)
	}
	return n, nil
}

// logTail returns the last lines of a node's server.log, for errors.
func logTail(nodeDir string, lines int) string {
	b, err := os.ReadFile(filepath.Join(nodeDir, "server.log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

package robustness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// buildKmirror builds cmd/kmirror, with the race detector if race, into
// dir and returns its path, or "" if the build failed (output in
// dir/build.log).
func buildKmirror(dir string, race bool) string {
	bin := filepath.Join(dir, "kmirror")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "../cmd/kmirror")...).CombinedOutput()
	if err != nil {
		os.WriteFile(filepath.Join(dir, "build.log"), append(out, err.Error()...), 0o644)
		return ""
	}
	return bin
}

// freeAddr returns a free 127.0.0.1 address.
func freeAddr(t testing.TB) string { return testkafka.FreeAddr(t) }

// worker is one kmirror process of the group, restarted in place after a
// kill: the same REST and metrics addresses, its log appended to one file.
type worker struct {
	id      int
	bin     string
	cfg     string
	logPath string
	rest    string
	metrics string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOP sent, no SIGCONT yet
	starts  int
	// expectExit is set before we kill or stop the process; an exit
	// without it is a crash, reported to onCrash with the exit status.
	expectExit bool
	onCrash    func(w *worker, status string)
}

func (w *worker) String() string { return fmt.Sprintf("worker %d", w.id) }

// start runs the process; it must not be running.
func (w *worker) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==== start %d at %s\n", w.starts+1, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(w.bin, "run", "--rest-addr", w.rest, "--metrics-addr", w.metrics, w.cfg)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		f.Close()
		w.mu.Lock()
		crashed := !w.expectExit
		w.mu.Unlock()
		if crashed && w.onCrash != nil {
			w.onCrash(w, cmd.ProcessState.String())
		}
		close(done)
	}()
	w.cmd, w.done, w.stopped, w.expectExit = cmd, done, false, false
	w.starts++
	return nil
}

// running reports whether the process is alive (stopped or not).
func (w *worker) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return false
	}
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the running process.
func (w *worker) signal(sig syscall.Signal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return fmt.Errorf("%v is not running", w)
	}
	switch sig {
	case syscall.SIGSTOP:
		w.stopped = true
	case syscall.SIGCONT:
		w.stopped = false
	}
	return w.cmd.Process.Signal(sig)
}

// kill sends SIGKILL (after SIGCONT if stopped) and waits for the exit.
func (w *worker) kill() {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.expectExit = true
	w.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// terminate sends SIGTERM and waits up to a minute for a clean exit.
func (w *worker) terminate() error {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.expectExit = true
	w.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Minute):
		w.kill()
		return fmt.Errorf("%v did not exit within a minute of SIGTERM", w)
	}
	if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		return fmt.Errorf("%v exited with %v after SIGTERM", w, cmd.ProcessState)
	}
	return nil
}

// pid is the process id, 0 when not running.
func (w *worker) pid() int {
	if !w.running() {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmd.Process.Pid
}

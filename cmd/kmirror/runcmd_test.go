package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a log sink safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWaitRun: the first SIGTERM/SIGINT stops the flows and waits for
// them; a second one exits at once with code 1 and says so; a stop that
// ends with an error exits 1.
func TestWaitRun(t *testing.T) {
	tests := []struct {
		name    string
		signals []os.Signal
		result  error // what Run returns once stopped
		block   bool  // Run never returns (a flow that does not stop)
		code    int
		log     string
	}{
		{"one signal, clean stop", []os.Signal{syscall.SIGTERM}, nil, false, 0, "kmirror stopped"},
		{"one signal, stop timed out", []os.Signal{syscall.SIGTERM}, errors.New("flows did not stop in time"), false, 1, "did not stop in time"},
		{"second signal while stopping", []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, nil, true, 1, "second signal: exiting at once"},
		{"SIGINT then SIGTERM", []os.Signal{os.Interrupt, syscall.SIGTERM}, nil, true, 1, "second signal: exiting at once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs lockedBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			sigs := make(chan os.Signal, len(tt.signals))
			done := make(chan error, 1)
			canceled := make(chan struct{})
			var once sync.Once
			cancel := func() {
				once.Do(func() {
					close(canceled)
					if !tt.block {
						done <- tt.result
					}
				})
			}
			code := make(chan int, 1)
			go func() { code <- waitRun(cancel, sigs, done, time.Minute, log) }()
			for _, s := range tt.signals {
				sigs <- s
			}
			select {
			case got := <-code:
				if got != tt.code {
					t.Errorf("exit code %d, want %d", got, tt.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("waitRun did not return")
			}
			select {
			case <-canceled:
			default:
				t.Error("the first signal did not stop the flows")
			}
			if !strings.Contains(logs.String(), tt.log) {
				t.Errorf("log lacks %q:\n%s", tt.log, logs.String())
			}
		})
	}
}

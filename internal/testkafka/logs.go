package testkafka

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/kmirror/kmirror/internal/lograte"
)

// Logs collects what a logger of the code under test writes, safe for
// concurrent writes (clients log from their own goroutines).
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Logger returns a text logger writing to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// Lines returns the lines logged so far that hold s.
func (l *Logs) Lines(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// CheckLimited fails t unless n occurrences of one cause, logged with msg,
// gave the lines internal/lograte lets through: the first, then one at
// each power of two, each after the first with its count.
func (l *Logs) CheckLimited(t testing.TB, msg string, n int64) {
	t.Helper()
	got := l.Lines(msg)
	if want := lograte.Lines(n); len(got) != want {
		t.Errorf("%d failures logged %d lines %q, want %d:\n%s", n, len(got), msg, want, strings.Join(got, "\n"))
	}
	for i := 1; i < len(got); i++ {
		if !strings.Contains(got[i], "count=") {
			t.Errorf("line %d lacks the count: %s", i+1, got[i])
		}
	}
}

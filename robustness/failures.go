package robustness

import (
	"fmt"
	"sync"
	"testing"
)

// failT is the run's testing.TB: it keeps every failure's message so
// the run can say them again as its last lines, after the workers' log
// tails (a CI report shows only the end of a test's output).
type failT struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *failT) note(msg string) {
	f.mu.Lock()
	f.msgs = append(f.msgs, msg)
	f.mu.Unlock()
}

func (f *failT) Error(args ...any) {
	f.TB.Helper()
	f.note(fmt.Sprint(args...))
	f.TB.Error(args...)
}

func (f *failT) Errorf(format string, args ...any) {
	f.TB.Helper()
	f.note(fmt.Sprintf(format, args...))
	f.TB.Errorf(format, args...)
}

func (f *failT) Fatal(args ...any) {
	f.TB.Helper()
	f.note(fmt.Sprint(args...))
	f.TB.Fatal(args...)
}

func (f *failT) Fatalf(format string, args ...any) {
	f.TB.Helper()
	f.note(fmt.Sprintf(format, args...))
	f.TB.Fatalf(format, args...)
}

// failures returns the messages noted so far.
func (f *failT) failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msgs...)
}

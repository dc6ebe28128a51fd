// Package lograte keeps a cause that repeats from flooding the log: a
// failing partition retried every second, or the same error on thousands
// of partitions at once, logs one line and then a few lines that count the
// rest, not one line per failure.
//
// A cause is a key the caller chooses (what failed and why, usually
// without the partition, so that one error on many partitions is one
// cause). Its first occurrence is logged; after that an occurrence is
// logged when the count of occurrences reaches a power of two, or when
// Every has passed since the cause's last line. Each line after the first
// carries the count so far ("count") and how many occurrences were not
// logged since the last line ("suppressed"). A cause not seen for Every
// starts again: its next occurrence is logged as a first one, with the
// occurrences its previous run did not log ("suppressed").
//
// This is how unreadable source batches were always logged (at the first
// failures and at every power of two); the Limiter does it for any cause.
package lograte

import (
	"context"
	"log/slog"
	"math/bits"
	"sync"
	"time"
)

// DefaultEvery is the longest gap between two lines of a cause that keeps
// occurring, and how long a cause must be quiet to start again.
const DefaultEvery = time.Minute

// sweepAfter is how many Every a cause with occurrences not yet logged is
// kept after its last one.
const sweepAfter = 10

// Limiter decides which occurrences of each cause are logged. Its zero
// value is ready to use (Every DefaultEvery, the wall clock); it is safe
// for concurrent use. It keeps one small entry per cause seen in the last
// Every or two, no more.
type Limiter struct {
	// Every overrides DefaultEvery when set before the first use.
	Every time.Duration
	// Now overrides time.Now when set before the first use (tests).
	Now func() time.Time

	mu     sync.Mutex
	causes map[string]*cause
	swept  time.Time
}

type cause struct {
	count    int64     // occurrences since the cause (re)started
	logged   int64     // count at its last line
	last     time.Time // its last occurrence
	lastLine time.Time // its last line
}

func (l *Limiter) every() time.Duration {
	if l.Every > 0 {
		return l.Every
	}
	return DefaultEvery
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Allow counts one occurrence of cause key and reports whether to log it,
// with the count of occurrences so far and how many were not logged since
// the cause's previous line.
func (l *Limiter) Allow(key string) (ok bool, count, suppressed int64) {
	now, every := l.now(), l.every()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.causes == nil {
		l.causes = make(map[string]*cause)
		l.swept = now
	}
	if now.Sub(l.swept) >= every {
		// A quiet cause goes; one with occurrences not logged yet
		// waits longer for a next occurrence to report them.
		for k, c := range l.causes {
			if q := now.Sub(c.last); q >= every && (c.count == c.logged || q >= sweepAfter*every) {
				delete(l.causes, k)
			}
		}
		l.swept = now
	}
	c := l.causes[key]
	var before int64 // not logged in the cause's previous run
	if c != nil && now.Sub(c.last) >= every {
		before = c.count - c.logged
		c = nil
	}
	if c == nil {
		c = &cause{}
		l.causes[key] = c
	}
	c.count++
	c.last = now
	if c.count > 1 && c.count&(c.count-1) != 0 && now.Sub(c.lastLine) < every {
		return false, c.count, 0
	}
	suppressed = before + c.count - c.logged - 1
	c.logged, c.lastLine = c.count, now
	return true, c.count, suppressed
}

// Len returns how many causes the Limiter holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.causes)
}

// Log logs msg with args at level on log if Allow(key) lets it, adding the
// count and the lines suppressed after the first occurrence.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	if log == nil || !log.Enabled(context.Background(), level) {
		return
	}
	ok, n, suppressed := l.Allow(key)
	if !ok {
		return
	}
	switch {
	case n > 1:
		args = append(args[:len(args):len(args)], "count", n, "suppressed", suppressed)
	case suppressed > 0: // the first of a new run, after occurrences not logged
		args = append(args[:len(args):len(args)], "suppressed", suppressed)
	}
	log.Log(context.Background(), level, msg, args...)
}

// Warn is Log at slog.LevelWarn.
func (l *Limiter) Warn(log *slog.Logger, key, msg string, args ...any) {
	l.Log(log, slog.LevelWarn, key, msg, args...)
}

// Lines returns how many lines n occurrences of one cause give when they
// all come within Every: the first, then one at each power of two.
func Lines(n int64) int {
	if n <= 0 {
		return 0
	}
	return bits.Len64(uint64(n))
}

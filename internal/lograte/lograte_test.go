package lograte

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestIdenticalFailuresInWindow: N identical failures within the window
// log one line, then lines only at powers of two, each with the count;
// a line after the window carries what was suppressed.
func TestIdenticalFailuresInWindow(t *testing.T) {
	for _, tc := range []struct {
		n     int
		lines []string // count/suppressed of each line; "" for the first
	}{
		{1, []string{""}},
		{3, []string{"", "count=2 suppressed=0"}},
		{1000, []string{"", "count=2 suppressed=0", "count=4 suppressed=1", "count=8 suppressed=3", "count=16 suppressed=7",
			"count=32 suppressed=15", "count=64 suppressed=31", "count=128 suppressed=63", "count=256 suppressed=127", "count=512 suppressed=255"}},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			c := &clock{t: time.Unix(1000, 0)}
			l := &Limiter{Now: c.now}
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))
			for i := range tc.n {
				l.Warn(log, "fetch error: TOPIC_AUTHORIZATION_FAILED", "fetch error", "partition", i)
				c.t = c.t.Add(time.Millisecond) // all within the minute
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != len(tc.lines) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tc.lines), buf.String())
			}
			for i, want := range tc.lines {
				if want == "" && strings.Contains(lines[i], "count=") || !strings.HasSuffix(lines[i], want) {
					t.Errorf("line %d: %s, want it to end in %q", i, lines[i], want)
				}
			}
			// The next occurrence, after a quiet window, reports what was
			// not logged.
			c.t = c.t.Add(DefaultEvery)
			buf.Reset()
			l.Warn(log, "fetch error: TOPIC_AUTHORIZATION_FAILED", "fetch error")
			last := 1
			for last*2 <= tc.n {
				last *= 2
			}
			got := strings.TrimSpace(buf.String())
			if want := fmt.Sprintf("suppressed=%d", tc.n-last); (tc.n > last) != strings.HasSuffix(got, want) || strings.Contains(got, "count=") {
				t.Errorf("after the window: %q, want it to end in %q if above 0 (and no count)", got, want)
			}
		})
	}
}

func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestCausesApartAndRestart: causes are counted apart; a cause quiet for
// a window starts again (logged as a first occurrence) and old causes
// are dropped.
func TestCausesApartAndRestart(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := &Limiter{Now: c.now, Every: 10 * time.Second}
	for _, step := range []struct {
		key        string
		at         time.Duration
		ok         bool
		count, sup int64
	}{
		{"a", 0, true, 1, 0},
		{"b", 0, true, 1, 0},
		{"a", 1 * time.Second, true, 2, 0},
		{"a", 2 * time.Second, false, 3, 0},
		{"a", 3 * time.Second, true, 4, 1}, // a power of two
		{"a", 5 * time.Second, false, 5, 0},
		{"a", 7 * time.Second, false, 6, 0},
		{"a", 9 * time.Second, false, 7, 0},
		{"a", 11 * time.Second, true, 8, 3}, // a power of two
		{"a", 13 * time.Second, false, 9, 0},
		{"a", 15 * time.Second, false, 10, 0},
		{"a", 17 * time.Second, false, 11, 0},
		{"a", 19 * time.Second, false, 12, 0},
		{"a", 21 * time.Second, true, 13, 4},  // 10 s since its last line
		{"a", 22 * time.Second, false, 14, 0}, // one not logged
		{"a", 32 * time.Second, true, 1, 1},   // quiet for the window: starts again
	} {
		c.t = time.Unix(1000, 0).Add(step.at)
		ok, n, sup := l.Allow(step.key)
		if ok != step.ok || n != step.count || sup != step.sup {
			t.Fatalf("%s at %v: ok %v count %d suppressed %d, want %v %d %d", step.key, step.at, ok, n, sup, step.ok, step.count, step.sup)
		}
	}
	if l.Len() != 1 {
		t.Fatalf("%d causes held, want only a (b was quiet for the window)", l.Len())
	}
}

package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// LogRecord is one warning or error as the dashboard shows it.
type LogRecord struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	Attrs   string    `json:"attrs,omitempty"` // key=value pairs, secrets redacted
}

// LogRing keeps the last records of level Warn and above.
type LogRing struct {
	mu   sync.Mutex
	size int
	recs []LogRecord // ring
	next int
	full bool

	// Explain, when set before use, rewrites each record kept (kmirror
	// mm1 names its flags where an error names an MM2 key).
	Explain func(string) string
}

// NewLogRing keeps the last size records.
func NewLogRing(size int) *LogRing {
	return &LogRing{size: size, recs: make([]LogRecord, size)}
}

func (r *LogRing) add(rec LogRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs[r.next] = rec
	r.next = (r.next + 1) % r.size
	r.full = r.full || r.next == 0
}

// Recent returns the records held, newest first.
func (r *LogRing) Recent() []LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = r.size
	}
	out := make([]LogRecord, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.recs[(r.next-i+r.size)%r.size])
	}
	return out
}

// Wrap returns a handler that passes every record to h and keeps those
// of level Warn and above in r.
func (r *LogRing) Wrap(h slog.Handler) slog.Handler { return &ringHandler{next: h, ring: r} }

type ringHandler struct {
	next   slog.Handler
	ring   *LogRing
	attrs  []slog.Attr // from WithAttrs, keys already qualified by groups
	prefix string      // open groups, "a.b."
}

func (h *ringHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *ringHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		var b strings.Builder
		for _, a := range h.attrs {
			writeAttr(&b, "", a)
		}
		rec.Attrs(func(a slog.Attr) bool { writeAttr(&b, h.prefix, a); return true })
		lr := LogRecord{Time: rec.Time, Level: rec.Level.String(), Message: Redact(rec.Message), Attrs: strings.TrimSpace(b.String())}
		if h.ring.Explain != nil {
			lr.Message, lr.Attrs = h.ring.Explain(lr.Message), h.ring.Explain(lr.Attrs)
		}
		h.ring.add(lr)
	}
	if !h.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.next.Handle(ctx, rec)
}

func (h *ringHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *ringHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.next = h.next.WithGroup(name)
	c.prefix = h.prefix + name + "."
	return &c
}

func writeAttr(b *strings.Builder, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			writeAttr(b, prefix+a.Key+".", g)
		}
		return
	}
	key := prefix + a.Key
	val := v.String()
	if secretKey.MatchString(key) {
		val = redacted
	}
	fmt.Fprintf(b, " %s=%s", key, Redact(val))
}

const redacted = "[redacted]"

// secretKey matches attribute keys whose values are secrets.
var secretKey = regexp.MustCompile(`(?i)(password|passwd|secret|token|credential|jaas|private[._-]?key)`)

// secretPair matches key=value and key: value pairs whose key names a
// secret, as they may appear in messages and errors.
var secretPair = regexp.MustCompile(`(?i)([\w.-]*(?:password|passwd|secret|token|credential)[\w.-]*)(\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;]+)`)

// Redact replaces the values of key=value pairs that name a secret.
func Redact(s string) string {
	return secretPair.ReplaceAllString(s, "${1}${2}"+redacted)
}

package config

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kmirror/kmirror/internal/policy"
)

// Properties is a parsed Java .properties file. It remembers, for every key,
// the file and line it came from, and keys keep the order of their first
// appearance. A later duplicate replaces the value (and line) of an earlier
// one, as java.util.Properties does.
type Properties struct {
	m     map[string]*entry
	order []string
}

type entry struct {
	value    string // value after config-provider resolution
	raw      string // value as written in the file
	file     string
	line     int
	resolved bool   // value came (at least partly) from a config provider
	srcKey   string // the key as the user wrote it, when an Origin says so
}

// NewProperties builds Properties from a map, with keys in sorted order and no
// file positions. It is meant for tests.
func NewProperties(m map[string]string) *Properties {
	p := &Properties{m: make(map[string]*entry, len(m))}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.set(k, m[k], "", 0)
	}
	return p
}

func (p *Properties) set(key, value, file string, line int) {
	if p.m == nil {
		p.m = map[string]*entry{}
	}
	if _, ok := p.m[key]; !ok {
		p.order = append(p.order, key)
	}
	p.m[key] = &entry{value: value, raw: value, file: file, line: line}
}

// Get returns the value of key.
func (p *Properties) Get(key string) (string, bool) {
	if p == nil {
		return "", false
	}
	e, ok := p.m[key]
	if !ok {
		return "", false
	}
	return e.value, true
}

// Line returns the line key was (last) defined on, or 0.
func (p *Properties) Line(key string) int {
	if e, ok := p.lookup(key); ok {
		return e.line
	}
	return 0
}

// File returns the name of the file key was defined in, or "".
func (p *Properties) File(key string) string {
	if e, ok := p.lookup(key); ok {
		return e.file
	}
	return ""
}

// SourceKey returns key as the user wrote it (see Origin), or key.
func (p *Properties) SourceKey(key string) string {
	if e, ok := p.lookup(key); ok && e.srcKey != "" {
		return e.srcKey
	}
	return key
}

// Keys returns all keys in file order.
func (p *Properties) Keys() []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p.order...)
}

// Len is the number of keys.
func (p *Properties) Len() int {
	if p == nil {
		return 0
	}
	return len(p.order)
}

// Resolved reports whether key's value was produced by a config provider.
func (p *Properties) Resolved(key string) bool {
	e, ok := p.lookup(key)
	return ok && e.resolved
}

// Display returns a value that is safe to print: sensitive keys are
// redacted, and values produced by config providers show the ${...}
// reference as written instead of the resolved secret.
func (p *Properties) Display(key string) string {
	e, ok := p.lookup(key)
	if !ok {
		return ""
	}
	if IsSensitive(key) {
		return redacted
	}
	if e.resolved {
		return e.raw
	}
	return e.value
}

// String lists the properties one per line, safe for logs (see Display).
func (p *Properties) String() string {
	var b strings.Builder
	for _, k := range p.Keys() {
		fmt.Fprintf(&b, "%s=%s\n", k, p.Display(k))
	}
	return b.String()
}

func (p *Properties) lookup(key string) (*entry, bool) {
	if p == nil {
		return nil, false
	}
	e, ok := p.m[key]
	return e, ok
}

// ParseProperties parses data with java.util.Properties.load rules:
//   - key and value are separated by '=', ':' or whitespace; whitespace
//     around the separator is dropped, trailing whitespace of the value kept;
//   - lines starting (after whitespace) with '#' or '!' are comments; there
//     are no end-of-line comments;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading whitespace is dropped;
//   - escapes \t \n \r \f \uXXXX are decoded, and a backslash before any
//     other character stands for that character (so "a\=b" is a key).
//
// Java reads the file as ISO-8859-1; kmirror reads UTF-8 and falls back to
// ISO-8859-1 for files that are not valid UTF-8. A leading BOM is ignored.
// name is used in positions (FILE:LINE).
func ParseProperties(name string, data []byte) (*Properties, error) {
	return parseProperties(name, data, originsOf(name))
}

// parseProperties is ParseProperties with the positions of origins (see
// SetOrigins) in place of those in name.
func parseProperties(name string, data []byte, origins map[string]Origin) (*Properties, error) {
	text := decode(data)
	p := &Properties{m: map[string]*entry{}}
	lr := lineReader{s: text, line: 1}
	for {
		logical, line, ok := lr.next()
		if !ok {
			break
		}
		key, value, err := splitKeyValue(logical)
		if err != nil {
			return nil, &Error{File: name, Line: line, Key: key, Msg: err.Error()}
		}
		p.set(key, value, name, line)
	}
	if origins != nil {
		for k, e := range p.m {
			if o, ok := origins[k]; ok {
				e.file, e.line, e.srcKey = o.File, o.Line, o.Key
			}
		}
	}
	return p, nil
}

// Origin is where a key of a generated file was written by the user: a file
// and line, or (Line 0) a command-line flag such as "--replication.factor";
// Key is the key as the user wrote it, if it differs.
type Origin struct {
	File string
	Line int
	Key  string
}

var (
	originsMu sync.Mutex
	origins   = map[string]map[string]Origin{}
)

// SetOrigins makes ParseProperties, and so Load and Parse, report each key
// of m read from the file called name at m's position instead of its line
// in name, in errors, warnings, File and Line. kmirror mm1 registers the MM2
// file it generates from MirrorMaker 1's client files and flags, so that
// every message names the user's file and line (or flag). A nil m removes
// the entry.
func SetOrigins(name string, m map[string]Origin) {
	originsMu.Lock()
	defer originsMu.Unlock()
	if m == nil {
		delete(origins, name)
		return
	}
	origins[name] = m
}

func originsOf(name string) map[string]Origin {
	originsMu.Lock()
	defer originsMu.Unlock()
	return origins[name]
}

func decode(data []byte) string {
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		data = data[3:]
	}
	if utf8.Valid(data) {
		return string(data)
	}
	r := make([]rune, len(data))
	for i, b := range data {
		r[i] = rune(b)
	}
	return string(r)
}

// lineReader yields logical lines (comments and blank lines removed,
// continuations joined, escapes still in place).
type lineReader struct {
	s    string
	pos  int
	line int // current natural line number
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// next returns the next logical line and the number of the natural line on
// which it starts.
func (r *lineReader) next() (string, int, bool) {
	var buf []byte
	start := 0
	skipWS := true     // skipping leading whitespace of a natural line
	appended := false  // inside a continuation
	backslash := false // preceding char was an unescaped backslash
	for r.pos < len(r.s) {
		c := r.s[r.pos]
		r.pos++
		if c == '\n' || c == '\r' {
			if c == '\r' && r.pos < len(r.s) && r.s[r.pos] == '\n' {
				r.pos++
			}
			r.line++
			if skipWS && !appended {
				continue // blank line
			}
			if len(buf) == 0 {
				skipWS, backslash = true, false
				continue
			}
			if backslash {
				buf = buf[:len(buf)-1]
				skipWS, appended, backslash = true, true, false
				continue
			}
			return string(buf), start, true
		}
		if skipWS {
			if isWS(c) {
				continue
			}
			skipWS, appended = false, false
		}
		if len(buf) == 0 {
			if c == '#' || c == '!' {
				r.skipToEOL()
				skipWS = true
				continue
			}
			start = r.line
		}
		buf = append(buf, c)
		if c == '\\' {
			backslash = !backslash
		} else {
			backslash = false
		}
	}
	if len(buf) == 0 {
		return "", 0, false
	}
	if backslash {
		buf = buf[:len(buf)-1]
	}
	return string(buf), start, true
}

func (r *lineReader) skipToEOL() {
	for r.pos < len(r.s) && r.s[r.pos] != '\n' && r.s[r.pos] != '\r' {
		r.pos++
	}
}

// splitKeyValue separates a logical line into its unescaped key and value.
func splitKeyValue(l string) (key, value string, err error) {
	keyLen, valueStart := 0, len(l)
	hasSep, backslash := false, false
	for keyLen < len(l) {
		c := l[keyLen]
		if (c == '=' || c == ':') && !backslash {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if isWS(c) && !backslash {
			valueStart = keyLen + 1
			break
		}
		if c == '\\' {
			backslash = !backslash
		} else {
			backslash = false
		}
		keyLen++
	}
	for valueStart < len(l) {
		c := l[valueStart]
		if !isWS(c) {
			if !hasSep && (c == '=' || c == ':') {
				hasSep = true
			} else {
				break
			}
		}
		valueStart++
	}
	key, err = unescape(l[:keyLen])
	if err != nil {
		return l[:keyLen], "", err
	}
	value, err = unescape(l[valueStart:])
	return key, value, err
}

// unescape decodes properties escapes. \uXXXX sequences are UTF-16 code
// units; surrogate pairs are combined.
func unescape(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	var hi rune // pending high surrogate
	flush := func() {
		if hi != 0 {
			b.WriteRune(utf8.RuneError)
			hi = 0
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			flush()
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a lone trailing backslash is dropped
		}
		c = s[i]
		if c == 'u' {
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uXXXX escape`)
			}
			var v rune
			for _, h := range []byte(s[i+1 : i+5]) {
				d, ok := hexVal(h)
				if !ok {
					return "", fmt.Errorf(`malformed \uXXXX escape`)
				}
				v = v<<4 | d
			}
			i += 4
			switch {
			case utf16.IsSurrogate(v) && v < 0xDC00:
				flush()
				hi = v
			case utf16.IsSurrogate(v) && hi != 0:
				b.WriteRune(utf16.DecodeRune(hi, v))
				hi = 0
			default:
				flush()
				b.WriteRune(v)
			}
			continue
		}
		flush()
		switch c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteByte(c) // may be the first byte of a multi-byte rune; the rest follows unchanged
		}
	}
	flush()
	return b.String(), nil
}

func hexVal(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// javaTrim is String.trim, as ConfigDef applies before parsing typed values.
var javaTrim = policy.JavaTrim

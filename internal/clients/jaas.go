package clients

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// JAAS is one parsed sasl.jaas.config login module entry:
//
//	<LoginModuleClass> <controlFlag> (<option>=<value>)* ;
//
// Option values are secret; String and GoString redact them.
type JAAS struct {
	LoginModule string
	ControlFlag string // lower case: required, requisite, sufficient or optional
	options     map[string]string
}

// Option returns the value of a login module option such as "username".
func (j JAAS) Option(name string) (string, bool) {
	v, ok := j.options[name]
	return v, ok
}

// OptionNames returns the option names, sorted.
func (j JAAS) OptionNames() []string {
	names := make([]string, 0, len(j.options))
	for k := range j.options {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// String shows the module, flag and option names, never the values.
func (j JAAS) String() string {
	var b strings.Builder
	b.WriteString(j.LoginModule)
	b.WriteByte(' ')
	b.WriteString(j.ControlFlag)
	for _, k := range j.OptionNames() {
		b.WriteString(" " + k + "=[redacted]")
	}
	b.WriteByte(';')
	return b.String()
}

// GoString redacts like String, so %#v is safe too.
func (j JAAS) GoString() string { return "clients.JAAS{" + j.String() + "}" }

// errJAAS is the root of all sasl.jaas.config parse errors. Messages name
// positions, never token text, since any token may be part of a secret.
var errJAAS = errors.New("invalid sasl.jaas.config")

func jaasErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errJAAS, fmt.Sprintf(format, args...))
}

// ParseJAAS parses a sasl.jaas.config value with the tokenizer rules Kafka's
// Java client uses: whitespace is any byte <= ' ', values may be bare words
// or strings in double or single quotes (with backslash escapes), and '/'
// starts a comment (//, /* */, or a lone '/' to end of line). Kafka clients
// accept exactly one login module entry, terminated by ';'.
func ParseJAAS(s string) (JAAS, error) {
	t := &jaasTokenizer{s: s}
	var entries []JAAS
	for {
		tok, err := t.next()
		if err != nil {
			return JAAS{}, err
		}
		if tok.kind == tokEOF {
			break
		}
		e, err := parseJAASEntry(t, tok, len(entries)+1)
		if err != nil {
			return JAAS{}, err
		}
		entries = append(entries, e)
	}
	switch len(entries) {
	case 0:
		return JAAS{}, jaasErr("no login module")
	case 1:
		return entries[0], nil
	default:
		return JAAS{}, jaasErr("%d login modules, want exactly 1", len(entries))
	}
}

func parseJAASEntry(t *jaasTokenizer, first jaasToken, n int) (JAAS, error) {
	if !first.isWord() {
		return JAAS{}, jaasErr("entry %d: missing login module class", n)
	}
	e := JAAS{LoginModule: first.text, options: map[string]string{}}
	flag, err := t.next()
	if err != nil {
		return JAAS{}, err
	}
	if !flag.isWord() {
		return JAAS{}, jaasErr("entry %d: missing control flag", n)
	}
	switch f := strings.ToLower(flag.text); f {
	case "required", "requisite", "sufficient", "optional":
		e.ControlFlag = f
	default:
		return JAAS{}, jaasErr("entry %d: invalid control flag (want required, requisite, sufficient or optional)", n)
	}
	for i := 1; ; i++ {
		key, err := t.next()
		if err != nil {
			return JAAS{}, err
		}
		switch {
		case key.kind == tokEOF:
			return JAAS{}, jaasErr("entry %d: not terminated by ';'", n)
		case key.kind == tokOrdinary && key.ch == ';':
			return e, nil
		case !key.isWord():
			return JAAS{}, jaasErr("entry %d: option %d: missing name", n, i)
		}
		eq, err := t.next()
		if err != nil {
			return JAAS{}, err
		}
		if eq.kind != tokOrdinary || eq.ch != '=' {
			return JAAS{}, jaasErr("entry %d: option %d: missing '='", n, i)
		}
		val, err := t.next()
		if err != nil {
			return JAAS{}, err
		}
		if !val.isWord() {
			return JAAS{}, jaasErr("entry %d: option %d: missing value", n, i)
		}
		e.options[key.text] = val.text // later duplicates win, as in Java's HashMap
	}
}

type tokKind int

const (
	tokEOF      tokKind = iota
	tokWord             // bare word
	tokQuoted           // quoted string
	tokOrdinary         // a single character such as ';' or '='
)

type jaasToken struct {
	kind tokKind
	text string // word or quoted string
	ch   rune   // for tokOrdinary
}

func (t jaasToken) isWord() bool { return t.kind == tokWord || t.kind == tokQuoted }

// jaasTokenizer mimics java.io.StreamTokenizer configured as Kafka's
// JaasConfig configures it. Positions are byte offsets into s.
type jaasTokenizer struct {
	s string
	i int
}

// Character classes: bytes up to ' ' are whitespace; ';' and '=' are
// ordinary; double and single quotes start strings; '/' starts a comment;
// code points 33..128 and from 160 up are word characters; 129..159 are
// ordinary.
func isJAASWordRune(r rune) bool {
	switch r {
	case ';', '=', '"', '\'', '/':
		return false
	}
	return (r > ' ' && r <= 128) || r >= 160
}

func (t *jaasTokenizer) peekRune() (rune, int) {
	if t.i >= len(t.s) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(t.s[t.i:])
}

func (t *jaasTokenizer) next() (jaasToken, error) {
	for {
		r, size := t.peekRune()
		switch {
		case r < 0:
			return jaasToken{kind: tokEOF}, nil
		case r <= ' ':
			t.i += size
		case r == '/':
			t.i += size
			if strings.HasPrefix(t.s[t.i:], "*") {
				end := strings.Index(t.s[t.i+1:], "*/")
				if end < 0 {
					t.i = len(t.s) // unterminated block comment runs to the end
				} else {
					t.i += 1 + end + 2
				}
			} else {
				// "//" or a lone '/': comment to end of line.
				if nl := strings.IndexAny(t.s[t.i:], "\r\n"); nl < 0 {
					t.i = len(t.s)
				} else {
					t.i += nl
				}
			}
		case r == '"' || r == '\'':
			t.i += size
			return jaasToken{kind: tokQuoted, text: t.quoted(r)}, nil
		case isJAASWordRune(r):
			start := t.i
			for {
				r, size := t.peekRune()
				if r < 0 || !isJAASWordRune(r) {
					break
				}
				t.i += size
			}
			return jaasToken{kind: tokWord, text: t.s[start:t.i]}, nil
		default:
			t.i += size
			return jaasToken{kind: tokOrdinary, ch: r}, nil
		}
	}
}

// quoted reads a quoted string after its opening quote q. Like
// StreamTokenizer, it ends at the closing quote, at a line break (left
// unread) or at the end of input, and handles C-style and octal escapes.
func (t *jaasTokenizer) quoted(q rune) string {
	var b strings.Builder
	for {
		r, size := t.peekRune()
		if r < 0 || r == '\n' || r == '\r' {
			return b.String()
		}
		t.i += size
		if r == q {
			return b.String()
		}
		if r != '\\' {
			b.WriteRune(r)
			continue
		}
		r, size = t.peekRune()
		if r < 0 {
			return b.String()
		}
		t.i += size
		switch r {
		case 'a':
			r = 7
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'v':
			r = '\v'
		default:
			if r >= '0' && r <= '7' {
				first := r
				r -= '0'
				for digits := 1; digits < 3; digits++ {
					d, _ := t.peekRune()
					if d < '0' || d > '7' || (digits == 2 && first > '3') {
						break
					}
					t.i++
					r = r*8 + (d - '0')
				}
			}
		}
		b.WriteRune(r)
	}
}

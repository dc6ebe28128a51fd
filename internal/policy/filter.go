package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// Default filter lists (MirrorSourceConfig, MirrorCheckpointConfig and
// DefaultConfigPropertyFilter).
var (
	DefaultTopics        = []string{".*"}
	DefaultTopicsExclude = []string{`.*[\-\.]internal`, `.*\.replica`, `__.*`}
	DefaultGroups        = []string{".*"}
	DefaultGroupsExclude = []string{`console-consumer-.*`, `connect-.*`, `__.*`}

	DefaultConfigPropertiesExclude = []string{
		`follower\.replication\.throttled\.replicas`,
		`leader\.replication\.throttled\.replicas`,
		`message\.timestamp\.difference\.max\.ms`,
		`message\.timestamp\.type`,
		`unclean\.leader\.election\.enable`,
		`min\.insync\.replicas`,
	}
)

// Filter decides whether a topic or group name is selected: it must fully
// match one include pattern and no exclude pattern.
type Filter struct {
	include, exclude *regexp.Regexp // nil matches nothing
}

// NewFilter compiles include and exclude regex lists. An empty include list
// selects nothing; an empty exclude list excludes nothing.
func NewFilter(include, exclude []string) (*Filter, error) {
	in, err := CompilePattern(include)
	if err != nil {
		return nil, err
	}
	ex, err := CompilePattern(exclude)
	if err != nil {
		return nil, err
	}
	return &Filter{include: in, exclude: ex}, nil
}

// Match reports whether name is included and not excluded.
func (f *Filter) Match(name string) bool {
	if f == nil || f.include == nil || !f.include.MatchString(name) {
		return false
	}
	return f.exclude == nil || !f.exclude.MatchString(name)
}

// ParseList parses a Kafka ConfigDef LIST value: the string is trimmed, an
// empty result is the empty list, otherwise it is split on commas with any
// surrounding whitespace. Empty items are kept ("a," gives ["a", ""]), as in
// Java.
func ParseList(s string) []string {
	s = JavaTrim(s)
	if s == "" {
		return []string{}
	}
	var out []string
	for {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			out = append(out, s)
			return out
		}
		out = append(out, strings.TrimRightFunc(s[:i], isRegexSpace))
		s = strings.TrimLeftFunc(s[i+1:], isRegexSpace)
	}
}

// JavaTrim is Java's String.trim: it strips every char <= U+0020. MM2
// trims list entries with it, and ConfigDef trims values before parsing.
func JavaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// isRegexSpace is Java's \s: [ \t\n\x0B\f\r].
func isRegexSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\x0b' || r == '\f' || r == '\r'
}

// CompilePattern joins a regex list the way MM2 does (p1|p2|...) and compiles
// it for full-string matching. It returns nil for an empty list. Patterns
// using Java regex features that Go's RE2 lacks, or that would mean
// something else in Go, are rejected with an error naming the pattern.
func CompilePattern(list []string) (*regexp.Regexp, error) {
	if len(list) == 0 {
		return nil, nil
	}
	parts := make([]string, len(list))
	for i, p := range list {
		g, err := translate(p)
		if err != nil {
			return nil, fmt.Errorf("regex \"%s\": %v", p, err)
		}
		if _, err := regexp.Compile(g); err != nil {
			return nil, fmt.Errorf("regex \"%s\": %v", p, unwrapSyntax(err))
		}
		parts[i] = g
	}
	re, err := regexp.Compile(`^(?:` + strings.Join(parts, "|") + `)$`)
	if err != nil {
		return nil, fmt.Errorf("regex list \"%s\": %v", strings.Join(list, ", "), unwrapSyntax(err))
	}
	return re, nil
}

// unwrapSyntax drops Go's "error parsing regexp: " prefix.
func unwrapSyntax(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// translate checks a Java regex for constructs RE2 cannot run or would read
// differently, and rewrites the few Java escapes that have a Go spelling
// (\uXXXX, \0octal, \e). Everything else is passed through for Go to parse.
func translate(p string) (string, error) {
	var b strings.Builder
	inClass := false // inside [...]
	classStart := 0  // index just after '[' or '[^'
	prevQuant := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		quant := false
		switch {
		case c == '\\':
			last, err := translateEscape(&b, p, i, inClass)
			if err != nil {
				return "", err
			}
			i = last
			prevQuant = false
			continue
		case inClass:
			closed, err := checkClassByte(p, i, classStart)
			if err != nil {
				return "", err
			}
			inClass = !closed
		case c == '[':
			inClass = true
			classStart = i + 1
			if classStart < len(p) && p[classStart] == '^' {
				classStart++
			}
			b.WriteByte(c)
			prevQuant = false
			continue
		case c == '(' && i+1 < len(p) && p[i+1] == '?':
			if err := checkGroupPrefix(p[i+2:]); err != nil {
				return "", err
			}
			b.WriteString("(?")
			i++
			prevQuant = false
			continue
		case c == '*' || c == '+' || c == '?':
			if prevQuant && c == '+' {
				return "", fmt.Errorf("possessive quantifier is not supported by Go regexp")
			}
			quant = !prevQuant // a lazy '?' after a quantifier ends it
		case c == '{':
			m := counted.FindString(p[i:])
			if m == "" {
				return "", fmt.Errorf("'{' at offset %d does not start a repetition {n}, {n,} or {n,m}; escape it as \\{ (note: commas split the list, so {n,m} cannot be used in MM2 lists)", i)
			}
			b.WriteString(m)
			i += len(m) - 1
			prevQuant = true
			continue
		}
		b.WriteByte(c)
		prevQuant = quant
	}
	if inClass {
		return "", fmt.Errorf("unclosed character class")
	}
	return b.String(), nil
}

// translateEscape writes the Go form of the escape starting at p[i] (a
// backslash) to b and returns the index of the escape's last byte.
func translateEscape(b *strings.Builder, p string, i int, inClass bool) (int, error) {
	if i+1 >= len(p) {
		return 0, fmt.Errorf("trailing backslash")
	}
	e := p[i+1]
	switch {
	case e >= '1' && e <= '9' && !inClass:
		return 0, fmt.Errorf("back-reference \\%c is not supported (Go regexp has no back-references)", e)
	case e == 'k':
		return 0, fmt.Errorf("named back-reference \\k is not supported")
	case e == 'Q':
		// Quote to \E (or the end) verbatim; Go understands \Q...\E.
		end := strings.Index(p[i+2:], `\E`)
		if end < 0 {
			b.WriteString(p[i:])
			return len(p) - 1, nil
		}
		b.WriteString(p[i : i+2+end+2])
		return i + 2 + end + 1, nil
	case e == 'u':
		if i+6 > len(p) || !isHex(p[i+2:i+6]) {
			return 0, fmt.Errorf(`malformed \u escape`)
		}
		b.WriteString(`\x{` + p[i+2:i+6] + `}`)
		return i + 5, nil
	case e == '0':
		return translateOctal(b, p, i)
	case e == 'e':
		b.WriteString(`\x{1b}`)
		return i + 1, nil
	case strings.IndexByte("hHvVRXGZNcC", e) >= 0:
		return 0, fmt.Errorf("the Java escape \\%c is not supported by Go regexp", e)
	}
	if (e == 'p' || e == 'P' || e == 'x') && i+2 < len(p) && p[i+2] == '{' {
		end := strings.IndexByte(p[i+2:], '}')
		if end < 0 {
			return 0, fmt.Errorf("unclosed \\%c{", e)
		}
		b.WriteString(p[i : i+2+end+1])
		return i + 2 + end, nil
	}
	b.WriteString(p[i : i+2])
	return i + 1, nil
}

// translateOctal writes the Go form of the Java octal escape starting at
// p[i] to b and returns the index of the escape's last byte.
func translateOctal(b *strings.Builder, p string, i int) (int, error) {
	// Java octal: \0n, \0nn, \0mnn (m <= 3).
	j := i + 2
	for j < len(p) && j < i+5 && p[j] >= '0' && p[j] <= '7' {
		if j == i+4 && p[i+2] > '3' {
			break
		}
		j++
	}
	if j == i+2 {
		return 0, fmt.Errorf(`illegal octal escape \0`)
	}
	v := 0
	for _, d := range p[i+2 : j] {
		v = v*8 + int(d-'0')
	}
	fmt.Fprintf(b, `\x{%x}`, v)
	return j - 1, nil
}

// checkClassByte checks p[i] inside a character class whose body starts at
// classStart, and reports whether it closes the class.
func checkClassByte(p string, i, classStart int) (closed bool, err error) {
	switch c := p[i]; {
	case c == ']' && i > classStart:
		return true, nil
	case c == '[':
		return false, fmt.Errorf("nested character class or POSIX bracket expression inside [...] is not supported")
	case c == '&' && i+1 < len(p) && p[i+1] == '&':
		return false, fmt.Errorf("character class intersection && is not supported")
	}
	return false, nil
}

// checkGroupPrefix rejects the "(?" group kinds and inline flags Go regexp
// lacks or reads differently; rest is what follows "(?".
func checkGroupPrefix(rest string) error {
	switch {
	case strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "!"):
		return fmt.Errorf("look-ahead (?%c...) is not supported by Go regexp", rest[0])
	case strings.HasPrefix(rest, "<="), strings.HasPrefix(rest, "<!"):
		return fmt.Errorf("look-behind (?%s...) is not supported by Go regexp", rest[:2])
	case strings.HasPrefix(rest, ">"):
		return fmt.Errorf("atomic group (?>...) is not supported by Go regexp")
	}
	// Inline flags: Java's U (Unicode classes) means ungreedy in Go.
	for j := 0; j < len(rest) && rest[j] != ')' && rest[j] != ':'; j++ {
		if rest[j] == 'U' {
			return fmt.Errorf("inline flag U has a different meaning in Go regexp")
		}
		if rest[j] == '<' || rest[j] == 'P' {
			break
		}
	}
	return nil
}

var counted = regexp.MustCompile(`^\{[0-9]+(,[0-9]*)?\}`)

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

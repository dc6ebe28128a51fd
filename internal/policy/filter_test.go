package policy

import (
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{".*", []string{".*"}},
		{" a , b,c ,  d ", []string{"a", "b", "c", "d"}},
		{".*[\\-\\_]internal.*, .*test.*", []string{".*[\\-\\_]internal.*", ".*test.*"}},
		{"a,", []string{"a", ""}},
		{",a", []string{"", "a"}},
		{"a,,b", []string{"a", "", "b"}},
		{"a\t,\nb", []string{"a", "b"}},
		{"a b, c", []string{"a b", "c"}},
		{"a{1,3}", []string{"a{1", "3}"}},
	}
	for _, tt := range tests {
		got := ParseList(tt.in)
		if got == nil || len(got) != len(tt.want) || strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
			t.Errorf("ParseList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name             string
		include, exclude []string
		yes, no          []string
	}{
		{"defaults", DefaultTopics, DefaultTopicsExclude,
			[]string{"orders", "a.internal.b", "internal", "x_internal", "heartbeats"},
			[]string{"x.internal", "x-internal", "t.replica", "__consumer_offsets"}},
		{"groups defaults", DefaultGroups, DefaultGroupsExclude,
			[]string{"order-service", "my-connect-x"},
			[]string{"console-consumer-123", "connect-mm2", "__x"}},
		{"full match", []string{"orders"}, nil, []string{"orders"}, []string{"orders2", "xorders"}},
		{"alternation is whole-match", []string{"a|b"}, nil, []string{"a", "b"}, []string{"ab"}},
		{"empty include matches nothing", nil, nil, nil, []string{"", "a"}},
		{"empty item matches empty", []string{"a", ""}, nil, []string{"a", ""}, []string{"b"}},
		{"seed exclude", []string{".*"}, ParseList(".*[\\-\\_]internal.*, .*test.*"),
			[]string{"orders"}, []string{"a-internal-b", "x_internal", "mytest1"}},
		{"seed exclude after properties unescape", []string{".*"}, ParseList(".*[-_]internal.*, .*test.*, __consumer_offsets"),
			[]string{"orders", "__consumer_offsets2"}, []string{"a-internal", "__consumer_offsets"}},
		{"flag scope spans list like Java", []string{"(?i)abc", "xyz"}, nil, []string{"ABC", "XYZ"}, nil},
		{"unicode escape", []string{`caf\u00e9`}, nil, []string{"café"}, []string{"cafe"}},
		{"octal escape", []string{`\0101`}, nil, []string{"A"}, nil},
		{"quote", []string{`\Qa.b\E`}, nil, []string{"a.b"}, []string{"axb"}},
		{"unicode class", []string{`\p{Lu}+`}, nil, []string{"ABC"}, []string{"abc"}},
		{"counted", []string{`a{2}`, `b{1,}`}, nil, []string{"aa", "bbb"}, []string{"a"}},
		{"named group", []string{`(?<x>ab)+`}, nil, []string{"abab"}, nil},
		{"lazy", []string{`a+?b`}, nil, []string{"aab"}, nil},
	}
	for _, tt := range tests {
		f, err := NewFilter(tt.include, tt.exclude)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		for _, n := range tt.yes {
			if !f.Match(n) {
				t.Errorf("%s: %q should match", tt.name, n)
			}
		}
		for _, n := range tt.no {
			if f.Match(n) {
				t.Errorf("%s: %q should not match", tt.name, n)
			}
		}
	}
}

func TestCompilePatternErrors(t *testing.T) {
	tests := []struct {
		pattern, want string
	}{
		{`foo(?=bar)`, "look-ahead"},
		{`foo(?!bar)`, "look-ahead"},
		{`(?<=a)b`, "look-behind"},
		{`(?<!a)b`, "look-behind"},
		{`(a)\1`, "back-reference"},
		{`(?<n>a)\k<n>`, "back-reference"},
		{`a*+`, "possessive"},
		{`a++`, "possessive"},
		{`a?+`, "possessive"},
		{`a{2}+`, "possessive"},
		{`(?>ab)`, "atomic group"},
		{`[a-z&&[^b]]`, "intersection"},
		{`[a[bc]]`, "nested character class"},
		{`[[:alpha:]]`, "POSIX"},
		{`a{1`, "repetition"},
		{`x{abc}`, "repetition"},
		{`\h`, `\h`},
		{`\v`, `\v`},
		{`\Z`, `\Z`},
		{`(?U)a+`, "flag U"},
		{`(?x) a`, "regex"},
		{`[abc`, "unclosed"},
		{`(abc`, "missing closing )"},
		{`\u12`, `\u`},
		{`abc\`, "trailing backslash"},
	}
	for _, tt := range tests {
		_, err := CompilePattern([]string{".*", tt.pattern})
		if err == nil {
			t.Errorf("%q: expected error", tt.pattern)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.pattern) {
			t.Errorf("%q: error %q should mention %q and the pattern", tt.pattern, err, tt.want)
		}
	}
	if re, err := CompilePattern(nil); re != nil || err != nil {
		t.Errorf("empty list: %v %v", re, err)
	}
	if _, err := NewFilter([]string{"ok"}, []string{"(?=x)"}); err == nil {
		t.Error("NewFilter should report exclude errors")
	}
}

func TestDefaultsCompile(t *testing.T) {
	for _, l := range [][]string{DefaultTopics, DefaultTopicsExclude, DefaultGroups, DefaultGroupsExclude, DefaultConfigPropertiesExclude} {
		if _, err := CompilePattern(l); err != nil {
			t.Error(err)
		}
	}
	f, _ := NewFilter(DefaultConfigPropertiesExclude, nil)
	if !f.Match("min.insync.replicas") || f.Match("min_insync_replicas") || f.Match("retention.ms") {
		t.Error("config properties exclude defaults")
	}
}

func FuzzCompilePattern(f *testing.F) {
	for _, s := range []string{".*", `a{1`, `\Qx`, `[a&&b]`, `\0777`, `\u00e9`, `(?<n>x)`, `\p{Lu`, `a*+`, `[]a]`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		re, err := CompilePattern([]string{p})
		if err == nil && re == nil {
			t.Fatal("nil regexp without error")
		}
		// Policies must not panic on arbitrary topic names either.
		for _, c := range []Config{{}, {Class: IdentityClass, SourceAlias: "A"}, {Separator: p, SeparatorSet: true, InternalSeparatorEnabled: true}} {
			pol, _ := New(c)
			pol.OriginalTopic(p)
			IsCycle(pol, p, "A")
			pol.IsInternalTopic(p)
			pol.IsHeartbeatsTopic(p)
		}
	})
}

// TestTranslate pins translate's exact output and error text for every
// escape, class, group and quantifier path.
func TestTranslate(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{`a.b`, `a.b`, ``},
		{`\Qa.b\E.c`, `\Qa.b\E.c`, ``},
		{`\Qa.b`, `\Qa.b`, ``},
		{`\u00e9x`, `\x{00e9}x`, ``},
		{`\0101`, `\x{41}`, ``},
		{`\0477`, `\x{27}7`, ``},
		{`\0400`, `\x{20}0`, ``},
		{`\07`, `\x{7}`, ``},
		{`\08`, ``, `illegal octal escape \0`},
		{`\0`, ``, `illegal octal escape \0`},
		{`\e`, `\x{1b}`, ``},
		{`\x{1F600}`, `\x{1F600}`, ``},
		{`\p{Lu}+`, `\p{Lu}+`, ``},
		{`\P{L`, ``, `unclosed \P{`},
		{`\xff`, `\xff`, ``},
		{`[]a]`, `[]a]`, ``},
		{`[^]a]`, `[^]a]`, ``},
		{`[\1]`, `[\1]`, ``},
		{`[a\]b]`, `[a\]b]`, ``},
		{`(?i)ab`, `(?i)ab`, ``},
		{`(?<x>ab)`, `(?<x>ab)`, ``},
		{`(?P<x>U)`, `(?P<x>U)`, ``},
		{`(?:U)`, `(?:U)`, ``},
		{`(?iU)a`, ``, `inline flag U has a different meaning in Go regexp`},
		{`a{2,3}b`, `a{2,3}b`, ``},
		{`a{2}?`, `a{2}?`, ``},
		{`a+?`, `a+?`, ``},
		{`a??+`, `a??+`, ``},
		{`a*+`, ``, `possessive quantifier is not supported by Go regexp`},
		{`\k<n>`, ``, `named back-reference \k is not supported`},
		{`\2`, ``, `back-reference \2 is not supported (Go regexp has no back-references)`},
		{`\h`, ``, `the Java escape \h is not supported by Go regexp`},
		{`(?=a)`, ``, `look-ahead (?=...) is not supported by Go regexp`},
		{`(?!a)`, ``, `look-ahead (?!...) is not supported by Go regexp`},
		{`(?<=a)`, ``, `look-behind (?<=...) is not supported by Go regexp`},
		{`(?<!a)`, ``, `look-behind (?<!...) is not supported by Go regexp`},
		{`(?>a)`, ``, `atomic group (?>...) is not supported by Go regexp`},
		{`[a&&b]`, ``, `character class intersection && is not supported`},
		{`[a[b]]`, ``, `nested character class or POSIX bracket expression inside [...] is not supported`},
		{`{`, ``, `'{' at offset 0 does not start a repetition {n}, {n,} or {n,m}; escape it as \{ (note: commas split the list, so {n,m} cannot be used in MM2 lists)`},
		{`x{a}`, ``, `'{' at offset 1 does not start a repetition {n}, {n,} or {n,m}; escape it as \{ (note: commas split the list, so {n,m} cannot be used in MM2 lists)`},
		{`[abc`, ``, `unclosed character class`},
		{`abc\`, ``, `trailing backslash`},
		{`\u12`, ``, `malformed \u escape`},
		{`\uzzzz`, ``, `malformed \u escape`},
		{`\d\w\s`, `\d\w\s`, ``},
		{`a&&b`, `a&&b`, ``},
	}
	for _, tt := range tests {
		got, err := translate(tt.in)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.want || gotErr != tt.err {
			t.Errorf("translate(%#q) = %#q, %q; want %#q, %q", tt.in, got, gotErr, tt.want, tt.err)
		}
	}
}

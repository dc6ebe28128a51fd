package config

import (
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
		line map[string]int
	}{
		{"equals", "a=b", map[string]string{"a": "b"}, map[string]int{"a": 1}},
		{"colon", "a:b", map[string]string{"a": "b"}, nil},
		{"whitespace sep", "a b", map[string]string{"a": "b"}, nil},
		{"spaces around sep", "  a  =  b", map[string]string{"a": "b"}, nil},
		{"ws then colon", "a \t: b", map[string]string{"a": "b"}, nil},
		{"second sep kept", "a = = b", map[string]string{"a": "= b"}, nil},
		{"colon then equals", "a:=b", map[string]string{"a": "=b"}, nil},
		{"trailing ws kept", "a = b  \t", map[string]string{"a": "b  \t"}, nil},
		{"empty value", "a =", map[string]string{"a": ""}, nil},
		{"key only", "a", map[string]string{"a": ""}, nil},
		{"empty key", "=b", map[string]string{"": "b"}, nil},
		{"hash comment", "# c\na=1", map[string]string{"a": "1"}, map[string]int{"a": 2}},
		{"bang comment", "  ! c\na=1", map[string]string{"a": "1"}, nil},
		{"no eol comment", "a=1 # not a comment", map[string]string{"a": "1 # not a comment"}, nil},
		{"comment not continued", "# c \\\na=1", map[string]string{"a": "1"}, nil},
		{"continuation", "a=b\\\n   c\nd=e", map[string]string{"a": "bc", "d": "e"}, map[string]int{"a": 1, "d": 3}},
		{"continuation hash not comment", "a=b,\\\n  #c", map[string]string{"a": "b,#c"}, nil},
		{"continuation key", "ke\\\n y=v", map[string]string{"key": "v"}, nil},
		{"even backslashes", "a=b\\\\\nc=d", map[string]string{"a": "b\\", "c": "d"}, nil},
		{"continuation to blank", "a=b\\\n\nc=d", map[string]string{"a": "b", "c": "d"}, map[string]int{"c": 3}},
		{"trailing backslash at eof", "a=b\\", map[string]string{"a": "b"}, nil},
		{"crlf", "a=1\r\nb=2\r\n", map[string]string{"a": "1", "b": "2"}, map[string]int{"b": 2}},
		{"cr", "a=1\rb=2", map[string]string{"a": "1", "b": "2"}, map[string]int{"b": 2}},
		{"crlf continuation", "a=1\\\r\n  2", map[string]string{"a": "12"}, nil},
		{"escapes", `a=\t\n\r\f\x\\`, map[string]string{"a": "\t\n\r\fx\\"}, nil},
		{"unicode", `a=caf\u00e9 \u4E2D`, map[string]string{"a": "café 中"}, nil},
		{"surrogates", `a=\uD83D\uDE00`, map[string]string{"a": "😀"}, nil},
		{"escaped separators in key", `a\=b\:c\ d=e`, map[string]string{"a=b:c d": "e"}, nil},
		{"escaped regex", `topics.exclude = .*[\-\_]internal.*`, map[string]string{"topics.exclude": ".*[-_]internal.*"}, nil},
		{"double escaped regex", `topics.exclude = .*[\\-\\_]internal.*`, map[string]string{"topics.exclude": `.*[\-\_]internal.*`}, nil},
		{"duplicate later wins", "a=1\nb=2\na=3", map[string]string{"a": "3", "b": "2"}, map[string]int{"a": 3}},
		{"utf8 value", "a=中文 ", map[string]string{"a": "中文 "}, nil},
		{"bom", "\ufeffa=1", map[string]string{"a": "1"}, nil},
		{"blank lines", "\n\n  \n\ta=1\n\n", map[string]string{"a": "1"}, map[string]int{"a": 4}},
		{"flow key", "us-west->us-east.enabled = true", map[string]string{"us-west->us-east.enabled": "true"}, nil},
		{"formfeed ws", "a\f=\fb", map[string]string{"a": "b"}, nil},
	}
	for _, tt := range tests {
		p, err := ParseProperties("f", []byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if p.Len() != len(tt.want) {
			t.Errorf("%s: got keys %q, want %v", tt.name, p.Keys(), tt.want)
		}
		for k, v := range tt.want {
			if got, ok := p.Get(k); !ok || got != v {
				t.Errorf("%s: %q = %q (%v), want %q", tt.name, k, got, ok, v)
			}
		}
		for k, l := range tt.line {
			if got := p.Line(k); got != l {
				t.Errorf("%s: line of %q = %d, want %d", tt.name, k, got, l)
			}
		}
	}
}

func TestParsePropertiesLatin1AndOrder(t *testing.T) {
	p, err := ParseProperties("f", []byte("b=caf\xe9\na=1\nb=2"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Get("b"); v != "2" {
		t.Errorf("b = %q", v)
	}
	if got := strings.Join(p.Keys(), ","); got != "b,a" {
		t.Errorf("order = %s", got)
	}
	p, _ = ParseProperties("f", []byte("x=caf\xe9"))
	if v, _ := p.Get("x"); v != "café" {
		t.Errorf("latin1 = %q", v)
	}
	if p.File("x") != "f" {
		t.Error("File")
	}
}

func TestParsePropertiesErrors(t *testing.T) {
	for _, in := range []string{"a=\\u12", "a=\\u12G4", "\n\nk\\uZZZZ=v"} {
		_, err := ParseProperties("mm2.properties", []byte(in))
		if err == nil || !strings.Contains(err.Error(), `malformed \uXXXX`) || !strings.HasPrefix(err.Error(), "mm2.properties:") {
			t.Errorf("%q: error %v", in, err)
		}
	}
	_, err := ParseProperties("mm2.properties", []byte("\n\nk\\uZZZZ=v"))
	if e, ok := err.(*Error); !ok || e.Line != 3 {
		t.Errorf("line: %#v", err)
	}
}

func TestNewPropertiesAndDisplay(t *testing.T) {
	p := NewProperties(map[string]string{"b": "2", "a": "1", "A.sasl.jaas.config": "secret-jaas"})
	if got := strings.Join(p.Keys(), ","); got != "A.sasl.jaas.config,a,b" {
		t.Errorf("keys = %s", got)
	}
	if p.Line("a") != 0 {
		t.Error("line")
	}
	if s := p.String(); strings.Contains(s, "secret-jaas") || !strings.Contains(s, "a=1") {
		t.Errorf("String leaks or misses: %s", s)
	}
}

func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{
		"a=b", "a\\\n b", "# c\n!d\n", "k\\uABCD=v\\u00e9", "a:b c", "\\", "a=\\u", "\r\n\r", "x=\\\r\n",
		"clusters = A, B\nA->B.enabled = true\n", "\ufeffa=1", "a\\ b\\=c=d\\\\",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProperties("fuzz", data)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		for _, k := range p.Keys() {
			if _, ok := p.Get(k); !ok {
				t.Fatalf("key %q listed but missing", k)
			}
			if p.Line(k) < 1 {
				t.Fatalf("key %q has line %d", k, p.Line(k))
			}
		}
		// Parse must not panic either; providers stay off so the fuzzer never
		// reads local files.
		if !strings.Contains(string(data), "providers") {
			_, _ = Parse("fuzz", data, func(string) (string, bool) { return "", false })
		}
	})
}

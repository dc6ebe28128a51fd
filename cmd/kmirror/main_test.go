package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"version"}, 0, "kmirror "},
		{[]string{"help"}, 0, "Usage:"},
		{nil, 2, "Usage:"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, &out, &errb)
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d", tt.args, code, tt.code)
		}
		if got := out.String() + errb.String(); !strings.Contains(got, tt.contains) {
			t.Errorf("%v: output %q lacks %q", tt.args, got, tt.contains)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"128MiB", 128 << 20, true},
		{"1GiB", 1 << 30, true},
		{"4096", 4096, true},
		{"512KiB", 512 << 10, true},
		{"10B", 10, true},
		{"-1MiB", 0, false},
		{"lots", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

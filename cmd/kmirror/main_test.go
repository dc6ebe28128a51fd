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

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectCmdRefuses: a bad worker file or a missing token stops
// "kmirror connect" before it reaches any cluster, naming the file, line
// and key.
func TestConnectCmdRefuses(t *testing.T) {
	base := "bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
	tests := []struct {
		name, file string
		args       []string
		code       int
		contains   string
	}{
		{"no file", "", nil, 2, "want exactly one Connect worker properties file"},
		{"unknown key", base + "bootstrap.server=x\n", nil, 1, "worker.properties:4: bootstrap.server: unknown key"},
		{"missing key", "bootstrap.servers=127.0.0.1:1\n", nil, 1, "group.id: missing"},
		{"no token", base, nil, 1, "the REST API needs a token"},
		{"bad auth", base + "kmirror.rest.auth=nobody\n", nil, 1, `worker.properties:4: kmirror.rest.auth: want "token" or "none"`},
	}
	t.Setenv(restTokenEnv, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"connect"}
			if tc.file != "" {
				p := filepath.Join(t.TempDir(), "worker.properties")
				if err := os.WriteFile(p, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, p)
			}
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.contains) {
				t.Errorf("output %q lacks %q", errb.String(), tc.contains)
			}
		})
	}
}

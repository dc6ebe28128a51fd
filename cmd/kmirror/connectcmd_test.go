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
		{"bad log format", base, []string{"--log-format", "xml", "--memory-limit", "x"}, 2, "kmirror connect: --log-format \"xml\": want text or json\n"},
		{"bad log level", base, []string{"--log-level", "loud"}, 2, "kmirror connect: --log-level \"loud\": want debug, info, warn or error\n"},
		{"bad memory limit", base, []string{"--memory-limit", "0"}, 2, "kmirror connect: --memory-limit \"0\": want a positive size such as 128MiB\n"},
		{"shutdown timeout 0", base, []string{"--shutdown-timeout", "0"}, 2, "kmirror connect: --shutdown-timeout must be positive\n"},
		{"unknown key", base + "bootstrap.server=x\n", nil, 1, "worker.properties:4: bootstrap.server: unknown key"},
		{"missing key", "bootstrap.servers=127.0.0.1:1\n", nil, 1, "group.id: missing"},
		{"no token", base, nil, 1, "the REST API needs a token"},
		{"bad auth", base + "kmirror.rest.auth=nobody\n", nil, 1, `worker.properties:4: kmirror.rest.auth: want "token" or "none"`},
	}
	t.Setenv(restTokenEnv, "")
	t.Setenv("GOMEMLIMIT", "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"connect"}, tc.args...)
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

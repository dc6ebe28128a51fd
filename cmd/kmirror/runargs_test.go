package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runFlagDefaults is what the flag package prints for run's flags.
const runFlagDefaults = `  -clusters string
    	comma-separated target cluster aliases: run only flows into these (all when empty)
  -log-format string
    	log format: text or json (default "text")
  -log-level string
    	log level: debug, info, warn or error (default "info")
  -memory-limit string
    	soft limit of the Go heap (GOMEMLIMIT syntax; the GOMEMLIMIT variable wins); 'off' for none (default "128MiB")
  -metrics-addr string
    	serve Prometheus metrics at http://ADDR/metrics (off when empty); Go profiles are on the REST API, behind its token
  -rest-addr string
    	serve the REST API at ADDR (overrides kmirror.rest.listener)
  -shutdown-timeout duration
    	on SIGTERM/SIGINT, how long to wait for the flows to stop (records in flight, progress saved) before exiting anyway; a second signal exits at once (default 30s)
`

// runExplained's command line and start-up errors word for word, and
// which check wins when several are wrong. CFG is an MM2 file of flow A->B,
// OFF one that enables nothing, NONE a file that is not there; the log
// lines before an error are matched by their start.
func TestRunArgsExact(t *testing.T) {
	t.Setenv(restTokenEnv, "")
	t.Setenv("GOMEMLIMIT", "")
	cfg, none := testConfig(t), filepath.Join(t.TempDir(), "none")
	off := filepath.Join(t.TempDir(), "off.properties")
	if err := os.WriteFile(off, []byte("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\nA.typo.key = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args string
		code int
		want string // stderr, without the logs' times
		then string // when set, want is how stderr starts and this a later line's start
	}{
		{"--nope CFG", 2, "flag provided but not defined: -nope\nUsage of kmirror run:\n" + runFlagDefaults, ""},
		{"--shutdown-timeout x", 2, "invalid value \"x\" for flag -shutdown-timeout: parse error\nUsage of kmirror run:\n" + runFlagDefaults, ""},
		{"--shutdown-timeout 0 --log-format xml", 2, "kmirror run: want exactly one MM2 properties file\n", ""},
		{"CFG NONE", 2, "kmirror run: want exactly one MM2 properties file\n", ""},
		{"--shutdown-timeout -1s --log-format xml CFG", 2, "kmirror run: --shutdown-timeout must be positive\n", ""},
		{"--log-format xml --log-level loud --memory-limit x CFG", 2, "kmirror run: --log-level \"loud\": want debug, info, warn or error\n", ""},
		{"--log-format xml --memory-limit x CFG", 2, "kmirror run: --log-format \"xml\": want text or json\n", ""},
		{"--log-format json --memory-limit 0 NONE", 2, "kmirror run: --memory-limit \"0\": want a positive size such as 128MiB\n", ""},
		{"--memory-limit off NONE", 1, "kmirror run: invalid configuration:\nopen NONE: no such file or directory\n", ""},
		{"--memory-limit off --clusters B,X CFG", 1, "kmirror run: invalid configuration:\nunknown cluster alias \"X\" (clusters = A, B)\n", ""},
		{"--memory-limit off --clusters ' B , X ' CFG", 1, "kmirror run: invalid configuration:\nunknown cluster alias \"X\" (clusters = A, B)\n", ""},
		{"--memory-limit off --log-format json OFF", 1, `{"level":"WARN","msg":"OFF: no flow is enabled: only heartbeats run, as in MirrorMaker 2 (set SOURCE->TARGET.enabled = true to replicate)"}
{"level":"WARN","msg":"OFF:4: unknown key \"A.typo.key\""}
`, `{"level":"ERROR","msg":"kmirror stopped with an error","err":"cluster `},
		{"--memory-limit off --metrics-addr 127.0.0.1:-1 --rest-addr 127.0.0.1:0 CFG", 1, "kmirror run: metrics: listen tcp: address -1: invalid port\n", ""},
		{"--memory-limit off --rest-addr 127.0.0.1:0 --log-level error CFG", 1, "kmirror run: the REST API needs a token: set kmirror.rest.token (through a config provider) or KMIRROR_REST_TOKEN, or kmirror.rest.auth = none for an open API\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			args := append([]string{"run"}, splitArgs(strings.NewReplacer("CFG", cfg, "NONE", none, "OFF", off).Replace(tt.args))...)
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			got := strings.NewReplacer(cfg, "CFG", none, "NONE", off, "OFF").Replace(errb.String())
			got = regexp.MustCompile(`"time":"[^"]*",`).ReplaceAllString(got, "")
			ok := got == tt.want
			if tt.then != "" {
				ok = strings.HasPrefix(got, tt.want) && strings.Contains(got, "\n"+tt.then)
			}
			if code != tt.code || !ok || out.Len() > 0 {
				t.Errorf("exit %d, want %d; stdout %q; stderr:\n%s\nwant:\n%s", code, tt.code, out.String(), got, tt.want)
			}
		})
	}
}

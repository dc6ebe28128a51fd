package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// cutoverFlagDefaults is what the flag package prints for cutover's flags.
const cutoverFlagDefaults = `  -allow-rewind
    	switch: also move offsets on the target backwards
  -config string
    	MM2 properties file (or give it as the first argument)
  -dry-run
    	switch: check and print what would be committed; commit nothing
  -flow string
    	direction SOURCE->TARGET (B->A for a failback); required when the file enables several flows
  -groups string
    	only groups matching this regular expression (within the flow's groups filter)
  -output string
    	text or json (default "text")
  -report-dir string
    	also write the report as cutover-SUB-TIME.json and .txt into this folder
  -source-down
    	unplanned failover: do not ask the source; the groups with checkpoints on the target, switched from their checkpoints
  -timeout duration
    	time limit for the whole command (default 2m0s)
  -topics string
    	only source topics matching this regular expression (within the flow's topics filter)
  -verify string
    	status: compare record by record the copied records among the last N offsets of each partition, all, or none (default "1000")
  -window duration
    	status: watch the source's log ends this long for producers still writing (0: don't) (default 5s)
`

// cutoverCmd's command line errors word for word, and which check wins
// when several are wrong; CFG is the MM2 file, NONE a file that is not there.
func TestCutoverArgsExact(t *testing.T) {
	cfg, none := testConfig(t), filepath.Join(t.TempDir(), "none")
	tests := []struct {
		args string
		code int
		want string // stderr
	}{
		{"", cutoverUsage, "kmirror cutover: want plan, status or switch\n" + cutoverUsageText},
		{"go CFG", cutoverUsage, "kmirror cutover: want plan, status or switch\n" + cutoverUsageText},
		{"plan -h", cutoverUsage, "Usage of kmirror cutover plan:\n" + cutoverFlagDefaults},
		{"switch --nope", cutoverUsage, "flag provided but not defined: -nope\nUsage of kmirror cutover switch:\n" + cutoverFlagDefaults},
		{"status --timeout x CFG", cutoverUsage, "invalid value \"x\" for flag -timeout: parse error\nUsage of kmirror cutover status:\n" + cutoverFlagDefaults},
		{"plan --output xml --flow A->B", cutoverUsage, "kmirror cutover: missing the MM2 properties file\n" + cutoverUsageText},
		{"plan CFG extra --output xml", cutoverUsage, "kmirror cutover: unexpected argument \"extra\"\n"},
		{"plan --config CFG extra", cutoverUsage, "kmirror cutover: unexpected argument \"extra\"\n"},
		{"plan CFG --output xml --verify some", cutoverUsage, "kmirror cutover: --output \"xml\": want text or json\n"},
		{"status CFG --verify 0 --dry-run", cutoverUsage, "kmirror cutover: --verify: \"0\": want a positive number of records, all or none\n"},
		{"status CFG --verify all --dry-run", cutoverUsage, "kmirror cutover: --dry-run and --allow-rewind are for switch\n"},
		{"plan CFG --allow-rewind --groups (", cutoverUsage, "kmirror cutover: --dry-run and --allow-rewind are for switch\n"},
		{"switch NONE --groups ( --topics )", cutoverUsage, "kmirror cutover: --groups: error parsing regexp: missing closing ): `^(?:()$`\n"},
		{"switch NONE --topics )", cutoverUsage, "kmirror cutover: --topics: error parsing regexp: unexpected ): `^(?:))$`\n"},
		{"plan NONE --flow A->C", cutoverError, "kmirror cutover: invalid configuration:\nopen NONE: no such file or directory\n"},
		{"plan CFG --flow A->C", cutoverUsage, "kmirror cutover: unknown cluster alias \"C\" (clusters = A, B)\n"},
		{"plan CFG --flow B", cutoverUsage, "kmirror cutover: --flow \"B\": want SOURCE->TARGET\n"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			args := append([]string{"cutover"}, strings.Fields(strings.NewReplacer("CFG", cfg, "NONE", none).Replace(tt.args))...)
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			got := strings.NewReplacer(cfg, "CFG", none, "NONE").Replace(errb.String())
			if code != tt.code || got != tt.want || out.Len() > 0 {
				t.Errorf("exit %d, want %d; stdout %q; stderr:\n%s\nwant:\n%s", code, tt.code, out.String(), got, tt.want)
			}
		})
	}
}

// Each subcommand's error when the clusters do not answer names it.
func TestCutoverUnreachable(t *testing.T) {
	cfg := testConfig(t)
	for _, sub := range []string{"status", "switch"} {
		var out, errb bytes.Buffer
		code := run([]string{"cutover", sub, cfg, "--timeout", "1s", "--window", "0"}, &out, &errb)
		if code != cutoverError || !strings.HasPrefix(errb.String(), "kmirror cutover "+sub+": ") || out.Len() > 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", sub, code, out.String(), errb.String())
		}
	}
}

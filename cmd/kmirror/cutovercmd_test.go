package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/cutover"
)

func TestCutoverArgs(t *testing.T) {
	cfg := testConfig(t)
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no subcommand", []string{"cutover"}, cutoverUsage, "want plan, status or switch"},
		{"bad subcommand", []string{"cutover", "go", cfg}, cutoverUsage, "want plan, status or switch"},
		{"no file", []string{"cutover", "plan", "--flow", "A->B"}, cutoverUsage, "missing the MM2 properties file"},
		{"two files", []string{"cutover", "plan", cfg, "--flow", "A->B", "extra"}, cutoverUsage, `unexpected argument "extra"`},
		{"bad output", []string{"cutover", "plan", cfg, "--output", "xml"}, cutoverUsage, "--output"},
		{"bad verify", []string{"cutover", "status", cfg, "--verify", "some"}, cutoverUsage, "--verify"},
		{"dry-run on status", []string{"cutover", "status", cfg, "--dry-run"}, cutoverUsage, "for switch"},
		{"bad groups", []string{"cutover", "switch", cfg, "--groups", "("}, cutoverUsage, "--groups"},
		{"unknown flow", []string{"cutover", "plan", cfg, "--flow", "A->C"}, cutoverUsage, `unknown cluster alias "C"`},
		{"no file on disk", []string{"cutover", "plan", filepath.Join(t.TempDir(), "none"), "--flow", "A->B"}, cutoverError, "invalid configuration"},
		// The file between flags is found; then the cluster does not answer.
		{"unreachable", []string{"cutover", "plan", "--flow", "A->B", cfg, "--timeout", "1s"}, cutoverError, "kmirror cutover plan:"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", c.name, code, c.code, errb.String())
		}
	}
}

func TestParseVerify(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{{"all", 0, false}, {"none", -1, false}, {"1000", 1000, false}, {"0", 0, true}, {"-5", 0, true}, {"x", 0, true}} {
		got, err := parseVerify(c.in)
		if (err != nil) != c.bad || !c.bad && got != c.want {
			t.Errorf("%q: %d, %v", c.in, got, err)
		}
	}
}

func TestSwitchCode(t *testing.T) {
	for _, c := range []struct {
		r    cutover.SwitchReport
		want int
	}{
		{cutover.SwitchReport{Committed: []string{"a"}}, cutoverOK},
		{cutover.SwitchReport{}, cutoverOK},
		{cutover.SwitchReport{Committed: []string{"a"}, Refused: []string{"b"}}, cutoverNotReady},
		{cutover.SwitchReport{Refused: []string{"b"}, Failed: []string{"c"}}, cutoverError},
	} {
		if got := switchCode(&c.r); got != c.want {
			t.Errorf("%+v: %d, want %d", c.r, got, c.want)
		}
	}
}

// TestCutoverFlow: an enabled flow by name or alone, and a failback
// direction the file does not enable.
func TestCutoverFlow(t *testing.T) {
	cfg, err := config.Load(flowsConfig(t, "A->B"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want, err string }{
		{"", "A->B", ""},
		{"A->B", "A->B", ""},
		{"B->A", "B->A", ""},
		{"B", "", "want SOURCE->TARGET"},
	} {
		f, err := cutoverFlow(cfg, c.name)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want error %q", c.name, err, c.err)
		case c.err == "" && (err != nil || f.Name() != c.want):
			t.Errorf("%q: %v %v, want %s", c.name, f, err, c.want)
		}
	}
}

func TestWriteCutoverReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports")
	r := &cutover.SwitchReport{Flow: "A->B", Time: time.Date(2026, 12, 2, 21, 30, 0, 0, time.UTC),
		Committed: []string{"billing"}, Refused: []string{"shipping"}, Failed: []string{},
		Groups: []cutover.GroupSwitch{{Group: "billing", Action: cutover.ActionCommitted}, {Group: "shipping", Action: cutover.ActionRefused, Reason: "1 active member(s) on A (Stable): stop its consumers there first"}}}
	paths, err := writeCutoverReport(dir, "switch", r.Time, r, func(w io.Writer) { printSwitch(w, r) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "cutover-switch-20261202T213000.000Z.json"), filepath.Join(dir, "cutover-switch-20261202T213000.000Z.txt")}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	var back cutover.SwitchReport
	data, _ := os.ReadFile(paths[0])
	if err := json.Unmarshal(data, &back); err != nil || back.Flow != "A->B" || back.Committed[0] != "billing" {
		t.Errorf("%s: %v\n%s", paths[0], err, data)
	}
	text, _ := os.ReadFile(paths[1])
	for _, s := range []string{"1 committed, 1 refused, 0 failed", "group billing: committed", "group shipping: refused: 1 active member(s) on A"} {
		if !bytes.Contains(text, []byte(s)) {
			t.Errorf("%s lacks %q:\n%s", paths[1], s, text)
		}
	}
}

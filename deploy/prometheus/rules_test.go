// Package prometheus holds kmirror's Prometheus alert rules; its test runs
// promtool (Debian's prometheus package, installed by scripts/setup) on them.
package prometheus

import (
	"os/exec"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: run scripts/setup (Debian package prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", "kmirror-alerts.yml"},
		{"test", "rules", "kmirror-alerts.test.yml"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			out, err := exec.Command(promtool, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			t.Logf("%s", out)
		})
	}
}

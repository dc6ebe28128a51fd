package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"m/internal/a","Test":"TestFast"}`,
		`{"Action":"output","Package":"m/internal/a","Test":"TestFast","Output":"fast log\n"}`,
		`{"Action":"pass","Package":"m/internal/a","Test":"TestFast","Elapsed":0.5}`,
		`{"Action":"output","Package":"github.com/kmirror/kmirror/e2e","Test":"TestSlow/sub","Output":"sub said\n"}`,
		`{"Action":"fail","Package":"github.com/kmirror/kmirror/e2e","Test":"TestSlow/sub","Elapsed":90}`,
		`{"Action":"output","Package":"github.com/kmirror/kmirror/e2e","Test":"TestSlow","Output":"--- FAIL: TestSlow\n"}`,
		`{"Action":"fail","Package":"github.com/kmirror/kmirror/e2e","Test":"TestSlow","Elapsed":95.25}`,
		`{"Action":"pass","Package":"m/internal/a","Test":"TestPar/sub","Elapsed":120}`,
		`{"Action":"pass","Package":"m/internal/a","Test":"TestPar","Elapsed":0}`,
		`{"Action":"pass","Package":"m/internal/a","Elapsed":1.5}`,
		`{"Action":"fail","Package":"github.com/kmirror/kmirror/e2e","Elapsed":100}`,
		`# m/internal/b`,
	}, "\n")
	var out bytes.Buffer
	failed, err := run(strings.NewReader(in), &out, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("a failed test was not reported as failed")
	}
	got := out.String()
	for _, want := range []string{
		"ok  \tm/internal/a\t1.500s\n",
		"--- FAIL: TestSlow\nsub said\n",
		"FAIL\tgithub.com/kmirror/kmirror/e2e\t100.000s\n",
		"# m/internal/b\n",
		"slowest 1 tests:\n      2m0s  pass internal/a TestPar\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "fast log") {
		t.Errorf("a passed test's output was printed:\n%s", got)
	}
	if strings.Contains(got, "TestFast") {
		t.Errorf("top 1 listed more than the slowest test:\n%s", got)
	}
}

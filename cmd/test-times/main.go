// Command test-times reads `go test -json` output on standard input, prints
// what plain `go test` would (one line per package, the output of failed
// tests in full) and then the slowest tests with their durations.
//
//	go test -json ./... 2>&1 | go run ./cmd/test-times [-top 20] [-quiet]
//
// It exits 1 when a test or package failed, so it can close a pipeline.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type key struct{ pkg, test string }

// result is what the run said of one test or package.
type result struct {
	key
	action  string
	elapsed float64
}

func main() {
	top := flag.Int("top", 20, "how many of the slowest tests to list")
	quiet := flag.Bool("quiet", false, "print only the table of the slowest tests")
	flag.Parse()
	failed, err := run(os.Stdin, os.Stdout, *top, *quiet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-times:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, top int, quiet bool) (failed bool, err error) {
	outputs := map[key][]string{} // output held until the test ends
	var tests, pkgs []result
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			if !quiet {
				fmt.Fprintf(out, "%s\n", line) // build errors and other plain text
			}
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output": // a compile error: say it at once
			if !quiet {
				fmt.Fprint(out, e.Output)
			}
		case "output":
			outputs[k] = append(outputs[k], e.Output)
		case "pass", "fail", "skip":
			r := result{k, e.Action, e.Elapsed}
			if e.Action == "fail" {
				failed = true
			}
			if e.Test == "" {
				pkgs = append(pkgs, r)
				if !quiet {
					printPackage(out, r, outputs[k])
				}
			} else {
				tests = append(tests, r)
				if e.Action == "fail" && !quiet && !strings.Contains(e.Test, "/") {
					printFailed(out, outputs, k)
				}
			}
			if e.Test != "" && e.Action != "fail" {
				delete(outputs, k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	printSlowest(out, tests, pkgs, top)
	return failed, nil
}

// printPackage prints the package's closing line as go test does; for a
// failed package with no failed test (a panic, a timeout, a build error)
// its whole output.
func printPackage(out io.Writer, r result, output []string) {
	switch r.action {
	case "pass":
		fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", r.pkg, r.elapsed)
	case "skip":
		fmt.Fprintf(out, "?   \t%s\t[no test files]\n", r.pkg)
	case "fail":
		for _, o := range output {
			if o != "FAIL\n" && !strings.HasPrefix(o, "FAIL\t") {
				fmt.Fprint(out, o)
			}
		}
		fmt.Fprintf(out, "FAIL\t%s\t%.3fs\n", r.pkg, r.elapsed)
	}
}

// printFailed prints a failed top-level test's output with its subtests'.
func printFailed(out io.Writer, outputs map[key][]string, k key) {
	var names []string
	for o := range outputs {
		if o.pkg == k.pkg && (o.test == k.test || strings.HasPrefix(o.test, k.test+"/")) {
			names = append(names, o.test)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		for _, o := range outputs[key{k.pkg, n}] {
			fmt.Fprint(out, o)
		}
		delete(outputs, key{k.pkg, n})
	}
}

func printSlowest(out io.Writer, tests, pkgs []result, top int) {
	if top <= 0 || len(tests)+len(pkgs) == 0 {
		return
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].elapsed > pkgs[j].elapsed })
	fmt.Fprintf(out, "\nslowest packages:\n")
	for i, p := range pkgs {
		if i == 5 {
			break
		}
		fmt.Fprintf(out, "%10s  %s\n", dur(p.elapsed), p.pkg)
	}
	// Top-level tests only: subtests are inside them. A test whose
	// subtests run in parallel returns before them, so it is given its
	// longest subtest's time when that is longer.
	longest := map[key]float64{}
	for _, t := range tests {
		if i := strings.Index(t.test, "/"); i > 0 {
			k := key{t.pkg, t.test[:i]}
			longest[k] = max(longest[k], t.elapsed)
		}
	}
	var top1 []result
	for _, t := range tests {
		if !strings.Contains(t.test, "/") {
			t.elapsed = max(t.elapsed, longest[t.key])
			top1 = append(top1, t)
		}
	}
	sort.Slice(top1, func(i, j int) bool { return top1[i].elapsed > top1[j].elapsed })
	fmt.Fprintf(out, "slowest %d tests:\n", min(top, len(top1)))
	for i, t := range top1 {
		if i == top {
			break
		}
		fmt.Fprintf(out, "%10s  %-4s %s %s\n", dur(t.elapsed), t.action, short(t.pkg), t.test)
	}
}

func dur(s float64) string {
	return (time.Duration(s*10) * time.Second / 10).String()
}

// short drops the module path from a package name.
func short(pkg string) string {
	if i := strings.Index(pkg, "/internal/"); i >= 0 {
		return pkg[i+1:]
	}
	if i := strings.LastIndex(pkg, "kmirror/"); i >= 0 {
		return pkg[i+len("kmirror/"):]
	}
	return pkg
}

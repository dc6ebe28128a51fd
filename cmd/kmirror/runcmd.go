package main

import (
	"fmt"
	"io"
)

// runCmd is "kmirror run"; the replication engine lands with issue 3.
func runCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "kmirror run: not available yet")
	return 2
}

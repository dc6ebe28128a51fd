package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/verify"
)

// verifyCmd is "kmirror verify": for every partition a flow reports as
// copied, compare the source records up to the saved progress with the
// remote partition, record by record.
func verifyCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "MM2 properties file (required)")
	flowName := fs.String("flow", "", "flow to check, SOURCE->TARGET (required when the file enables several)")
	topics := fs.String("topics", "", "only source topics matching this regular expression")
	output := fs.String("output", "text", "text or json")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *file == "" || fs.NArg() != 0 || (*output != "text" && *output != "json") {
		fmt.Fprintln(stderr, "kmirror verify: usage: kmirror verify --config FILE [--flow A->B] [--topics REGEX] [--output text|json]")
		return 2
	}
	var only *regexp.Regexp
	if *topics != "" {
		var err error
		if only, err = regexp.Compile("^(?:" + *topics + ")$"); err != nil {
			fmt.Fprintf(stderr, "kmirror verify: --topics: %v\n", err)
			return 2
		}
	}
	cfg, err := config.Load(*file, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror verify: invalid configuration:")
		fmt.Fprintln(stderr, err)
		return 1
	}
	fc, err := pickFlow(cfg, *flowName)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror verify:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	results, err := verify.Flow(ctx, fc, only, 0)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror verify:", err)
		return 1
	}
	bad := 0
	for _, r := range results {
		if !r.OK() {
			bad++
		}
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]any{"flow": fc.Name(), "ok": bad == 0, "partitions": results})
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tREMOTE\tSOURCE\tTARGET\tMATCHED\tDUPLICATES\tOLDER\tMISSING\tFOREIGN\tPROBLEM")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Topic, r.Partition, r.Remote, r.Source, r.Target, r.Matched, r.Duplicates, r.Older, r.Missing, r.Foreign, r.Problem)
		}
		tw.Flush()
		if bad == 0 {
			fmt.Fprintf(stdout, "%s: %d partitions verified: every copied source record is on the target\n", fc.Name(), len(results))
		} else {
			fmt.Fprintf(stdout, "%s: %d of %d partitions differ\n", fc.Name(), bad, len(results))
		}
	}
	if bad > 0 {
		return 1
	}
	return 0
}

// pickFlow returns the named enabled flow, or the only one.
func pickFlow(cfg *config.Config, name string) (*config.Flow, error) {
	var names []string
	for _, f := range cfg.Flows {
		if f.Name() == name {
			return f, nil
		}
		names = append(names, f.Name())
	}
	if name == "" && len(cfg.Flows) == 1 {
		return cfg.Flows[0], nil
	}
	if name == "" {
		return nil, fmt.Errorf("the file enables %d flows (%s): choose one with --flow", len(names), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("flow %q is not enabled in the file (enabled: %s)", name, strings.Join(names, ", "))
}

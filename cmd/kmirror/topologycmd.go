package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/topology"
)

// topologyCmd is "kmirror topology".
func topologyCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror topology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "MM2 properties file (required)")
	output := fs.String("output", "text", "output format: text or json")
	timeout := fs.Duration("timeout", 15*time.Second, "time limit per cluster")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *cfgPath == "":
		fmt.Fprintln(stderr, "kmirror topology: missing --config")
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kmirror topology: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *output != "text" && *output != "json":
		fmt.Fprintf(stderr, "kmirror topology: --output %q: want text or json\n", *output)
		return 2
	}
	cfg, err := config.Load(*cfgPath, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror topology: invalid configuration:\n%v\n", err)
		return 1
	}
	topo := scanTopology(cfg, *timeout)
	if err := printTopology(stdout, topo, *output); err != nil {
		fmt.Fprintln(stderr, "kmirror topology:", err)
		return 1
	}
	code := 0
	for _, s := range topo.Clusters {
		if s.Error != "" {
			fmt.Fprintf(stderr, "kmirror topology: cluster %s: %s\n", s.Alias, s.Error)
			code = 1
		}
	}
	return code
}

func printTopology(w io.Writer, t topology.Report, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(t)
	}
	fmt.Fprintln(w, "Replication seen in heartbeats topics:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  SOURCE\tTARGET\tCONFIGURED\tLAST HEARTBEAT\tEVIDENCE")
	for _, e := range t.Edges {
		age := "-"
		if e.AgeSeconds != nil {
			age = fmt.Sprintf("%.0fs ago", *e.AgeSeconds)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Source, e.Target, yesNo(e.Configured), age, strings.Join(e.Evidence, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Edges) == 0 {
		fmt.Fprintln(w, "  (none: no remote heartbeats topics; are heartbeats emitted and replicated?)")
	}
	if len(t.Paths) > 0 {
		fmt.Fprintln(w, "Paths over more than one hop:")
		for _, p := range t.Paths {
			fmt.Fprintln(w, "  "+p)
		}
	}
	fmt.Fprintln(w, "Configured flows:")
	if len(t.Flows) == 0 {
		fmt.Fprintln(w, "  (none enabled)")
	}
	for _, f := range t.Flows {
		state := "seen"
		if !f.Seen {
			state = "configured but not seen"
		}
		fmt.Fprintf(w, "  %s: %s\n", f.Name, state)
	}
	if len(t.SeenNotConfigured) > 0 {
		fmt.Fprintln(w, "Seen but not configured:")
		for _, s := range t.SeenNotConfigured {
			fmt.Fprintln(w, "  "+s)
		}
	}
	for _, c := range t.Clusters {
		if c.Error != "" {
			fmt.Fprintf(w, "Cluster %s: %s\n", c.Alias, c.Error)
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// scanTopology scans the heartbeats of every cluster of cfg, each within
// timeout, and sets them against its enabled flows.
func scanTopology(cfg *config.Config, timeout time.Duration) topology.Report {
	scans := topology.ScanAll(cfg, timeout)
	var flows []string
	for _, f := range cfg.Flows {
		flows = append(flows, f.Name())
	}
	return topology.Build(scans, flows, time.Now())
}

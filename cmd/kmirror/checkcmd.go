package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/flow"
	"github.com/kmirror/kmirror/internal/preflight"
	"github.com/kmirror/kmirror/internal/runner"
)

// checkCmd is "kmirror check": validate a file and say what each flow will
// do; with --connect also reach the clusters.
func checkCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connect := fs.Bool("connect", false, "also reach every cluster: broker versions, permissions, topics that would be created")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on --connect")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "kmirror check: want exactly one MM2 properties file")
		return 2
	}
	cfg, err := config.Load(fs.Arg(0), os.LookupEnv)
	if cfg != nil {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(stdout, "warning:", w)
		}
	}
	if err != nil {
		fmt.Fprintln(stdout, "invalid configuration:")
		fmt.Fprintln(stdout, err)
		return 1
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	hb := runner.HeartbeatPairs(cfg, nil, quiet)
	origin := flow.OriginHeaderFlows(cfg, cfg.Flows)
	for _, f := range cfg.Flows {
		describe(stdout, f, origin[f.Name()])
	}
	for _, f := range hb {
		fmt.Fprintf(stdout, "heartbeats only %s: every %v into %s's %s topic (the flow is not enabled)\n",
			f.Name(), f.EmitHeartbeatsInterval, f.Target, f.Policy.HeartbeatsTopic())
	}
	if len(cfg.Flows) == 0 && len(hb) == 0 {
		fmt.Fprintln(stdout, "nothing to run: no flow is enabled and heartbeats are off")
		return 1
	}
	if !*connect {
		fmt.Fprintln(stdout, "configuration OK (not connected; --connect also checks the clusters)")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c := &preflight.Checker{Out: stdout}
	defer c.Close()
	for _, f := range cfg.Flows {
		c.Flow(ctx, f)
	}
	for _, f := range hb {
		c.Heartbeats(ctx, f)
	}
	if c.Problems > 0 {
		fmt.Fprintf(stdout, "%d problem(s) found\n", c.Problems)
		return 1
	}
	fmt.Fprintln(stdout, "configuration and clusters OK")
	return 0
}

// describe prints what flow f will do: its plan, then its other settings.
func describe(w io.Writer, f *config.Flow, addOrigin bool) {
	p := func(format string, args ...any) { fmt.Fprintf(w, "  "+format+"\n", args...) }
	fmt.Fprintf(w, "flow %s:\n", f.Name())
	for _, l := range flow.PlanOf(f, addOrigin).Lines() {
		p("%s", l)
	}
	p("topics: %s, excluding %s", strings.Join(f.Topics, ", "), strings.Join(f.TopicsExclude, ", "))
	p("remote names: %s (a source topic t becomes %s)", f.PolicyClass, f.Policy.FormatRemoteTopic(f.Source, "t"))
	switch {
	case !f.EmitCheckpointsEnabled:
		p("checkpoints: off")
	default:
		p("checkpoints: every %v for groups %s, excluding %s, into %s", f.EmitCheckpointsInterval,
			strings.Join(f.Groups, ", "), strings.Join(f.GroupsExclude, ", "), f.Policy.CheckpointsTopic(f.Source))
	}
	if f.SyncGroupOffsetsEnabled {
		p("group offset sync: every %v", f.SyncGroupOffsetsInterval)
	} else {
		p("group offset sync: off")
	}
	onOff := func(on bool, d time.Duration) string {
		if !on {
			return "off"
		}
		return "every " + d.String()
	}
	p("progress: saved %s into %s on %s", onOff(true, f.OffsetFlushInterval), f.OffsetStorageTopic, f.Target)
	p("offset syncs: %s, topic %s on the %s", map[bool]string{true: "on", false: "off"}[f.EmitOffsetSyncsEnabled], f.OffsetSyncsTopic(), f.OffsetSyncsTopicLocation)
	p("intervals: heartbeats %s, refresh topics %s, topic configs %s, topic ACLs %s, refresh groups %s",
		onOff(f.EmitHeartbeatsEnabled, f.EmitHeartbeatsInterval), onOff(f.RefreshTopicsEnabled, f.RefreshTopicsInterval),
		onOff(f.SyncTopicConfigsEnabled, f.SyncTopicConfigsInterval), onOff(f.SyncTopicACLsEnabled, f.SyncTopicACLsInterval),
		onOff(f.RefreshGroupsEnabled, f.RefreshGroupsInterval))
}

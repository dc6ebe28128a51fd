package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/offsetplan"
)

// offsetsCmd is "kmirror offsets": the offsets a consumer group can resume
// from on the target, and with --apply, commits them there.
func offsetsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror offsets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "MM2 properties file (required)")
	group := fs.String("group", "", "consumer group (required)")
	from := fs.String("from", "", "alias of the cluster the group consumed from (required)")
	to := fs.String("to", "", "alias of the cluster to fail over to (required)")
	apply := fs.Bool("apply", false, "commit the offsets to the group on --to (only while it has no active members)")
	allowRewind := fs.Bool("allow-rewind", false, "with --apply, also move partitions whose committed offset on --to is ahead")
	output := fs.String("output", "text", "output format: text or json")
	timeout := fs.Duration("timeout", 30*time.Second, "time limit for the whole command")
	use := fs.String("use", offsetplan.UseCheckpoints, "offsets to print and apply: checkpoints (read on --to) or translate (fresh, needs --from reachable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"--config", *cfgPath}, {"--group", *group}, {"--from", *from}, {"--to", *to}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) > 0:
		fmt.Fprintf(stderr, "kmirror offsets: missing %s\n", strings.Join(missing, ", "))
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kmirror offsets: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *output != "text" && *output != "json":
		fmt.Fprintf(stderr, "kmirror offsets: --output %q: want text or json\n", *output)
		return 2
	case *use != offsetplan.UseCheckpoints && *use != offsetplan.UseTranslate:
		fmt.Fprintf(stderr, "kmirror offsets: --use %q: want checkpoints or translate\n", *use)
		return 2
	case *allowRewind && !*apply:
		fmt.Fprintln(stderr, "kmirror offsets: --allow-rewind needs --apply")
		return 2
	}
	cfg, err := config.Load(*cfgPath, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror offsets: invalid configuration:\n%v\n", err)
		return 1
	}
	f, err := cfg.Pair(*from, *to)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror offsets:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o := offsetplan.New(f, *group, *use, log, *timeout)
	rep, err := o.Plan(ctx, cfg)
	if err == nil && *apply {
		err = o.Apply(ctx, rep, *allowRewind)
	}
	if rep != nil {
		if perr := printOffsets(stdout, rep, *output); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "kmirror offsets:", err)
		return 1
	}
	return 0
}

func printOffsets(w io.Writer, rep *offsetplan.Report, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // keep "A->B" readable
		return enc.Encode(rep)
	}
	src := fmt.Sprintf("checkpoints in %s on %s", rep.CheckpointsTopic, rep.To)
	switch rep.Source {
	case offsetplan.UseTranslate:
		src = fmt.Sprintf("fresh translation of the group's offsets on %s", rep.From)
	case offsetplan.UseReverse:
		src = fmt.Sprintf("the group's offsets on %s translated back through the offset syncs of %s", rep.From, rep.ReverseFlow)
	}
	fmt.Fprintf(w, "group %s: offsets on %s translated from %s (source: %s; translation mode %s)\n", rep.Group, rep.To, rep.From, src, rep.Mode)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tUPSTREAM\tDOWNSTREAM\tCHECKPOINT\tFRESH\tCURRENT\tACTION")
	for _, r := range rep.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition, r.Upstream, r.Downstream,
			pair(r.CheckpointUpstream, r.CheckpointDownstream), pair(r.FreshUpstream, r.FreshDownstream), opt(r.Current), or(r.Action, "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if rep.Applied {
		fmt.Fprintf(w, "applied: committed to group %s on %s\n", rep.Group, rep.To)
	}
	return nil
}

func pair(up, down *int64) string {
	if up == nil || down == nil {
		return "-"
	}
	return fmt.Sprintf("%d->%d", *up, *down)
}

func opt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

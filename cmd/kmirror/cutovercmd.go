package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/cutover"
)

// Exit codes of "kmirror cutover" (docs/failover.md).
const (
	cutoverOK       = 0 // plan printed; status ready; switch committed every group
	cutoverError    = 1 // bad configuration, a cluster did not answer, a group failed
	cutoverUsage    = 2 // bad command line
	cutoverNotReady = 3 // status not ready; switch refused a group (active members)
)

const cutoverUsageText = `usage: kmirror cutover plan|status|switch FILE --flow A->B [--groups REGEX] [--topics REGEX]
       [--output text|json] [--timeout 2m] [--window 5s] [--verify N|all|none]
       [--dry-run] [--allow-rewind] [--source-down] [--report-dir DIR]
exit: 0 ok/ready/done, 1 error, 2 usage, 3 not ready or a group refused
`

// cutoverCmd is "kmirror cutover": plan, status and switch of a migration
// or failover of one flow (internal/cutover).
func cutoverCmd(args []string, stdout, stderr io.Writer) int {
	a := parseCutoverArgs(args, stderr)
	if a == nil {
		return cutoverUsage
	}
	o, code := cutoverOptions(a, stderr)
	if o == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()

	rep, text, code, err := runCutover(ctx, a, o)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror cutover "+a.sub+":", err)
		return cutoverError
	}
	if err := writeCutoverResult(a, rep, text, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "kmirror cutover:", err)
		return cutoverError
	}
	return code
}

// cutoverArgs is a parsed "kmirror cutover" command line.
type cutoverArgs struct {
	sub                                               string // plan, status or switch
	cfgPath, flowName, groups, topics, output, verify string
	timeout, window                                   time.Duration
	dryRun, sourceDown, allowRewind                   bool
	reportDir                                         string
	verifyTail                                        int64 // --verify as parseVerify reads it
}

// newCutoverFlagSet defines the flags of "kmirror cutover SUB", stored into a.
func newCutoverFlagSet(a *cutoverArgs, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kmirror cutover "+a.sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&a.cfgPath, "config", "", "MM2 properties file (or give it as the first argument)")
	fs.StringVar(&a.flowName, "flow", "", "direction SOURCE->TARGET (B->A for a failback); required when the file enables several flows")
	fs.StringVar(&a.groups, "groups", "", "only groups matching this regular expression (within the flow's groups filter)")
	fs.StringVar(&a.topics, "topics", "", "only source topics matching this regular expression (within the flow's topics filter)")
	fs.StringVar(&a.output, "output", "text", "text or json")
	fs.DurationVar(&a.timeout, "timeout", 2*time.Minute, "time limit for the whole command")
	fs.DurationVar(&a.window, "window", 5*time.Second, "status: watch the source's log ends this long for producers still writing (0: don't)")
	fs.StringVar(&a.verify, "verify", "1000", "status: compare record by record the copied records among the last N offsets of each partition, all, or none")
	fs.BoolVar(&a.dryRun, "dry-run", false, "switch: check and print what would be committed; commit nothing")
	fs.BoolVar(&a.sourceDown, "source-down", false, "unplanned failover: do not ask the source; the groups with checkpoints on the target, switched from their checkpoints")
	fs.BoolVar(&a.allowRewind, "allow-rewind", false, "switch: also move offsets on the target backwards")
	fs.StringVar(&a.reportDir, "report-dir", "", "also write the report as cutover-SUB-TIME.json and .txt into this folder")
	return fs
}

// parseCutoverArgs reads the subcommand, the flags and the file, and checks
// them; on a usage error it says so on stderr and returns nil.
func parseCutoverArgs(args []string, stderr io.Writer) *cutoverArgs {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "status" && args[0] != "switch") {
		fmt.Fprint(stderr, "kmirror cutover: want plan, status or switch\n", cutoverUsageText)
		return nil
	}
	a := &cutoverArgs{sub: args[0]}
	fs := newCutoverFlagSet(a, stderr)
	// The file may come before, between or after the flags.
	rest := args[1:]
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			return nil
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if a.cfgPath == "" && len(pos) > 0 {
		a.cfgPath, pos = pos[0], pos[1:]
	}
	tail, verr := parseVerify(a.verify)
	switch {
	case a.cfgPath == "":
		fmt.Fprint(stderr, "kmirror cutover: missing the MM2 properties file\n", cutoverUsageText)
		return nil
	case len(pos) > 0:
		fmt.Fprintf(stderr, "kmirror cutover: unexpected argument %q\n", pos[0])
		return nil
	case a.output != "text" && a.output != "json":
		fmt.Fprintf(stderr, "kmirror cutover: --output %q: want text or json\n", a.output)
		return nil
	case verr != nil:
		fmt.Fprintf(stderr, "kmirror cutover: --verify: %v\n", verr)
		return nil
	case (a.dryRun || a.allowRewind) && a.sub != "switch":
		fmt.Fprintln(stderr, "kmirror cutover: --dry-run and --allow-rewind are for switch")
		return nil
	}
	a.verifyTail = tail
	return a
}

// cutoverOptions compiles the filters, loads the file and picks the flow;
// on an error it says so on stderr and returns the exit code.
func cutoverOptions(a *cutoverArgs, stderr io.Writer) (*cutover.Options, int) {
	o := &cutover.Options{Window: a.window, VerifyTail: a.verifyTail, AllowRewind: a.allowRewind, SourceDown: a.sourceDown, Timeout: a.timeout,
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, re := range []struct {
		name, v string
		dst     **regexp.Regexp
	}{{"--groups", a.groups, &o.Groups}, {"--topics", a.topics, &o.Topics}} {
		if re.v == "" {
			continue
		}
		r, err := regexp.Compile("^(?:" + re.v + ")$")
		if err != nil {
			fmt.Fprintf(stderr, "kmirror cutover: %s: %v\n", re.name, err)
			return nil, cutoverUsage
		}
		*re.dst = r
	}
	cfg, err := config.Load(a.cfgPath, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror cutover: invalid configuration:\n%v\n", err)
		return nil, cutoverError
	}
	o.Config = cfg
	if o.Flow, err = cutoverFlow(cfg, a.flowName); err != nil {
		fmt.Fprintln(stderr, "kmirror cutover:", err)
		return nil, cutoverUsage
	}
	return o, cutoverOK
}

// runCutover runs the subcommand and returns its report, how to print it
// as text, and the exit code it calls for.
func runCutover(ctx context.Context, a *cutoverArgs, o *cutover.Options) (rep any, text func(io.Writer), code int, err error) {
	code = cutoverOK
	switch a.sub {
	case "plan":
		r, err := cutover.Plan(ctx, o)
		if err != nil {
			return nil, nil, 0, err
		}
		rep, text = r, func(w io.Writer) { printPlan(w, r) }
	case "status":
		r, err := cutover.Status(ctx, o)
		if err != nil {
			return nil, nil, 0, err
		}
		rep, text = r, func(w io.Writer) { printStatus(w, r) }
		if !r.Ready {
			code = cutoverNotReady
		}
	case "switch":
		r, err := cutover.Switch(ctx, o, a.dryRun)
		if err != nil {
			return nil, nil, 0, err
		}
		rep, text = r, func(w io.Writer) { printSwitch(w, r) }
		code = switchCode(r)
	}
	return rep, text, code, nil
}

// writeCutoverResult prints the report as text or JSON and, with
// --report-dir, writes it there too.
func writeCutoverResult(a *cutoverArgs, rep any, text func(io.Writer), stdout, stderr io.Writer) error {
	if a.output == "json" {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		text(stdout)
	}
	if a.reportDir != "" {
		paths, err := writeCutoverReport(a.reportDir, a.sub, time.Now(), rep, text)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report written to %s\n", strings.Join(paths, " and "))
	}
	return nil
}

// switchCode is the exit code of a switch: a failed group is an error, a
// refused one "not ready".
func switchCode(r *cutover.SwitchReport) int {
	switch {
	case len(r.Failed) > 0:
		return cutoverError
	case len(r.Refused) > 0:
		return cutoverNotReady
	}
	return cutoverOK
}

// parseVerify reads --verify: a record count, all (0) or none (-1).
func parseVerify(s string) (int64, error) {
	switch s {
	case "all":
		return 0, nil
	case "none":
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive number of records, all or none", s)
	}
	return n, nil
}

// cutoverFlow returns the enabled flow of that name, the only enabled
// flow, or for a direction the file does not enable (a failback B->A of an
// A->B migration) the pair built from the file.
func cutoverFlow(cfg *config.Config, name string) (*config.Flow, error) {
	f, err := pickFlow(cfg, name)
	if err == nil || name == "" {
		return f, err
	}
	src, dst, ok := strings.Cut(name, "->")
	if !ok {
		return nil, fmt.Errorf("--flow %q: want SOURCE->TARGET", name)
	}
	return cfg.Pair(strings.TrimSpace(src), strings.TrimSpace(dst))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // keep "A->B" readable
	return enc.Encode(v)
}

// writeCutoverReport writes rep as DIR/cutover-SUB-TIME.json and .txt.
func writeCutoverReport(dir, sub string, now time.Time, rep any, text func(io.Writer)) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, "cutover-"+sub+"-"+now.UTC().Format("20060102T150405.000Z"))
	var j, t bytes.Buffer
	if err := writeJSON(&j, rep); err != nil {
		return nil, err
	}
	text(&t)
	var paths []string
	for _, f := range []struct {
		ext string
		b   []byte
	}{{".json", j.Bytes()}, {".txt", t.Bytes()}} {
		p := base + f.ext
		if err := os.WriteFile(p, f.b, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func printPlan(w io.Writer, r *cutover.PlanReport) {
	fmt.Fprintf(w, "cutover plan %s: from %s to %s\n\nTopics that move (%d):\n", r.Flow, r.Source, r.Target, len(r.Topics))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOPIC\tREMOTE\tPARTITIONS\tREMOTE PARTITIONS\tCONFIGS THAT DIFFER")
	for _, t := range r.Topics {
		rp := strconv.Itoa(int(t.RemotePartitions))
		if t.RemotePartitions == 0 {
			rp = "not created yet"
		}
		var diffs []string
		for _, d := range t.ConfigDiffs {
			s := fmt.Sprintf("%s=%s/%s", d.Key, val(d.Source), val(d.Target))
			if d.Excluded {
				s += " (excluded from sync)"
			}
			diffs = append(diffs, s)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", t.Topic, t.Remote, t.Partitions, rp, or(strings.Join(diffs, ", "), "-"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nGroups that move (%d):\n", len(r.Groups))
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  GROUP\tON %s\tON %s\n", r.Source, r.Target)
	for _, g := range r.Groups {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", g.Group, groupText(g.Source), groupText(g.Target))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nTopic ACLs the remote topics get: %d, missing on %s: %d\n", len(r.ACLs), r.Target, len(r.MissingACLs))
	for _, a := range r.MissingACLs {
		fmt.Fprintln(w, "  missing:", a)
	}
	fmt.Fprintln(w, "\nInternal topics (they do not move):")
	for _, t := range r.Internal {
		fmt.Fprintf(w, "  %s on %s: %s\n", t.Topic, t.Cluster, t.Role)
	}
	printExcluded(w, "Topics that do not move", r.Excluded)
	printExcluded(w, "Groups that do not move", r.ExcludedGroups)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func printExcluded(w io.Writer, title string, ex []cutover.Excluded) {
	fmt.Fprintf(w, "\n%s (%d):\n", title, len(ex))
	for _, e := range ex {
		fmt.Fprintf(w, "  %s: %s\n", e.Name, e.Reason)
	}
}

func val(v *string) string {
	if v == nil {
		return "(default)"
	}
	return *v
}

func groupText(g cutover.GroupState) string {
	switch {
	case g.Error != "":
		return "error: " + g.Error
	case !g.Exists:
		return "-"
	case g.Active():
		return fmt.Sprintf("%s, %d active member(s)", g.State, len(g.Members))
	}
	return g.State
}

func printStatus(w io.Writer, r *cutover.StatusReport) {
	verdict := "READY"
	if !r.Ready {
		verdict = "NOT READY"
	}
	fmt.Fprintf(w, "cutover status %s at %s: %s\n\n", r.Flow, r.Time.Format(time.RFC3339), verdict)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tREMOTE\tLAG RECORDS\tLAG SECONDS\tVERIFY\tPRODUCERS\tREADY")
	for _, t := range r.Topics {
		prod := "stopped"
		if t.Writing {
			prod = "writing"
		}
		if r.WindowSeconds == 0 {
			prod = "not watched"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%s\t%s\n", t.Topic, t.Remote, t.LagRecords, t.LagSeconds, t.Verified, prod, readyText(t.Ready, t.Reasons))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSOURCE\tTARGET\tCHECKPOINT AGE\tTRANSLATION\tREADY")
	for _, g := range r.Groups {
		age := "-"
		if g.CheckpointAgeSeconds != nil {
			age = fmt.Sprintf("%.0f s", *g.CheckpointAgeSeconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.Group, groupText(g.Source), groupText(g.Target), age, g.Translation, readyText(g.Ready, g.Reasons))
	}
	tw.Flush()
	if r.CheckpointsErr != "" {
		fmt.Fprintln(w, "note: checkpoints not read:", r.CheckpointsErr)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func readyText(ok bool, why []string) string {
	if ok {
		return "yes"
	}
	return "no: " + strings.Join(why, "; ")
}

func printSwitch(w io.Writer, r *cutover.SwitchReport) {
	what := "switch"
	if r.DryRun {
		what = "switch --dry-run (nothing committed)"
	}
	done := "committed"
	if r.DryRun {
		done = "to commit"
	}
	skipped := ""
	if len(r.Skipped) > 0 {
		skipped = fmt.Sprintf(", %d skipped (nothing to move)", len(r.Skipped))
	}
	fmt.Fprintf(w, "cutover %s %s at %s: %d %s, %d refused, %d failed%s\n", what, r.Flow, r.Time.Format(time.RFC3339), len(r.Committed), done, len(r.Refused), len(r.Failed), skipped)
	for _, g := range r.Groups {
		fmt.Fprintf(w, "\ngroup %s: %s", g.Group, g.Action)
		if g.Reason != "" {
			fmt.Fprintf(w, ": %s", g.Reason)
		}
		fmt.Fprintln(w)
		if g.Offsets != nil {
			_ = printOffsets(w, g.Offsets, "text")
		}
	}
}

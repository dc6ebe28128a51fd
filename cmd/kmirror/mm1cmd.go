package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mm1"
	"github.com/kmirror/kmirror/internal/policy"
)

const mm1Usage = `Usage: kmirror mm1 --consumer.config FILE --producer.config FILE --whitelist REGEX [options]

Runs MirrorMaker 1's command line (kafka-mirror-maker.sh) on kmirror: the two
client files and the flags become a one-way MM2 flow source->target that keeps
topic names (IdentityReplicationPolicy). See docs/mm1.md for the differences.

MirrorMaker 1 flags (--flag value or --flag=value):
  --consumer.config FILE          source consumer properties (required)
  --producer.config FILE          target producer properties (required)
  --include REGEX                 topics to mirror; commas mean "or"
  --whitelist REGEX               old name of --include (ignored when --include is given)
  --offset.commit.interval.ms N   how often progress is saved (kmirror default 1000)
  --num.streams N                 accepted and ignored: kmirror sizes its own parallelism
  --abort.on.send.failure BOOL    accepted: a partition stops on a fatal send error (see docs/mm1.md)
  --new.consumer                  accepted, no effect (as in MirrorMaker 1)
  --blacklist REGEX               topics not to mirror (removed in Kafka 2.0; applied as topics.exclude)
  --num.producers, --queue.size, --queue.byte.size, --no.data.loss
                                  flags of MirrorMaker 1 before Kafka 0.9: accepted, no effect (logged)
  --message.handler, --message.handler.args, --consumer.rebalance.listener,
  --rebalance.listener.args       refused: Java classes cannot run in kmirror
  --zookeeper                     refused: give the source brokers as bootstrap.servers in --consumer.config
  --help, --version

kmirror extensions:
  --replication.factor N          replication factor of mirrored and internal topics
                                  (default: MM2's, 2 and 3)
  --source-alias NAME             alias of the source cluster (default source)
  --target-alias NAME             alias of the target cluster (default target)
  --print-config                  print the generated MM2 properties (secrets hidden) and exit
  --log-format, --log-level, --rest-addr, --metrics-addr, --memory-limit
                                  as for "kmirror run"
`

// mm1Options is a parsed "kmirror mm1" command line.
type mm1Options struct {
	mm1.Options
	printConfig         bool
	notes               []string // what was accepted but has no effect
	runArgs             []string // flags handed on to "kmirror run"
	logFormat, logLevel string
}

// runFlags are the "kmirror run" flags mm1 accepts and hands on unchanged.
var runFlags = []struct{ name, def, usage string }{
	{"log-format", "text", "log format: text or json"},
	{"log-level", "info", "log level: debug, info, warn or error"},
	{"rest-addr", "", "serve the REST API at ADDR"},
	{"metrics-addr", "", "serve Prometheus metrics at ADDR"},
	{"memory-limit", "128MiB", "soft limit of the Go heap"},
}

// oldMM1Flags are flags of MirrorMaker 1 before Kafka 0.9 that old posts
// still show: accepted, with a note saying why they do nothing.
var oldMM1Flags = []struct {
	name, why string
	bool      bool
}{
	{name: "num.producers", why: "removed in Kafka 0.9 (one producer per process since); kmirror runs one idempotent producer per flow"},
	{name: "queue.size", why: "removed in Kafka 0.9; kmirror bounds what it holds in memory by bytes (fetch.max.bytes of the source consumer)"},
	{name: "queue.byte.size", why: "removed in Kafka 0.9; kmirror bounds what it holds in memory by bytes (fetch.max.bytes of the source consumer)"},
	{name: "no.data.loss", why: "removed in Kafka 0.9; kmirror never loses data: acks=all and idempotent writes always", bool: true},
}

// errHelp and errVersion ask for the help text and the version.
var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// refusedMM1Flags are MM1's flags that name Java classes.
var refusedMM1Flags = []string{"message.handler", "message.handler.args", "consumer.rebalance.listener", "rebalance.listener.args"}

// mm1Flags holds the parsed flags that are not fields of mm1Options.
type mm1Flags struct {
	include, whitelist, blacklist *string
	numStreams, abort             *string
	version                       *bool
	pass                          map[string]*string // runFlags by name
	set                           map[string]bool    // the flags given
}

// parseMM1Args reads MM1's flags. Like kafka-mirror-maker.sh it takes no
// positional arguments.
func parseMM1Args(args []string) (*mm1Options, error) {
	o := &mm1Options{}
	fs, v := newMM1FlagSet(o)
	if err := parseMM1FlagSet(fs, v, args); err != nil {
		return nil, err
	}
	if err := checkRefusedMM1Flags(v.set); err != nil {
		return nil, err
	}
	for _, f := range oldMM1Flags {
		if v.set[f.name] {
			o.notes = append(o.notes, "--"+f.name+" has no effect: "+f.why)
		}
	}

	for _, f := range []struct{ name, val string }{{"consumer.config", o.ConsumerConfig}, {"producer.config", o.ProducerConfig}} {
		if f.val == "" {
			return nil, fmt.Errorf("--%s FILE is required", f.name)
		}
	}
	if err := o.setTopics(v); err != nil {
		return nil, err
	}
	if err := o.checkValues(v); err != nil {
		return nil, err
	}
	if err := o.checkAliases(); err != nil {
		return nil, err
	}
	for _, f := range runFlags {
		if v.set[f.name] {
			o.runArgs = append(o.runArgs, "--"+f.name+"="+*v.pass[f.name])
		}
	}
	o.logFormat, o.logLevel = *v.pass["log-format"], *v.pass["log-level"]
	return o, nil
}

// newMM1FlagSet defines MM1's flags and kmirror's extensions, storing
// into o those that are its fields.
func newMM1FlagSet(o *mm1Options) (*flag.FlagSet, *mm1Flags) {
	fs := flag.NewFlagSet("kmirror mm1", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	v := &mm1Flags{pass: map[string]*string{}, set: map[string]bool{}}
	fs.StringVar(&o.ConsumerConfig, "consumer.config", "", "")
	fs.StringVar(&o.ProducerConfig, "producer.config", "", "")
	v.include = fs.String("include", "", "")
	v.whitelist = fs.String("whitelist", "", "")
	v.numStreams = fs.String("num.streams", "", "")
	fs.StringVar(&o.CommitIntervalMs, "offset.commit.interval.ms", "", "")
	v.abort = fs.String("abort.on.send.failure", "", "")
	fs.Bool("new.consumer", false, "")
	v.version = fs.Bool("version", false, "")
	fs.StringVar(&o.ReplicationFactor, "replication.factor", "", "")
	fs.StringVar(&o.Source, "source-alias", "source", "")
	fs.StringVar(&o.Target, "target-alias", "target", "")
	fs.BoolVar(&o.printConfig, "print-config", false, "")
	for _, n := range refusedMM1Flags {
		fs.String(n, "", "")
	}
	v.blacklist = fs.String("blacklist", "", "")
	fs.String("zookeeper", "", "")
	for _, f := range oldMM1Flags {
		if f.bool {
			fs.Bool(f.name, false, "")
		} else {
			fs.String(f.name, "", "")
		}
	}
	for _, f := range runFlags {
		v.pass[f.name] = fs.String(f.name, f.def, f.usage)
	}
	return fs, v
}

// parseMM1FlagSet parses args, refusing positional arguments, and records
// in v.set the flags given.
func parseMM1FlagSet(fs *flag.FlagSet, v *mm1Flags, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return unknownFlag(fs, name)
		}
		return err
	}
	if *v.version {
		return errVersion
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (MirrorMaker 1 takes only flags)", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { v.set[f.Name] = true })
	return nil
}

// checkRefusedMM1Flags refuses the flags that kmirror cannot honour.
func checkRefusedMM1Flags(set map[string]bool) error {
	for _, n := range refusedMM1Flags {
		if set[n] {
			return fmt.Errorf("--%s is not supported: kmirror is written in Go and cannot load Java classes; "+
				"copy records unchanged, or transform them in a separate consumer on the target", n)
		}
	}
	if set["zookeeper"] {
		return errors.New("--zookeeper is not supported: kmirror reads the source through its brokers, " +
			"as MirrorMaker 1's new consumer did; put them as bootstrap.servers in the --consumer.config file")
	}
	return nil
}

// setTopics sets the topics to mirror and to exclude from --include,
// --whitelist and --blacklist, and checks their regexes.
func (o *mm1Options) setTopics(v *mm1Flags) error {
	switch {
	case v.set["include"]:
		o.TopicsFlag, o.Topics = "--include", *v.include
		if v.set["whitelist"] {
			o.notes = append(o.notes, "--whitelist is ignored because --include is given")
		}
	case v.set["whitelist"]:
		o.TopicsFlag, o.Topics = "--whitelist", *v.whitelist
	case v.set["blacklist"]:
		o.TopicsFlag, o.Topics = "--blacklist", ".*"
	default:
		return errors.New("--include or --whitelist REGEX is required (e.g. --whitelist '.*')")
	}
	o.Topics = mm1.CleanTopicRegex(o.Topics)
	if o.Topics == "" {
		return fmt.Errorf("%s: the topic regex is empty", o.TopicsFlag)
	}
	if _, err := policy.CompilePattern([]string{o.Topics}); err != nil {
		return fmt.Errorf("%s: %v", o.TopicsFlag, err)
	}
	if v.set["blacklist"] {
		if o.Exclude = mm1.CleanTopicRegex(*v.blacklist); o.Exclude == "" {
			return errors.New("--blacklist: the topic regex is empty")
		}
		if _, err := policy.CompilePattern([]string{o.Exclude}); err != nil {
			return fmt.Errorf("--blacklist: %v", err)
		}
		o.notes = append(o.notes, "--blacklist was removed from MirrorMaker 1 in Kafka 2.0; kmirror applies it as topics.exclude "+
			"(with MM2's default exclusions) to the topics "+o.TopicsFlag+" selects")
	}
	return nil
}

// checkValues checks the numeric and boolean flags and notes those that
// have no effect.
func (o *mm1Options) checkValues(v *mm1Flags) error {
	if v.set["num.streams"] {
		if n, err := strconv.Atoi(*v.numStreams); err != nil || n < 1 {
			return fmt.Errorf("--num.streams %q: want a positive integer", *v.numStreams)
		}
		o.notes = append(o.notes, "--num.streams is ignored: kmirror fetches and produces every assigned partition concurrently")
	}
	if v.set["offset.commit.interval.ms"] {
		if n, err := strconv.ParseInt(o.CommitIntervalMs, 10, 64); err != nil || n < 1 {
			return fmt.Errorf("--offset.commit.interval.ms %q: want a positive number of milliseconds", o.CommitIntervalMs)
		}
	}
	if v.set["abort.on.send.failure"] {
		if _, err := strconv.ParseBool(*v.abort); err != nil {
			return fmt.Errorf("--abort.on.send.failure %q: want true or false", *v.abort)
		}
		o.notes = append(o.notes, "--abort.on.send.failure has no effect: send errors are retried; "+
			"an error a retry cannot fix stops that partition only (see GET /status and kmirror_partition_errors_total)")
	}
	if v.set["new.consumer"] {
		o.notes = append(o.notes, "--new.consumer has no effect")
	}
	if v.set["replication.factor"] {
		if n, err := strconv.Atoi(o.ReplicationFactor); err != nil || n == 0 || n < -1 || n > 32767 {
			return fmt.Errorf("--replication.factor %q: want -1 (broker default) or 1 to 32767", o.ReplicationFactor)
		}
	}
	return nil
}

// checkAliases checks the two cluster aliases.
func (o *mm1Options) checkAliases() error {
	aliasRE := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	for _, a := range []struct{ flag, val string }{{"--source-alias", o.Source}, {"--target-alias", o.Target}} {
		if !aliasRE.MatchString(a.val) {
			return fmt.Errorf("%s %q: want letters, digits, '_' or '-'", a.flag, a.val)
		}
	}
	if o.Source == o.Target {
		return fmt.Errorf("--source-alias and --target-alias are both %q", o.Source)
	}
	return nil
}

// unknownFlag explains a flag kmirror mm1 does not know, with the closest
// known flag when there is one.
func unknownFlag(fs *flag.FlagSet, name string) error {
	var known []string
	fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
	msg := fmt.Sprintf("--%s is not a MirrorMaker 1 flag that kmirror knows", name)
	if best := config.Suggest(name, known); best != "" {
		msg += fmt.Sprintf(" (did you mean --%s?)", best)
	} else {
		// e.g. --rebalance.listener for --consumer.rebalance.listener
		for _, k := range known {
			if strings.HasSuffix(k, "."+name) {
				msg += fmt.Sprintf(" (did you mean --%s?)", k)
				break
			}
		}
	}
	return errors.New(msg)
}

// mm1Cmd is "kmirror mm1": MirrorMaker 1's command line, run as a one-way
// MM2 flow through "kmirror run".
func mm1Cmd(args []string, stdout, stderr io.Writer) int {
	o, err := parseMM1Args(args)
	switch {
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, mm1Usage)
		return 0
	case errors.Is(err, errVersion):
		return run([]string{"version"}, stdout, stderr)
	case err != nil:
		fmt.Fprintf(stderr, "kmirror mm1: %v\n(kmirror mm1 --help lists the flags)\n", err)
		return 2
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 2
	}
	cons, err := mm1.ReadClientFile("consumer.config", o.ConsumerConfig)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	prod, err := mm1.ReadClientFile("producer.config", o.ProducerConfig)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	tr, err := mm1.Translate(&o.Options, cons, prod)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	unused, err := tr.Check(&o.Options)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1: invalid configuration:")
		fmt.Fprintln(stderr, err)
		for _, w := range append(tr.Warnings, tr.ConfigWarnings...) {
			fmt.Fprintln(stderr, "warning:", w)
		}
		return 1
	}
	if o.printConfig {
		for _, w := range append(append(o.notes, tr.Warnings...), tr.ConfigWarnings...) {
			fmt.Fprintln(stderr, "warning:", w)
		}
		stdout.Write(tr.Properties(true))
		return 0
	}
	return runMM1(o, tr, unused, log, stdout, stderr)
}

// runMM1 writes the generated configuration to a private temporary file and
// runs it exactly as "kmirror run" does. The file is removed on exit. Every
// key of it is registered with the user's file and line (or flag) that
// supplied it, so that warnings and errors name those, never the temporary
// file; replication factor errors name --replication.factor.
func runMM1(o *mm1Options, tr *mm1.Translation, unused []string, log *slog.Logger, stdout, stderr io.Writer) int {
	for _, n := range o.notes {
		log.Warn(n) // a flag that does nothing here
	}
	for _, w := range tr.Warnings {
		log.Warn(w)
	}
	for _, n := range tr.Notes {
		log.Info(n)
	}
	if len(unused) > 0 {
		log.Info("client keys kmirror does not apply", "keys", strings.Join(unused, ", "))
	}
	if !tr.Sets(o.Source + ".consumer.auto.offset.reset") {
		log.Info("partitions without saved progress start at the log start (auto.offset.reset=earliest); MM1's consumer would start at the end")
	}
	log.Info("mirroring as MirrorMaker 1 would", "topics", o.Topics, "from", o.ConsumerConfig, "to", o.ProducerConfig,
		"progress_topic", "mm2-offsets."+o.Source+".internal")

	f, err := os.CreateTemp("", "kmirror-mm1-*.properties") // mode 0600
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(tr.Properties(false))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", werr)
		return 1
	}
	config.SetOrigins(f.Name(), tr.Origins())
	defer config.SetOrigins(f.Name(), nil)
	return runExplained(append(o.runArgs, f.Name()), stdout, o.ExplainWriter(stderr), o.Explain)
}

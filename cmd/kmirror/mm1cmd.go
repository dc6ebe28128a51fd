package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
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
  --message.handler, --message.handler.args, --consumer.rebalance.listener,
  --rebalance.listener.args       refused: Java classes cannot run in kmirror
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

// The Java class kmirror names for MM1's topic naming.
const identityPolicy = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

// mm1Options is a parsed "kmirror mm1" command line.
type mm1Options struct {
	consumerConfig, producerConfig string
	topics                         string // --include/--whitelist after MM1's clean-up
	topicsFlag                     string // the flag topics came from
	commitIntervalMs               string // "" when unset
	replicationFactor              string // "" when unset
	source, target                 string // cluster aliases
	printConfig                    bool
	notes                          []string // what was accepted but has no effect
	runArgs                        []string // flags handed on to "kmirror run"
	logFormat, logLevel            string
}

// runFlags are the "kmirror run" flags mm1 accepts and hands on unchanged.
var runFlags = []struct{ name, def, usage string }{
	{"log-format", "text", "log format: text or json"},
	{"log-level", "info", "log level: debug, info, warn or error"},
	{"rest-addr", "", "serve the REST API at ADDR"},
	{"metrics-addr", "", "serve Prometheus metrics at ADDR"},
	{"memory-limit", "128MiB", "soft limit of the Go heap"},
}

// errHelp and errVersion ask for the help text and the version.
var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// parseMM1Args reads MM1's flags. Like kafka-mirror-maker.sh it takes no
// positional arguments.
func parseMM1Args(args []string) (*mm1Options, error) {
	fs := flag.NewFlagSet("kmirror mm1", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o := &mm1Options{}
	fs.StringVar(&o.consumerConfig, "consumer.config", "", "")
	fs.StringVar(&o.producerConfig, "producer.config", "", "")
	include := fs.String("include", "", "")
	whitelist := fs.String("whitelist", "", "")
	numStreams := fs.String("num.streams", "", "")
	fs.StringVar(&o.commitIntervalMs, "offset.commit.interval.ms", "", "")
	abort := fs.String("abort.on.send.failure", "", "")
	fs.Bool("new.consumer", false, "")
	version := fs.Bool("version", false, "")
	fs.StringVar(&o.replicationFactor, "replication.factor", "", "")
	fs.StringVar(&o.source, "source-alias", "source", "")
	fs.StringVar(&o.target, "target-alias", "target", "")
	fs.BoolVar(&o.printConfig, "print-config", false, "")
	refused := []string{"message.handler", "message.handler.args", "consumer.rebalance.listener", "rebalance.listener.args"}
	for _, n := range refused {
		fs.String(n, "", "")
	}
	fs.String("blacklist", "", "")
	pass := map[string]*string{}
	for _, f := range runFlags {
		pass[f.name] = fs.String(f.name, f.def, f.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	if *version {
		return nil, errVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (MirrorMaker 1 takes only flags)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, n := range refused {
		if set[n] {
			return nil, fmt.Errorf("--%s is not supported: kmirror is written in Go and cannot load Java classes; "+
				"copy records unchanged, or transform them in a separate consumer on the target", n)
		}
	}
	if set["blacklist"] {
		return nil, errors.New("--blacklist was removed in Kafka 2.0; write the topics to mirror as a --whitelist regex")
	}

	for _, f := range []struct{ name, val string }{{"consumer.config", o.consumerConfig}, {"producer.config", o.producerConfig}} {
		if f.val == "" {
			return nil, fmt.Errorf("--%s FILE is required", f.name)
		}
	}
	switch {
	case set["include"]:
		o.topicsFlag, o.topics = "--include", *include
		if set["whitelist"] {
			o.notes = append(o.notes, "--whitelist is ignored because --include is given")
		}
	case set["whitelist"]:
		o.topicsFlag, o.topics = "--whitelist", *whitelist
	default:
		return nil, errors.New("--include or --whitelist REGEX is required (e.g. --whitelist '.*')")
	}
	o.topics = cleanTopicRegex(o.topics)
	if o.topics == "" {
		return nil, fmt.Errorf("%s: the topic regex is empty", o.topicsFlag)
	}
	if _, err := policy.CompilePattern([]string{o.topics}); err != nil {
		return nil, fmt.Errorf("%s: %v", o.topicsFlag, err)
	}

	if set["num.streams"] {
		if n, err := strconv.Atoi(*numStreams); err != nil || n < 1 {
			return nil, fmt.Errorf("--num.streams %q: want a positive integer", *numStreams)
		}
		o.notes = append(o.notes, "--num.streams is ignored: kmirror fetches and produces every assigned partition concurrently")
	}
	if set["offset.commit.interval.ms"] {
		if n, err := strconv.ParseInt(o.commitIntervalMs, 10, 64); err != nil || n < 1 {
			return nil, fmt.Errorf("--offset.commit.interval.ms %q: want a positive number of milliseconds", o.commitIntervalMs)
		}
	}
	if set["abort.on.send.failure"] {
		if _, err := strconv.ParseBool(*abort); err != nil {
			return nil, fmt.Errorf("--abort.on.send.failure %q: want true or false", *abort)
		}
		o.notes = append(o.notes, "--abort.on.send.failure has no effect: send errors are retried; "+
			"an error a retry cannot fix stops that partition only (see GET /status and kmirror_partition_errors_total)")
	}
	if set["new.consumer"] {
		o.notes = append(o.notes, "--new.consumer has no effect")
	}
	if set["replication.factor"] {
		if n, err := strconv.Atoi(o.replicationFactor); err != nil || n == 0 || n < -1 || n > 32767 {
			return nil, fmt.Errorf("--replication.factor %q: want -1 (broker default) or 1 to 32767", o.replicationFactor)
		}
	}
	aliasRE := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	for _, a := range []struct{ flag, val string }{{"--source-alias", o.source}, {"--target-alias", o.target}} {
		if !aliasRE.MatchString(a.val) {
			return nil, fmt.Errorf("%s %q: want letters, digits, '_' or '-'", a.flag, a.val)
		}
	}
	if o.source == o.target {
		return nil, fmt.Errorf("--source-alias and --target-alias are both %q", o.source)
	}
	for _, f := range runFlags {
		if set[f.name] {
			o.runArgs = append(o.runArgs, "--"+f.name+"="+*pass[f.name])
		}
	}
	o.logFormat, o.logLevel = *pass["log-format"], *pass["log-level"]
	return o, nil
}

// cleanTopicRegex applies MM1's clean-up of --include: commas mean "or",
// spaces and surrounding quotes are dropped. A lone "*", which Java rejects
// but which MM1 guides suggest, means every topic.
func cleanTopicRegex(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "|")
	s = strings.ReplaceAll(s, " ", "")
	s = strings.TrimLeft(s, `"'`)
	s = strings.TrimRight(s, `"'`)
	if s == "*" {
		return ".*"
	}
	return s
}

// mm2Line is one key of the generated MM2 file and where it came from.
type mm2Line struct {
	key, value string
	origin     string // "FILE:LINE" or a flag
	userKey    string // the key in the user's file, if any
}

// Client keys that MM1 overrides or that have no meaning for kmirror, which
// copies bytes and keeps no consumer group.
var (
	droppedConsumerKeys = map[string]string{
		"group.id":           "kmirror keeps its progress on the target; the group's committed offsets only say where partitions without progress start",
		"enable.auto.commit": "kmirror commits no consumer offsets",
		"key.deserializer":   "kmirror copies raw bytes",
		"value.deserializer": "kmirror copies raw bytes",
	}
	droppedProducerKeys = map[string]string{
		"key.serializer":   "kmirror copies raw bytes",
		"value.serializer": "kmirror copies raw bytes",
		"producer.type":    "kmirror always keeps each partition's order",
	}
)

// mm1Translation is the generated MM2 configuration.
type mm1Translation struct {
	lines []mm2Line
	notes []string
}

// translateMM1 turns the options and the two client files into MM2 keys.
func translateMM1(o *mm1Options, cons, prod *config.Properties) (*mm1Translation, error) {
	s, t := o.source, o.target
	tr := &mm1Translation{}
	add := func(key, value, origin string) {
		tr.lines = append(tr.lines, mm2Line{key: key, value: value, origin: origin})
	}
	add("clusters", s+", "+t, "kmirror mm1")
	add(s+"->"+t+".enabled", "true", "kmirror mm1")
	add("replication.policy.class", identityPolicy, "kmirror mm1: MM1 keeps topic names")
	add(s+"->"+t+".topics", o.topics, o.topicsFlag)
	add(s+"->"+t+".emit.checkpoints.enabled", "false", "kmirror mm1: MM1 has no checkpoints")
	add(s+"->"+t+".emit.heartbeats.enabled", "false", "kmirror mm1: MM1 has no heartbeats")
	add(t+"->"+s+".emit.heartbeats.enabled", "false", "kmirror mm1: nothing is written to the source")
	add(s+"->"+t+".sync.topic.acls.enabled", "false", "kmirror mm1: MM1 leaves ACLs alone")
	add(s+"->"+t+".sync.topic.configs.enabled", "false", "kmirror mm1: MM1 leaves topic configs alone")
	add(s+"->"+t+".heartbeats.replication.enabled", "false", "kmirror mm1: MM1 copies only the whitelist")
	if o.commitIntervalMs != "" {
		add(t+".offset.flush.interval.ms", o.commitIntervalMs, "--offset.commit.interval.ms")
	}
	if rf := o.replicationFactor; rf != "" {
		for _, k := range []string{"replication.factor", "offset.storage.replication.factor",
			"offset-syncs.topic.replication.factor", "checkpoints.topic.replication.factor",
			"heartbeats.topic.replication.factor"} {
			add(k, rf, "--replication.factor")
		}
	}

	providers := map[string]mm2Line{}
	files := []struct {
		path    string
		props   *config.Properties
		alias   string
		role    string
		dropped map[string]string
	}{{o.consumerConfig, cons, s, "consumer", droppedConsumerKeys}, {o.producerConfig, prod, t, "producer", droppedProducerKeys}}
	for _, f := range files {
		var dropped []string
		for _, k := range f.props.Keys() {
			v, _ := f.props.Get(k)
			origin := fmt.Sprintf("%s:%d", f.props.File(k), f.props.Line(k))
			l := mm2Line{value: v, origin: origin, userKey: k}
			switch {
			case k == "config.providers" || strings.HasPrefix(k, "config.providers."):
				if prev, ok := providers[k]; ok && prev.value != v {
					return nil, fmt.Errorf("%s: %s: differs from %s", origin, k, prev.origin)
				} else if ok {
					continue
				}
				l.key = k
				providers[k] = l
			case f.role == "consumer" && k == "group.id":
				// MM1 replicated through this group: start where it stands.
				add(s+"->"+t+"."+config.StartGroupKey, v, origin)
				tr.notes = append(tr.notes, fmt.Sprintf("%s: group.id %s: partitions without kmirror progress start at this group's committed offsets, as MM1 resumed; kmirror commits nothing to it", origin, v))
				continue
			case f.dropped[k] != "":
				dropped = append(dropped, k+" ("+f.dropped[k]+")")
				continue
			case config.IsClientConnectionKey(k):
				l.key = f.alias + "." + k
			default:
				l.key = f.alias + "." + f.role + "." + k
			}
			tr.lines = append(tr.lines, l)
		}
		if len(dropped) > 0 {
			tr.notes = append(tr.notes, fmt.Sprintf("%s: not used: %s", f.path, strings.Join(dropped, ", ")))
		}
	}
	return tr, nil
}

// properties renders the translation as an MM2 properties file. With
// redact, secret values are replaced by [hidden].
func (tr *mm1Translation) properties(redact bool) []byte {
	var b strings.Builder
	b.WriteString("# Generated by kmirror mm1 from MirrorMaker 1 flags and client files.\n")
	for _, l := range tr.lines {
		v := l.value
		if redact {
			v = config.Redact(l.key, v)
		}
		fmt.Fprintf(&b, "# %s\n%s = %s\n", l.origin, escapeKey(l.key), escapeValue(v))
	}
	return []byte(b.String())
}

// escapeKey and escapeValue write strings that java.util.Properties (and
// kmirror's reader) read back unchanged.
func escapeKey(s string) string { return escapeProps(s, true) }

func escapeValue(s string) string { return escapeProps(s, false) }

func escapeProps(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		case ' ':
			if key || i == 0 {
				b.WriteString(`\ `)
			} else {
				b.WriteRune(r)
			}
		case '=', ':', '#', '!':
			if key {
				b.WriteRune('\\')
			}
			b.WriteRune(r)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// origin returns the position in the user's files or flags that supplied a
// generated key.
func (tr *mm1Translation) origin(key string) (mm2Line, bool) {
	for _, l := range tr.lines {
		if l.key == key {
			return l, true
		}
	}
	return mm2Line{}, false
}

// check validates the generated configuration as "kmirror run" will, and
// the client properties as the flow will when it starts, naming the user's
// files and flags in errors. It returns the keys kmirror does not use.
func (tr *mm1Translation) check(o *mm1Options) (unused []string, err error) {
	cfg, err := config.Parse("kmirror mm1", tr.properties(false), nil)
	if err != nil {
		return nil, tr.mapConfigErrors(err)
	}
	f, err := cfg.Pair(o.source, o.target)
	if err != nil {
		return nil, tr.mapConfigErrors(err)
	}
	var errs []string
	for _, c := range []struct {
		role  clients.Role
		props map[string]string
		alias string
		name  string
	}{
		{clients.Consumer, f.SourceConsumer, o.source, "consumer"},
		{clients.Producer, f.TargetProducer, o.target, "producer"},
	} {
		if _, err := clients.RoleOptions(c.role, c.props); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				errs = append(errs, tr.clientErrorAt(line, c.alias, c.name))
			}
		}
		for _, k := range clients.Unused(c.role, c.props) {
			if l, ok := tr.userLine(k, c.alias, c.name); ok {
				unused = append(unused, l.origin+": "+l.userKey)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	sort.Strings(unused)
	return unused, nil
}

// userLine finds the user's line behind a client key of alias's role.
func (tr *mm1Translation) userLine(k, alias, role string) (mm2Line, bool) {
	for _, key := range []string{alias + "." + role + "." + k, alias + "." + k} {
		if l, ok := tr.origin(key); ok && l.userKey != "" {
			return l, true
		}
	}
	return mm2Line{}, false
}

// clientErrorAt prefixes a client error "key: message" with the file and
// line of key.
func (tr *mm1Translation) clientErrorAt(msg, alias, role string) string {
	if k, _, ok := strings.Cut(msg, ":"); ok {
		if l, ok := tr.userLine(k, alias, role); ok {
			return l.origin + ": " + msg
		}
	}
	return role + " properties: " + msg
}

// mapConfigErrors rewrites config errors about generated keys so that they
// name the user's file and line, or flag.
func (tr *mm1Translation) mapConfigErrors(err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var out []string
	for _, e := range list {
		var ce *config.Error
		if errors.As(e, &ce) {
			if l, ok := tr.origin(ce.Key); ok {
				key := l.userKey
				if key == "" {
					key = ce.Key
				}
				out = append(out, fmt.Sprintf("%s: %s: %s", l.origin, key, ce.Msg))
				continue
			}
		}
		out = append(out, e.Error())
	}
	return errors.New(strings.Join(out, "\n"))
}

// readClientFile reads a Java client properties file for flagName.
func readClientFile(flagName, path string) (*config.Properties, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	p, err := config.ParseProperties(path, data)
	if err != nil {
		return nil, err
	}
	if _, ok := p.Get("bootstrap.servers"); !ok {
		return nil, fmt.Errorf("%s: bootstrap.servers is missing", path)
	}
	return p, nil
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
	cons, err := readClientFile("consumer.config", o.consumerConfig)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	prod, err := readClientFile("producer.config", o.producerConfig)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	tr, err := translateMM1(o, cons, prod)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	unused, err := tr.check(o)
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1: invalid configuration:")
		fmt.Fprintln(stderr, err)
		return 1
	}
	if o.printConfig {
		stdout.Write(tr.properties(true))
		return 0
	}
	return runMM1(o, tr, unused, log, stdout, stderr)
}

// runMM1 writes the generated configuration to a private temporary file and
// runs it exactly as "kmirror run" does. The file is removed on exit.
func runMM1(o *mm1Options, tr *mm1Translation, unused []string, log *slog.Logger, stdout, stderr io.Writer) int {
	for _, n := range append(o.notes, tr.notes...) {
		log.Info(n)
	}
	if len(unused) > 0 {
		log.Info("client keys kmirror does not apply", "keys", strings.Join(unused, ", "))
	}
	if _, ok := tr.origin(o.source + ".consumer.auto.offset.reset"); !ok {
		log.Info("partitions without saved progress start at the log start (auto.offset.reset=earliest); MM1's consumer would start at the end")
	}
	log.Info("mirroring as MirrorMaker 1 would", "topics", o.topics, "from", o.consumerConfig, "to", o.producerConfig,
		"progress_topic", "mm2-offsets."+o.source+".internal")

	f, err := os.CreateTemp("", "kmirror-mm1-*.properties") // mode 0600
	if err != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", err)
		return 1
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(tr.properties(false))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		fmt.Fprintln(stderr, "kmirror mm1:", werr)
		return 1
	}
	return runCmd(append(o.runArgs, f.Name()), stdout, stderr)
}

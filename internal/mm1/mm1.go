// Package mm1 translates MirrorMaker 1's command line and client files
// into a one-way MM2 configuration that kmirror runs.
package mm1

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/policy"
)

// IdentityPolicy is the Java class kmirror names for MM1's topic naming.
const IdentityPolicy = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

// Options is the part of a MirrorMaker 1 command line that the
// translation reads.
type Options struct {
	ConsumerConfig, ProducerConfig string
	Topics                         string // --include/--whitelist after CleanTopicRegex
	TopicsFlag                     string // the flag Topics came from
	Exclude                        string // --blacklist after CleanTopicRegex
	CommitIntervalMs               string // "" when unset
	ReplicationFactor              string // "" when unset
	Source, Target                 string // cluster aliases
}

// Sets reports whether the translation sets key.
func (tr *Translation) Sets(key string) bool {
	_, ok := tr.origin(key)
	return ok
}

// CleanTopicRegex applies MM1's clean-up of --include: commas mean "or",
// spaces and surrounding quotes are dropped. A lone "*", which Java rejects
// but which MM1 guides suggest, means every topic.
func CleanTopicRegex(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "|")
	s = strings.ReplaceAll(s, " ", "")
	s = strings.TrimLeft(s, `"'`)
	s = strings.TrimRight(s, `"'`)
	if s == "*" {
		return ".*"
	}
	return s
}

// line is one key of the generated MM2 file and where it came from.
type line struct {
	key, value string
	origin     string        // "FILE:LINE" or a flag
	at         config.Origin // the same, as a position (and the user's key)
	userKey    string        // the key in the user's file, if any
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

// Translation is the generated MM2 configuration.
type Translation struct {
	lines    []line
	Notes    []string // what the user should know about the translation
	Warnings []string // what in the user's files is probably a mistake
	// ConfigWarnings are the warnings "kmirror run" gives for the generated
	// configuration, set by Check; they name the user's files and lines.
	ConfigWarnings []string
}

// Translate turns the options and the two client files into MM2 keys.
func Translate(o *Options, cons, prod *config.Properties) (*Translation, error) {
	tr := &Translation{}
	tr.addFlagLines(o)
	providers := map[string]line{}
	files := []clientFile{
		{o.ConsumerConfig, cons, o.Source, "consumer", droppedConsumerKeys},
		{o.ProducerConfig, prod, o.Target, "producer", droppedProducerKeys},
	}
	for _, f := range files {
		if err := tr.addClientFile(f, o.Source, o.Target, providers); err != nil {
			return nil, err
		}
	}
	return tr, nil
}

// clientFile is one of MM1's client files and the cluster it configures.
type clientFile struct {
	path    string
	props   *config.Properties
	alias   string
	role    string
	dropped map[string]string
}

// add appends a generated key with the flag or "FILE:LINE" that supplied it.
func (tr *Translation) add(key, value, origin string) {
	at := config.Origin{File: origin}
	if f, n, ok := splitPosition(origin); ok {
		at = config.Origin{File: f, Line: n}
	} else if gen, _, ok := strings.Cut(origin, ":"); ok && gen == "kmirror mm1" {
		at.File = gen // the note after the colon is for --print-config only
	}
	tr.lines = append(tr.lines, line{key: key, value: value, origin: origin, at: at})
}

// addFlagLines adds the keys that MM1's behaviour and command line set.
func (tr *Translation) addFlagLines(o *Options) {
	s, t := o.Source, o.Target
	tr.add("clusters", s+", "+t, "kmirror mm1")
	tr.add(s+"->"+t+".enabled", "true", "kmirror mm1")
	tr.add("replication.policy.class", IdentityPolicy, "kmirror mm1: MM1 keeps topic names")
	tr.add(s+"->"+t+".topics", o.Topics, o.TopicsFlag)
	if o.Exclude != "" {
		// MM2's default exclusions stay: internal topics are never mirrored.
		tr.add(s+"->"+t+".topics.exclude", o.Exclude+", "+strings.Join(policy.DefaultTopicsExclude, ", "), "--blacklist")
	}
	tr.add(s+"->"+t+".emit.checkpoints.enabled", "false", "kmirror mm1: MM1 has no checkpoints")
	tr.add(s+"->"+t+".emit.heartbeats.enabled", "false", "kmirror mm1: MM1 has no heartbeats")
	tr.add(t+"->"+s+".emit.heartbeats.enabled", "false", "kmirror mm1: nothing is written to the source")
	tr.add(s+"->"+t+".sync.topic.acls.enabled", "false", "kmirror mm1: MM1 leaves ACLs alone")
	tr.add(s+"->"+t+".sync.topic.configs.enabled", "false", "kmirror mm1: MM1 leaves topic configs alone")
	tr.add(s+"->"+t+".heartbeats.replication.enabled", "false", "kmirror mm1: MM1 copies only the whitelist")
	if o.CommitIntervalMs != "" {
		tr.add(t+".offset.flush.interval.ms", o.CommitIntervalMs, "--offset.commit.interval.ms")
	}
	if rf := o.ReplicationFactor; rf != "" {
		for _, k := range []string{"replication.factor", "offset.storage.replication.factor",
			"offset-syncs.topic.replication.factor", "checkpoints.topic.replication.factor",
			"heartbeats.topic.replication.factor"} {
			tr.add(k, rf, "--replication.factor")
		}
	}
}

// addClientFile adds the keys of one client file of the flow s->t; config
// providers, shared by both files, are collected in providers.
func (tr *Translation) addClientFile(f clientFile, s, t string, providers map[string]line) error {
	var dropped []string
	for _, k := range f.props.Keys() {
		v, _ := f.props.Get(k)
		at := config.Origin{File: f.props.File(k), Line: f.props.Line(k), Key: k}
		origin := fmt.Sprintf("%s:%d", at.File, at.Line)
		l := line{value: v, origin: origin, at: at, userKey: k}
		if config.TrailingComment(v) != "" && f.dropped[k] != "" && (f.role != "consumer" || k != "group.id") {
			// Keys that reach the generated file are warned about by
			// config.Parse, at this position (see Check).
			tr.Warnings = append(tr.Warnings, origin+": "+config.TrailingCommentWarning(k, v))
		}
		switch {
		case k == "config.providers" || strings.HasPrefix(k, "config.providers."):
			if prev, ok := providers[k]; ok && prev.value != v {
				return fmt.Errorf("%s: %s: differs from %s", origin, k, prev.origin)
			} else if ok {
				continue
			}
			l.key = k
			providers[k] = l
		case f.role == "consumer" && k == "group.id":
			// MM1 replicated through this group: start where it stands.
			tr.lines = append(tr.lines, line{key: s + "->" + t + "." + config.StartGroupKey, value: v, origin: origin, at: at, userKey: k})
			tr.Notes = append(tr.Notes, fmt.Sprintf("%s: group.id %s: partitions without kmirror progress start at this group's committed offsets, as MM1 resumed; kmirror commits nothing to it", origin, v))
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
		tr.Notes = append(tr.Notes, fmt.Sprintf("%s: not used: %s", f.path, strings.Join(dropped, ", ")))
	}
	return nil
}

// Properties renders the translation as an MM2 properties file. With
// redact, secret values are replaced by [hidden].
func (tr *Translation) Properties(redact bool) []byte {
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

// splitPosition splits "FILE:LINE".
func splitPosition(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return s[:i], n, true
}

// Origins maps every generated key to the user's file and line, or flag,
// that supplied it. Registered with config.SetOrigins for the generated
// file, it makes "kmirror run"'s messages name the user's files.
func (tr *Translation) Origins() map[string]config.Origin {
	m := make(map[string]config.Origin, len(tr.lines))
	for _, l := range tr.lines {
		m[l.key] = l.at
	}
	return m
}

// origin returns the position in the user's files or flags that supplied a
// generated key.
func (tr *Translation) origin(key string) (line, bool) {
	for _, l := range tr.lines {
		if l.key == key {
			return l, true
		}
	}
	return line{}, false
}

// Check validates the generated configuration as "kmirror run" will, and
// the client properties as the flow will when it starts, naming the user's
// files and flags in errors. It returns the keys kmirror does not use.
func (tr *Translation) Check(o *Options) (unused []string, err error) {
	cfg, err := config.ParseWithOrigins("kmirror mm1", tr.Properties(false), nil, tr.Origins())
	if cfg != nil {
		tr.ConfigWarnings = cfg.Warnings
	}
	if err != nil {
		return nil, tr.mapConfigErrors(err)
	}
	f, err := cfg.Pair(o.Source, o.Target)
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
		{clients.Consumer, f.SourceConsumer, o.Source, "consumer"},
		{clients.Producer, f.TargetProducer, o.Target, "producer"},
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
func (tr *Translation) userLine(k, alias, role string) (line, bool) {
	for _, key := range []string{alias + "." + role + "." + k, alias + "." + k} {
		if l, ok := tr.origin(key); ok && l.userKey != "" {
			return l, true
		}
	}
	return line{}, false
}

// clientErrorAt prefixes a client error "key: message" with the file and
// line of key.
func (tr *Translation) clientErrorAt(msg, alias, role string) string {
	if k, _, ok := strings.Cut(msg, ":"); ok {
		if l, ok := tr.userLine(k, alias, role); ok {
			return l.origin + ": " + msg
		}
	}
	return role + " properties: " + msg
}

// mapConfigErrors rewrites config errors about generated keys so that they
// name the user's file and line, or flag.
func (tr *Translation) mapConfigErrors(err error) error {
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

// ReadClientFile reads a Java client properties file for flagName.
func ReadClientFile(flagName, path string) (*config.Properties, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	p, err := config.ParseProperties(path, data)
	if err != nil {
		return nil, err
	}
	if err := p.TwoKeysOnOneLine(); err != nil {
		return nil, err
	}
	if _, ok := p.Get("bootstrap.servers"); !ok {
		if _, zk := p.Get("zookeeper.connect"); zk {
			return nil, fmt.Errorf("%s:%d: zookeeper.connect is the old consumer's setting, which kmirror does not use; "+
				"bootstrap.servers is missing: give the source brokers as bootstrap.servers", path, p.Line("zookeeper.connect"))
		}
		return nil, fmt.Errorf("%s: bootstrap.servers is missing", path)
	}
	return p, nil
}

// Package config reads MirrorMaker 2 configuration files
// (connect-mirror-maker.properties) unchanged and turns them into validated,
// typed replication flows.
//
// It implements java.util.Properties parsing, Kafka config providers
// (${env:...}, ${file:...}, ${dir:...}), and MirrorMakerConfig's expansion
// of cluster-prefixed (A.key) and flow-prefixed (A->B.key) settings with
// MM2's precedence rules. kmirror's own kmirror.* keys are read here too,
// and each flow gets its replication policy and filters built once. Every
// problem is reported with its file, line and key before anything connects
// to a cluster.
//
// kmirror deviates from MM2 in one documented default:
// offset-syncs.topic.location is "target" unless set explicitly.
package config

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/policy"
)

// Config is a parsed and validated MM2 properties file.
type Config struct {
	Path     string
	Clusters []string // declared aliases, in file order
	// ClusterProps holds, per alias, MM2's clusterProps(alias): the A.*
	// keys with the prefix stripped, connection keys copied into producer.,
	// consumer. and admin., and top-level connection keys filled in.
	ClusterProps map[string]map[string]string
	// Flows holds every ordered pair A->B of declared clusters (A != B)
	// whose A->B.enabled is true, in declaration order.
	Flows    []*Flow
	Warnings []string
	Props    *Properties // raw keys, values after provider resolution
	REST     REST        // the kmirror.rest.* keys

	clusterSet map[string]bool
	clusters   map[string]layer // clusterProps with provenance
	warned     map[string]bool
}

// kv is a setting's value and the raw key that supplied it ("" for
// defaults filled in by MM2 itself).
type kv struct{ val, src string }

type layer map[string]kv

func (l layer) putIfAbsent(k string, v kv) {
	if _, ok := l[k]; !ok {
		l[k] = v
	}
}

func (l layer) strings() map[string]string {
	m := make(map[string]string, len(l))
	for k, v := range l {
		m[k] = v.val
	}
	return m
}

// Load reads and validates the MM2 properties file at path. lookupEnv
// resolves ${env:...} references; nil means os.LookupEnv.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, lookupEnv)
}

// Parse validates MM2 properties read from the file called name. When the
// file parses but fails validation, Parse returns the partly built Config
// (useful for its Warnings) together with all errors joined; each is a
// *Error.
func Parse(name string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return ParseWith(name, data, ParseOptions{LookupEnv: lookupEnv, Origins: originsOf(name)})
}

// ParseWithOrigins is Parse for a generated file: keys listed in origins
// are reported at those positions (see SetOrigins) instead of their lines
// in name.
func ParseWithOrigins(name string, data []byte, lookupEnv func(string) (string, bool), origins map[string]Origin) (*Config, error) {
	return ParseWith(name, data, ParseOptions{LookupEnv: lookupEnv, Origins: origins})
}

// ParseWith is Parse with options: o.Providers resolves ${...} references
// with the operator's providers (a connector config of kmirror connect).
func ParseWith(name string, data []byte, o ParseOptions) (*Config, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	props, err := parseProperties(name, data, o.Origins)
	if err != nil {
		return nil, err
	}
	c := &Config{Path: name, Props: props, ClusterProps: map[string]map[string]string{},
		clusterSet: map[string]bool{}, clusters: map[string]layer{}, warned: map[string]bool{}}
	var errs errorList
	for _, e := range props.twoKeys() {
		errs.add(e)
	}
	resolveProviders(props, name, o, &errs)
	c.parseClusters(&errs)
	c.parseREST(&errs)
	for _, k := range props.Keys() {
		c.checkKey(k, &errs)
		if v, _ := c.Props.Get(k); !c.Props.Resolved(k) && TrailingComment(v) != "" {
			c.warn(k, "%s", TrailingCommentWarning(c.Props.SourceKey(k), v))
		}
	}
	for _, a := range c.Clusters {
		c.clusters[a] = c.clusterLayer(a)
		c.ClusterProps[a] = c.clusters[a].strings()
	}
	for _, s := range c.Clusters {
		for _, t := range c.Clusters {
			if s == t {
				continue
			}
			f := c.buildFlow(s, t, &errs, true)
			if f.Enabled {
				c.Flows = append(c.Flows, f)
			}
		}
	}
	c.checkBootstrap(&errs)
	if len(c.Flows) == 0 {
		if len(errs.errs) == 0 {
			c.checkHeartbeatBootstrap(&errs)
		}
		for _, k := range props.Keys() {
			if kmirrorFlowKeys[k] {
				c.warn(k, "%q has no effect: no flow is enabled", k)
			}
		}
	}
	if len(c.Clusters) > 0 && len(c.Flows) == 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s: no flow is enabled: only heartbeats run, as in MirrorMaker 2 (set SOURCE->TARGET.enabled = true to replicate)", name))
	}
	sortByLine(c.Warnings)
	return c, errs.err()
}

// sortByLine orders "FILE:LINE: ..." warnings by line, keeping the order of
// equal lines and putting those without a line first.
func sortByLine(ws []string) {
	line := func(w string) int {
		_, rest, _ := strings.Cut(w, ":")
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest+":", ':')])
		return n
	}
	sort.SliceStable(ws, func(i, j int) bool { return line(ws[i]) < line(ws[j]) })
}

// Pair builds the flow source->target whether or not it is enabled (MM2
// runs heartbeats on disabled pairs too). Its settings are validated.
func (c *Config) Pair(source, target string) (*Flow, error) {
	for _, a := range []string{source, target} {
		if !c.clusterSet[a] {
			return nil, c.unknownAlias(a)
		}
	}
	if source == target {
		return nil, fmt.Errorf("flow %s->%s: source and target are the same cluster", source, target)
	}
	var errs errorList
	f := c.buildFlow(source, target, &errs, false)
	return f, errs.err()
}

// FlowsTargeting returns the enabled flows whose target is one of aliases
// (MM2's --clusters option).
func (c *Config) FlowsTargeting(aliases []string) ([]*Flow, error) {
	want := map[string]bool{}
	for _, a := range aliases {
		if !c.clusterSet[a] {
			return nil, c.unknownAlias(a)
		}
		want[a] = true
	}
	var out []*Flow
	for _, f := range c.Flows {
		if want[f.Target] {
			out = append(out, f)
		}
	}
	return out, nil
}

func (c *Config) unknownAlias(a string) error {
	return fmt.Errorf("unknown cluster alias %q (clusters = %s)", a, strings.Join(c.Clusters, ", "))
}

func (c *Config) file(key string) string {
	if f := c.Props.File(key); f != "" {
		return f
	}
	return c.Path
}

func (c *Config) errAt(key, format string, args ...any) *Error {
	return &Error{File: c.file(key), Line: c.Props.Line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// warn records one warning for key, positioned at its line.
func (c *Config) warn(key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	var w string
	if line := c.Props.Line(key); line > 0 {
		w = fmt.Sprintf("%s:%d: %s", c.file(key), line, msg)
	} else {
		w = fmt.Sprintf("%s: %s", c.file(key), msg)
	}
	if !c.warned[w] {
		c.warned[w] = true
		c.Warnings = append(c.Warnings, w)
	}
}

// show quotes key's value for a message, hiding secrets.
func (c *Config) show(key string) string {
	return strconv.Quote(c.Props.Display(key))
}

func (c *Config) parseClusters(errs *errorList) {
	v, ok := c.Props.Get("clusters")
	if !ok {
		errs.add(&Error{File: c.Path, Key: "clusters", Msg: "required key is missing (e.g. clusters = A, B)"})
		return
	}
	list := policy.ParseList(v)
	if len(list) == 0 {
		errs.add(c.errAt("clusters", "must name at least one cluster alias"))
	}
	for _, a := range list {
		switch {
		case a == "":
			errs.add(c.errAt("clusters", "empty cluster alias in %s", c.show("clusters")))
		case c.clusterSet[a]:
			c.warn("clusters", "cluster alias %q is listed twice", a)
		default:
			c.clusterSet[a] = true
			c.Clusters = append(c.Clusters, a)
		}
	}
}

// clusterLayer is MirrorMakerConfig.clusterProps(alias) with provenance.
func (c *Config) clusterLayer(alias string) layer {
	l := layer{}
	prefix := alias + "."
	for _, k := range c.Props.order {
		if strings.HasPrefix(k, prefix) {
			l[k[len(prefix):]] = kv{c.Props.m[k].value, k}
		}
	}
	var conn []string
	for k := range l {
		if IsClientConnectionKey(k) {
			conn = append(conn, k)
		}
	}
	sort.Strings(conn)
	for _, k := range conn {
		for _, p := range []string{"producer.", "consumer.", "admin."} {
			l.putIfAbsent(p+k, l[k])
		}
	}
	for _, k := range c.Props.order {
		if IsClientConnectionKey(k) {
			v := kv{c.Props.m[k].value, k}
			for _, p := range []string{"producer.", "consumer.", "admin.", ""} {
				l.putIfAbsent(p+k, v)
			}
		}
	}
	return l
}

// checkKey warns about keys kmirror does not know or MM2 ignores, and
// rejects flows naming undeclared clusters.
func (c *Config) checkKey(k string, errs *errorList) {
	switch {
	case k == "clusters" || strings.HasPrefix(k, providersKey+".") || IsClientConnectionKey(k):
	case mm2Keys[k] || strings.HasPrefix(k, "listeners.https.") || strings.HasPrefix(k, "admin.listeners.https."):
		if r := noEffect(k); r != "" {
			c.warn(k, "%q has no effect: %s", k, r)
		} else if !strings.HasPrefix(k, providersKey) {
			c.warn(k, "%q has no effect: MM2's REST server does not exist in kmirror", k)
		}
	case strings.HasPrefix(k, "kmirror."):
		c.checkKmirrorKey(k, k, false)
	case strings.Contains(k, "->"):
		c.checkFlowKey(k, errs)
	case c.declaredPrefix(k) != "":
		a := c.declaredPrefix(k)
		c.checkClusterKey(k, a, k[len(a)+1:])
	case deprecatedAliases[k] != "":
		c.warn(k, "%q is deprecated (removed in Kafka 4.0); use %q", k, deprecatedAliases[k])
	case removedKeys[k]:
		c.warn(k, "%q was removed in Kafka 4.0 and is ignored", k)
	case k == "enabled":
		c.warn(k, "top-level %q is ignored; enable flows with SOURCE->TARGET.enabled = true", k)
	case topLevelIgnored[k]:
		c.warn(k, "top-level %q is ignored", k)
	case connectorKeys[k] || hasAnyPrefix(k, workerPrefixes) ||
		hasAnyPrefix(k, []string{"transforms.", "predicates.", "errors.", "replication.policy."}):
		if r := noEffect(k); r != "" {
			c.warn(k, "%q has no effect: %s", k, r)
		}
	case flowOnlyKeys[k] || hasAnyPrefix(k, []string{"consumer.", "producer.", "admin.", "source.", "target."}):
		c.warn(k, "%q has no effect at top level in MirrorMaker 2; set it per flow (SOURCE->TARGET.%s) or per cluster (ALIAS.%s)", k, k, k)
	case workerKeys[k] && noEffect(k) != "":
		c.warn(k, "%q has no effect at top level in MirrorMaker 2, nor in kmirror anywhere: %s", k, noEffect(k))
	case workerKeys[k]:
		c.warn(k, "%q has no effect at top level in MirrorMaker 2; set it per target cluster as ALIAS.%s", k, k)
	case c.dashedFlow(k) != "":
		c.warn(k, "unknown key %q: did you mean %q? (a flow is written SOURCE->TARGET)", k, c.dashedFlow(k))
	default:
		if alias := undeclaredPrefix(k); alias != "" {
			c.warn(k, "key %q refers to cluster alias %q, which is not declared in clusters", k, alias)
			return
		}
		c.warn(k, "unknown key %q", k)
	}
}

// dashedFlow returns k with "->" for the "-" of a key like "A-B.enabled",
// where A and B are declared aliases (the ">" lost in copying), or "".
func (c *Config) dashedFlow(k string) string {
	for _, s := range c.Clusters {
		for _, t := range c.Clusters {
			if p := s + "-" + t + "."; s != t && strings.HasPrefix(k, p) && !c.clusterSet[s+"-"+t] {
				return s + "->" + t + "." + k[len(p):]
			}
		}
	}
	return ""
}

// TrailingComment returns the " # note" a value ends with, or "". In a
// properties file '#' starts a comment only at the start of a line, so such a
// note (common in articles) is part of the value.
func TrailingComment(v string) string {
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimSpace(v[i:])
		}
	}
	return ""
}

// TrailingCommentWarning says that key's value v holds a trailing comment;
// the comment is not shown for secret keys.
func TrailingCommentWarning(key, v string) string {
	what := strconv.Quote(TrailingComment(v))
	if IsSensitive(key) {
		what = `" #..."`
	}
	return fmt.Sprintf("%q: the value ends in %s, which is part of the value (a properties file has comments only on lines of their own); move the comment to a line of its own",
		key, what)
}

// declaredPrefix returns the declared alias k is prefixed with, if any.
func (c *Config) declaredPrefix(k string) string {
	for _, a := range c.Clusters {
		if strings.HasPrefix(k, a+".") {
			return a
		}
	}
	return ""
}

// undeclaredPrefix guesses the alias of a key like "X.bootstrap.servers".
func undeclaredPrefix(k string) string {
	for i := 0; i < len(k); i++ {
		if k[i] == '.' && i > 0 && isClusterKey(k[i+1:]) {
			return k[:i]
		}
	}
	return ""
}

// checkFlowKey validates a SOURCE->TARGET.key key.
func (c *Config) checkFlowKey(k string, errs *errorList) {
	for _, s := range c.Clusters {
		for _, t := range c.Clusters {
			p := s + "->" + t + "."
			if !strings.HasPrefix(k, p) {
				continue
			}
			suffix := k[len(p):]
			switch {
			case s == t:
				c.warn(k, "%q: a flow from a cluster to itself is ignored", k)
			case deprecatedAliases[suffix] != "":
				c.warn(k, "%q is deprecated (removed in Kafka 4.0); use %q", k, p+deprecatedAliases[suffix])
			case removedKeys[suffix]:
				c.warn(k, "%q was removed in Kafka 4.0 and is ignored", k)
			case strings.HasPrefix(suffix, "kmirror.") && c.pairEnabled(s, t):
				c.checkKmirrorKey(k, suffix, true)
			case !isFlowKey(suffix):
				c.warn(k, "unknown key %q", k)
			case !c.pairEnabled(s, t) && suffix != "enabled" && !heartbeatKey(suffix):
				c.warn(k, "%q has no effect: flow %s->%s is not enabled (only its heartbeats run)", k, s, t)
			case noEffect(suffix) != "":
				c.warn(k, "%q has no effect: %s", k, noEffect(suffix))
			}
			return
		}
	}
	i := strings.Index(k, "->")
	src, rest := k[:i], k[i+2:]
	tgt, suffix, _ := strings.Cut(rest, ".")
	var bad []string
	for _, a := range []string{src, tgt} {
		if !c.clusterSet[a] {
			bad = append(bad, strconv.Quote(a))
		}
	}
	if len(bad) == 0 { // e.g. "A->B" without a key
		c.warn(k, "unknown key %q", k)
		return
	}
	msg := fmt.Sprintf("unknown cluster alias %s (clusters = %s)", strings.Join(bad, ", "), strings.Join(c.Clusters, ", "))
	if v, _ := c.Props.Get(k); suffix == "enabled" && strings.EqualFold(strings.TrimSpace(v), "true") {
		errs.add(c.errAt(k, "%s", msg))
		return
	}
	c.warn(k, "%q: %s; ignored", k, msg)
}

// checkBootstrap requires bootstrap servers for every cluster an enabled
// flow uses.
func (c *Config) checkBootstrap(errs *errorList) {
	done := map[string]bool{}
	for _, f := range c.Flows {
		for _, a := range []string{f.Source, f.Target} {
			if done[a] {
				continue
			}
			done[a] = true
			key := a + ".bootstrap.servers"
			v, ok := c.clusters[a]["bootstrap.servers"]
			flowKey := f.Name() + ".enabled"
			switch {
			case !ok:
				e := c.errAt(flowKey, "missing: cluster %q is used by flow %s but has no bootstrap servers", a, f.Name())
				e.Key = key
				errs.add(e)
			case strings.TrimSpace(v.val) == "":
				errs.add(c.errAt(v.src, "is empty"))
			case v.src != key:
				c.warn(v.src, "cluster %q has no %s; using top-level %s", a, key, v.src)
			}
		}
	}
}

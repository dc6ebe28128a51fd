package connect

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/runner"
)

// The connector classes kmirror runs, by their full names.
const (
	SourceClass     = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
	CheckpointClass = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
	HeartbeatClass  = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"
)

// classOf resolves connector.class as Connect does: the full name, the
// simple name or the simple name without "Connector".
func classOf(v string) (string, bool) {
	for _, c := range []string{SourceClass, CheckpointClass, HeartbeatClass} {
		simple := c[strings.LastIndex(c, ".")+1:]
		if v == c || v == simple || v == strings.TrimSuffix(simple, "Connector") {
			return c, true
		}
	}
	return "", false
}

// connectKeys are keys of every Connect connector that carry no MM2
// setting; kmirror accepts and ignores them.
func connectKey(k string) bool {
	switch k {
	case "name", "connector.class", "tasks.max", "key.converter", "value.converter", "header.converter",
		"config.action.reload", "errors.retry.timeout", "errors.retry.delay.max.ms", "errors.tolerance",
		"errors.log.enable", "errors.log.include.messages", "transforms", "predicates",
		"exactly.once.support", "transaction.boundary", "offsets.storage.topic":
		return true
	}
	return strings.HasPrefix(k, "key.converter.") || strings.HasPrefix(k, "value.converter.") ||
		strings.HasPrefix(k, "header.converter.") || strings.HasPrefix(k, "topic.creation.")
}

// CheckName refuses connector names that Connect refuses (empty, or with
// ISO control characters: ConnectorConfig's NonEmptyStringWithoutControlChars)
// and those that would break a URL path or a file name: '/', '\\', "..",
// more than 249 bytes. The error does not repeat the name.
func CheckName(name string) error {
	bad := strings.TrimSpace(name) == "" || len(name) > 249 || !utf8.ValidString(name) ||
		strings.ContainsAny(name, "/\\") || strings.Contains(name, "..")
	for _, r := range name {
		bad = bad || unicode.IsControl(r)
	}
	if bad {
		return errors.New("Connector name must be non-empty, at most 249 bytes, without ISO control characters, '/', '\\' or '..'")
	}
	return nil
}

// Spec is a connector config translated to a kmirror flow.
type Spec struct {
	Class       string
	Flow        *config.Flow
	Heartbeats  bool // the flow only emits heartbeats (MirrorHeartbeatConnector)
	Checkpoints bool // the flow only emits checkpoints (MirrorCheckpointConnector)
	Warnings    []string
}

// Kind is what the runner runs for the spec.
func (s *Spec) Kind() runner.Kind {
	switch {
	case s.Heartbeats:
		return runner.Heartbeats
	case s.Checkpoints:
		return runner.Checkpoints
	}
	return runner.Replication
}

// FieldError is a problem with one key of a connector config.
type FieldError struct {
	Key, Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

// Errors lists the problems of a connector config, one per key.
type Errors []*FieldError

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Translate turns connector name's config into a flow. The source and
// target clusters are named by source.cluster.alias and
// target.cluster.alias; source.cluster.* and target.cluster.* keys are
// those clusters' settings, other keys the flow's, all checked as in an
// MM2 file. target.cluster.bootstrap.servers defaults to the worker's
// cluster (w.Client), as a Connect worker usually sits at the target. A
// source connector runs the flow in kmirror's group mode, so every worker
// takes a share of the partitions; of a checkpoint connector's workers,
// one leads and runs the checkpoints. ${...} references resolve with the
// worker file's providers (w.Providers) only: a config.providers* key in
// props is an error (CVE-2024-31141). Errors are Errors, without values.
func Translate(name string, props map[string]string, w *Worker) (*Spec, error) {
	class, src, tgt, errs := checkConnector(name, props)
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	text, origin := flowProps(name, props, w, class, src, tgt)
	// ${...} references resolve with the worker file's providers only.
	providers := w.Providers
	if providers == nil {
		providers = &config.Providers{}
	}
	cfg, err := config.ParseWith("connector "+name, text, config.ParseOptions{LookupEnv: os.LookupEnv, Providers: providers})
	if err != nil {
		return nil, fieldErrors(err, origin)
	}
	spec := &Spec{Class: class, Heartbeats: class == HeartbeatClass, Checkpoints: class == CheckpointClass, Warnings: cfg.Warnings}
	if spec.Heartbeats {
		spec.Flow, err = cfg.Pair(src, tgt)
		if err != nil {
			return nil, Errors{{"config", err.Error()}}
		}
		return spec, nil
	}
	pair := src + "->" + tgt
	if len(cfg.Flows) != 1 {
		return nil, Errors{{"config", "no flow " + pair}}
	}
	spec.Flow = cfg.Flows[0]
	return spec, nil
}

// checkConnector checks the keys Translate needs before it builds a flow:
// the class, the name and the cluster aliases. It returns the class, the
// trimmed aliases and the problems found, unsorted.
func checkConnector(name string, props map[string]string) (class, src, tgt string, errs Errors) {
	class, ok := classOf(props["connector.class"])
	switch {
	case props["connector.class"] == "":
		errs = append(errs, &FieldError{"connector.class", "missing"})
	case !ok:
		errs = append(errs, &FieldError{"connector.class", fmt.Sprintf("%q is not a connector kmirror runs (MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector)", props["connector.class"])})
	}
	if name != "" {
		if err := CheckName(name); err != nil {
			errs = append(errs, &FieldError{"name", err.Error()})
		}
	}
	if n, ok := props["name"]; ok && n != name {
		errs = append(errs, &FieldError{"name", fmt.Sprintf("%q differs from the connector's name %q", n, name)})
	}
	src, tgt = strings.TrimSpace(props["source.cluster.alias"]), strings.TrimSpace(props["target.cluster.alias"])
	for k, v := range map[string]string{"source.cluster.alias": src, "target.cluster.alias": tgt} {
		if v == "" {
			errs = append(errs, &FieldError{k, "missing"})
		} else if strings.ContainsAny(v, " ,=:\\>") || strings.Contains(v, "->") {
			errs = append(errs, &FieldError{k, "an alias may not hold spaces, commas, '=', ':', '\\' or '>'"})
		}
	}
	for k := range props {
		if config.IsProviderKey(k) {
			errs = append(errs, &FieldError{k, config.OperatorProvidersOnly})
		}
	}
	if src != "" && src == tgt {
		errs = append(errs, &FieldError{"target.cluster.alias", "equals source.cluster.alias"})
	}
	if props["source.cluster.bootstrap.servers"] == "" {
		errs = append(errs, &FieldError{"source.cluster.bootstrap.servers", "missing"})
	}
	return class, src, tgt, errs
}

// flowProps writes the MM2 properties of the connector's flow from src to
// tgt. It also returns, for each property taken from a connector key, that
// key.
func flowProps(name string, props map[string]string, w *Worker, class, src, tgt string) ([]byte, map[string]string) {
	pair := src + "->" + tgt
	var b propsText
	origin := map[string]string{} // generated key -> connector key
	b.put("clusters", src+", "+tgt)
	if _, ok := props["target.cluster.bootstrap.servers"]; !ok {
		for k, v := range w.Client {
			b.put(tgt+"."+k, v)
		}
	}
	for k, v := range w.Offsets {
		if _, ok := props["target.cluster."+k]; !ok {
			b.put(tgt+"."+k, v)
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var gen string
		switch {
		case connectKey(k) || k == "source.cluster.alias" || k == "target.cluster.alias":
			continue
		case strings.HasPrefix(k, "source.cluster."):
			gen = src + "." + strings.TrimPrefix(k, "source.cluster.")
		case strings.HasPrefix(k, "target.cluster."):
			gen = tgt + "." + strings.TrimPrefix(k, "target.cluster.")
		default:
			gen = pair + "." + k
		}
		origin[gen] = k
		b.put(gen, props[k])
	}
	putClassDefaults(&b, class, pair, props, "kmirror-connect-"+w.GroupID+"-"+name)
	return b.bytes(), origin
}

// putClassDefaults writes the settings the connector's class implies for
// the flow pair, each unless props sets the key; groupID is the default
// workers group.
func putClassDefaults(b *propsText, class, pair string, props map[string]string, groupID string) {
	def := func(k, v string) {
		if _, ok := props[k]; !ok {
			b.put(pair+"."+k, v)
		}
	}
	switch class {
	case HeartbeatClass:
		b.put(pair+".enabled", "false")
	case CheckpointClass:
		// The flow only runs its checkpoint task (flow.RunCheckpointsOnly);
		// emit.checkpoints.enabled keeps MM2's default, true.
		// In group mode one worker of the connector's group runs it.
		b.put(pair+".enabled", "true")
		def("emit.heartbeats.enabled", "false")
		def(config.WorkersKey, "group")
		def(config.WorkersGroupIDKey, groupID)
	default:
		b.put(pair+".enabled", "true")
		// In Connect, checkpoints and heartbeats are the other two
		// connectors' work.
		def("emit.checkpoints.enabled", "false")
		def("sync.group.offsets.enabled", "false")
		def("emit.heartbeats.enabled", "false")
		def(config.WorkersKey, "group")
		def(config.WorkersGroupIDKey, groupID)
	}
}

// fieldErrors turns the errors of parsing a connector's flow properties
// into Errors on the connector's keys, sorted by key.
func fieldErrors(err error, origin map[string]string) Errors {
	var out Errors
	for _, e := range unwrap(err) {
		var ce *config.Error
		if errors.As(e, &ce) {
			k := origin[ce.Key]
			if k == "" {
				k = ce.Key
			}
			out = append(out, &FieldError{k, ce.Msg})
		} else {
			out = append(out, &FieldError{"config", e.Error()})
		}
	}
	sortErrors(out)
	return out
}

func unwrap(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Key < es[j].Key })
}

// propsText writes Java properties, one key a line.
type propsText struct{ sb strings.Builder }

func (p *propsText) put(k, v string) {
	p.sb.WriteString(escape(k, true))
	p.sb.WriteString(" = ")
	p.sb.WriteString(escape(v, false))
	p.sb.WriteByte('\n')
}

func (p *propsText) bytes() []byte { return []byte(p.sb.String()) }

// escape writes s so that a Java properties reader reads s back.
func escape(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\f':
			b.WriteString(`\f`)
		case (r == ' ' && (key || i == 0)) || (key && (r == '=' || r == ':' || r == '#' || r == '!')):
			b.WriteByte('\\')
			b.WriteRune(r)
		case !key && i == 0 && (r == '#' || r == '!'):
			b.WriteRune(r) // not at a line start: the key and " = " precede it
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kmirror/kmirror/internal/clients"
)

// This file makes sure no key passes silently: keys MM2 honours but kmirror
// has no use for get one warning each saying why, and client keys under a
// cluster or flow prefix are checked against the Java clients' names.

// ignoredKeys are connector and worker keys MM2 honours that have no effect
// in kmirror, with the reason.
var ignoredKeys = map[string]string{
	"tasks.max":                           "kmirror copies all partitions of a flow in one process; share a flow between processes with kmirror.workers = group",
	"tasks.max.enforce":                   "kmirror runs no Connect tasks",
	"metric.reporters":                    "Java metric reporters do not run in kmirror; serve Prometheus metrics with --metrics-addr",
	"admin.timeout.ms":                    "kmirror's admin requests use the admin client's own timeouts (admin.request.timeout.ms)",
	"consumer.poll.timeout.ms":            "kmirror fetches continuously and does not poll",
	"offsets.storage.topic":               "kmirror keeps a flow's progress in the target worker's offset.storage.topic; per-connector offsets topics are not supported",
	"transaction.boundary.interval.ms":    "kmirror commits a transaction every offset.flush.interval.ms or 5000 records",
	"config.action.reload":                "kmirror reloads its file on SIGHUP or POST /reload",
	"offset.flush.timeout.ms":             "kmirror waits for the records in flight before each progress save",
	"dedicated.mode.enable.internal.rest": "kmirror has no Connect REST API; its own API is kmirror.rest.listener",
	"listeners":                           "MM2's REST server does not exist in kmirror; its own API is kmirror.rest.listener",
	"admin.listeners":                     "MM2's REST server does not exist in kmirror; its own API is kmirror.rest.listener",
	"rest.advertised.host.name":           "MM2's REST server does not exist in kmirror",
	"rest.advertised.port":                "MM2's REST server does not exist in kmirror",
	"rest.advertised.listener":            "MM2's REST server does not exist in kmirror",
	"rest.host.name":                      "MM2's REST server does not exist in kmirror",
	"rest.port":                           "MM2's REST server does not exist in kmirror",
	"access.control.allow.origin":         "MM2's REST server does not exist in kmirror",
	"access.control.allow.methods":        "MM2's REST server does not exist in kmirror",
	"response.http.headers.config":        "MM2's REST server does not exist in kmirror",
	"predicates":                          "predicates belong to single message transforms, which kmirror does not support",
}

// honouredWorkerKeys are the Connect worker keys kmirror reads.
var honouredWorkerKeys = set("exactly.once.source.support", "offset.flush.interval.ms",
	"offset.storage.topic", "offset.storage.partitions", "offset.storage.replication.factor")

const connectWorker = "it is a Connect worker setting (kmirror connect takes it in its worker file)"

// noEffect returns why connector or worker key k has no effect in kmirror,
// or "" when kmirror honours it (or another check reports it).
func noEffect(k string) string {
	if r, ok := ignoredKeys[k]; ok {
		return r
	}
	switch {
	case hasAnyPrefix(k, []string{"status.storage.", "config.storage."}):
		return "kmirror run writes no Connect status or config topics (kmirror connect keeps connectors in its worker file's config.storage.topic)"
	case hasAnyPrefix(k, []string{"errors."}):
		return "Connect's error handling does not apply: kmirror stops the failing partition and names the record"
	case hasAnyPrefix(k, []string{"predicates."}):
		return "predicates belong to single message transforms, which kmirror does not support"
	case strings.HasSuffix(k, ".plugin.version") || k == "plugin.path" || k == "plugin.discovery":
		return "kmirror loads no Connect plugins"
	case hasAnyPrefix(k, []string{"key.converter.", "value.converter.", "header.converter."}):
		return "kmirror always copies raw bytes"
	case workerKeys[k] && !honouredWorkerKeys[k],
		hasAnyPrefix(k, []string{"task.", "worker.", "inter.worker.", "metrics.", "topic.tracking.", "topic.creation."}):
		return connectWorker
	}
	return ""
}

// checkClusterKey checks ALIAS.suffix.
func (c *Config) checkClusterKey(k, alias, suffix string) {
	switch {
	case strings.HasPrefix(suffix, "producer.") && !c.targeted(alias):
		c.warn(k, "%q has no effect: no enabled flow writes to cluster %s (kmirror writes offset syncs to a source with its admin settings)", k, alias)
	case IsClientConnectionKey(suffix), hasAnyPrefix(suffix, []string{"consumer.", "producer.", "admin."}):
		// checked with the clients of the flows (checkClientKeys)
	case suffix == "kmirror" || strings.HasPrefix(suffix, "kmirror."):
		c.warn(k, "%q has no effect: kmirror keys are read at top level or per flow (SOURCE->TARGET.%s), not per cluster", k, suffix)
	case honouredWorkerKeys[suffix]:
	case noEffect(suffix) != "":
		c.warn(k, "%q has no effect: %s", k, noEffect(suffix))
	case isJavaClientKey("consumer", suffix) || isJavaClientKey("producer", suffix) || isJavaClientKey("admin", suffix):
		c.warn(k, "%q has no effect: MM2 gives it to the Connect worker's clients only; kmirror's clients take %s.consumer.%s, %s.producer.%s or %s.admin.%s",
			k, alias, suffix, alias, suffix, alias, suffix)
	case connectorKeys[suffix] || flowOnlyKeys[suffix]:
		c.warn(k, "%q has no effect: connector settings are read at top level or per flow (SOURCE->TARGET.%s), not per cluster", k, suffix)
	default:
		c.warn(k, "unknown key %q%s", k, didYouMean(suffix, alias+".", clusterKeyNames()))
	}
}

// clusterKeyNames lists what may follow "ALIAS." (for suggestions).
func clusterKeyNames() []string {
	var out []string
	for k := range workerKeys {
		out = append(out, k)
	}
	for k := range javaClientCommon {
		if IsClientConnectionKey(k) {
			out = append(out, k)
		}
	}
	return out
}

// clientRole is one client kmirror builds for a flow, with the settings it
// was assembled from.
type clientRole struct {
	role  clients.Role
	java  string // producer, consumer or admin
	props layer
	typed map[string]bool // keys checked by clientValues instead
}

// checkClientKeys warns about every key of the flow's clients that kmirror
// does not apply: Java client keys without an equivalent, and names the
// Java client does not know (typos).
func (b *builder) checkClientKeys(roles []clientRole) {
	if !b.record {
		return
	}
	for _, r := range roles {
		b.clientErrors(r)
		unused := clients.Unused(r.role, r.props.strings())
		for _, k := range unused {
			raw := r.props[k].src
			if raw == "" {
				continue // set by kmirror itself
			}
			if r.role == clients.Consumer && (k == "session.timeout.ms" || k == "heartbeat.interval.ms") {
				// The workers' group consumer reads these (flow.groupHooks).
				if b.f.Workers != Group && strings.HasPrefix(raw, b.f.Source+".") {
					b.c.warn(raw, "%q has no effect: only a flow with kmirror.workers = group uses a consumer group", raw)
				}
				continue
			}
			if !isJavaClientKey(r.java, k) {
				b.c.warn(raw, "unknown %s key %q%s", r.java, raw, didYouMean(k, raw[:len(raw)-len(k)], javaNames(r.java)))
				continue
			}
			b.c.warn(raw, "%q has no effect: %s", raw, clientNoEffect(k, r.props))
		}
		if v, ok := r.props["isolation.level"]; ok && r.role == clients.Consumer && v.src != "" &&
			!strings.EqualFold(javaTrim(v.val), "read_committed") && strings.HasPrefix(v.src, b.f.Source+".") {
			b.c.warn(v.src, "%q has no effect: kmirror copies committed records only (read_committed)", v.src)
		}
	}
}

// clientNoEffect says why kmirror's client does not apply Java client key k.
func clientNoEffect(k string, props layer) string {
	switch {
	case strings.HasSuffix(k, "serializer"):
		return "kmirror copies raw bytes"
	case strings.HasSuffix(k, ".class") || strings.HasSuffix(k, ".classes") || k == "metric.reporters" || k == "security.providers" || k == "config.providers":
		return "kmirror cannot load Java classes"
	case k == "batch.size":
		return "franz-go fills batches up to max.request.size; set max.request.size instead"
	case k == "send.buffer.bytes" || k == "receive.buffer.bytes":
		return "kmirror leaves socket buffer sizes to the operating system"
	case k == "enable.auto.commit" || k == "auto.commit.interval.ms":
		return "kmirror never commits consumer offsets; progress goes to the offsets topic"
	case k == "group.id" || k == "group.instance.id" || k == "group.protocol" || k == "group.remote.assignor":
		return "kmirror's consumers assign partitions themselves (kmirror.workers.group.id names the workers' group)"
	case strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl."):
		p := strings.ToUpper(javaTrim(props["security.protocol"].val))
		if p == "" {
			p = "PLAINTEXT"
		}
		return fmt.Sprintf("not used with security.protocol %s, or not supported by kmirror (TLS with PEM or JKS/PKCS12 files; SASL PLAIN and SCRAM through sasl.jaas.config)", p)
	}
	return "kmirror's Kafka client (franz-go) has no equivalent"
}

// javaNames lists the config names of the Java client of role.
func javaNames(role string) []string {
	only := map[string]map[string]bool{"producer": javaProducerOnly, "consumer": javaConsumerOnly, "admin": javaAdminOnly}[role]
	out := make([]string, 0, len(javaClientCommon)+len(only))
	for _, m := range []map[string]bool{javaClientCommon, only} {
		for k := range m {
			out = append(out, k)
		}
	}
	return out
}

// didYouMean suggests the known name closest to k (prefixed by prefix), if
// it is close enough to be a typo.
func didYouMean(k, prefix string, known []string) string {
	sort.Strings(known)
	best := Suggest(k, known)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", prefix+best)
}

// Suggest returns the name in known closest to k, or "" when none is
// close enough to be a typo.
func Suggest(k string, known []string) string {
	best, bestD := "", max(3, len(k)/6+1)
	for _, n := range known {
		if d := editDistance(k, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// pairEnabled reports whether SOURCE->TARGET.enabled is true in the file.
func (c *Config) pairEnabled(s, t string) bool {
	v, _ := c.Props.Get(s + "->" + t + ".enabled")
	return strings.EqualFold(javaTrim(v), "true")
}

// targeted reports whether an enabled flow writes to cluster alias.
func (c *Config) targeted(alias string) bool {
	for _, s := range c.Clusters {
		if s != alias && c.pairEnabled(s, alias) {
			return true
		}
	}
	return false
}

// heartbeatKey reports whether flow key k may matter to a pair that only
// emits heartbeats: its heartbeat settings and the target's producer and
// admin settings, which its heartbeat client uses.
func heartbeatKey(k string) bool {
	return strings.Contains(k, "heartbeats") || IsClientConnectionKey(k) ||
		hasAnyPrefix(k, []string{"producer.", "admin.", "target.", "replication.policy.", "config.providers"})
}

// clientErrors reports, at load, the tuning values kmirror's client would
// refuse when the flow starts (numbers, enums), at the line of the key that
// set them. Connection and security settings (which read files) are
// checked when the flow connects.
func (b *builder) clientErrors(r clientRole) {
	_, err := clients.RoleOptions(r.role, r.props.strings())
	if err == nil {
		return
	}
	for _, msg := range strings.Split(err.Error(), "\n") {
		key, rest, _ := strings.Cut(msg, ": ")
		if v, ok := r.props[key]; ok && v.src != "" && !r.typed[key] && !IsClientConnectionKey(key) && !IsSensitive(key) {
			if b.c.Props.Resolved(v.src) {
				rest = "invalid value " + b.show(r.props, key)
			}
			b.fail(r.props, key, "%s", rest)
		}
	}
}

// checkHeartbeatBootstrap requires bootstrap servers for every cluster when
// no flow is enabled but heartbeats run (MM2's heartbeat-only herders).
func (c *Config) checkHeartbeatBootstrap(errs *errorList) {
	if v, ok := c.Props.Get("emit.heartbeats.enabled"); ok && strings.EqualFold(javaTrim(v), "false") {
		return
	}
	for _, a := range c.Clusters {
		if v, ok := c.clusters[a]["bootstrap.servers"]; !ok || javaTrim(v.val) == "" {
			errs.add(c.errAt("clusters", "cluster %q has no %s.bootstrap.servers; with no flow enabled kmirror still writes heartbeats to every cluster, as MM2 does", a, a))
		}
	}
}

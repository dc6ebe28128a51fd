package config

import "strings"

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// connectorKeys are the names defined by the three MM2 connector ConfigDefs
// plus Connect's ConnectorConfig (MirrorMakerConfig.allConfigNames). At top
// level MM2 passes exactly these keys to every connector.
var connectorKeys = set(
	// ConnectorConfig
	"name", "connector.class", "tasks.max", "tasks.max.enforce",
	"key.converter", "value.converter", "header.converter",
	"transforms", "predicates", "config.action.reload",
	"errors.retry.timeout", "errors.retry.delay.max.ms", "errors.tolerance",
	"errors.log.enable", "errors.log.include.messages",
	"connector.plugin.version", "key.converter.plugin.version",
	"value.converter.plugin.version", "header.converter.plugin.version",
	// MirrorConnectorConfig
	"enabled", "source.cluster.alias", "target.cluster.alias", "admin.timeout.ms",
	"replication.policy.class", "replication.policy.separator",
	"replication.policy.internal.topic.separator.enabled",
	"forwarding.admin.class", "metric.reporters",
	// MirrorSourceConfig
	"topics", "topics.exclude", "config.properties.exclude",
	"topic.filter.class", "config.property.filter.class", "consumer.poll.timeout.ms",
	"refresh.topics.enabled", "refresh.topics.interval.seconds",
	"sync.topic.configs.enabled", "sync.topic.configs.interval.seconds",
	"sync.topic.acls.enabled", "sync.topic.acls.interval.seconds",
	"replication.factor", "offset-syncs.topic.replication.factor", "offset.lag.max",
	"offset-syncs.topic.location", "emit.offset-syncs.enabled",
	"heartbeats.replication.enabled", "task.assigned.partitions", "task.index",
	// MirrorCheckpointConfig
	"groups", "groups.exclude", "group.filter.class",
	"refresh.groups.enabled", "refresh.groups.interval.seconds",
	"emit.checkpoints.enabled", "emit.checkpoints.interval.seconds",
	"sync.group.offsets.enabled", "sync.group.offsets.interval.seconds",
	"checkpoints.topic.replication.factor", "task.assigned.groups",
	// MirrorHeartbeatConfig
	"emit.heartbeats.enabled", "emit.heartbeats.interval.seconds",
	"heartbeats.topic.replication.factor",
)

// topLevelIgnored are connector keys that make no sense at top level; kmirror
// leaves them out of the flow settings (MM2 would apply them to every
// connector, with surprising results).
var topLevelIgnored = set("enabled", "name", "connector.class", "source.cluster.alias",
	"target.cluster.alias", "task.assigned.partitions", "task.assigned.groups", "task.index")

// deprecatedAliases maps old key names to their replacements. The blacklist
// names were removed in Kafka 4.0; the whitelist names are kmirror's.
var deprecatedAliases = map[string]string{
	"topics.blacklist":            "topics.exclude",
	"groups.blacklist":            "groups.exclude",
	"config.properties.blacklist": "config.properties.exclude",
	"topics.whitelist":            "topics",
	"groups.whitelist":            "groups",
}

// removedKeys were accepted by MM2 3.x and are ignored since Kafka 4.0.
var removedKeys = set("use.incremental.alter.configs", "add.source.alias.to.metrics", "auto.include.jmx.reporter")

// flowOnlyKeys are Connect source-connector keys that MM2 honours only per
// flow (A->B.key); at top level they are dropped.
var flowOnlyKeys = set("exactly.once.support", "transaction.boundary",
	"transaction.boundary.interval.ms", "offsets.storage.topic", "use.defaults.from")

// flowPrefixes are key prefixes understood inside a flow's settings.
var flowPrefixes = []string{
	"consumer.", "producer.", "admin.",
	"source.cluster.", "target.cluster.",
	"source.consumer.", "source.producer.", "source.admin.",
	"target.consumer.", "target.producer.", "target.admin.",
	"transforms.", "predicates.", "errors.",
	"key.converter.", "value.converter.", "header.converter.",
	"replication.policy.", "kmirror.",
}

// workerPrefixes are the top-level key prefixes MM2 copies into every
// worker config (MirrorMakerConfig.workerConfig).
var workerPrefixes = []string{"offset.storage", "config.storage", "status.storage",
	"key.converter", "value.converter", "header.converter", "task", "worker", "replication.policy"}

// mm2Keys are MirrorMakerConfig's own top-level keys (clusters, providers,
// dedicated-mode REST).
var mm2Keys = set("clusters", "config.providers", "dedicated.mode.enable.internal.rest",
	"listeners", "rest.advertised.host.name", "rest.advertised.port", "rest.advertised.listener",
	"access.control.allow.origin", "access.control.allow.methods", "response.http.headers.config",
	"admin.listeners", "rest.host.name", "rest.port")

// workerKeys are Connect worker settings that MM2 reads only as
// <alias>.key (for herders targeting alias).
var workerKeys = set("group.id", "client.id", "offset.flush.interval.ms", "offset.flush.timeout.ms",
	"exactly.once.source.support", "scheduled.rebalance.max.delay.ms", "session.timeout.ms",
	"heartbeat.interval.ms", "rebalance.timeout.ms", "connect.protocol", "plugin.path",
	"plugin.discovery", "connector.client.config.override.policy", "topic.creation.enable",
	"topic.tracking.enable", "topic.tracking.allow.reset", "inter.worker.key.generation.algorithm",
	"inter.worker.key.size", "inter.worker.key.ttl.ms", "inter.worker.signature.algorithm",
	"inter.worker.verification.algorithms", "metrics.sample.window.ms", "metrics.num.samples",
	"metrics.recording.level", "request.timeout.ms", "retry.backoff.ms", "retry.backoff.max.ms",
	"reconnect.backoff.ms", "reconnect.backoff.max.ms", "receive.buffer.bytes", "send.buffer.bytes",
	"metadata.max.age.ms", "connections.max.idle.ms", "client.dns.lookup",
	"socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
	"offset.storage.topic", "offset.storage.partitions", "offset.storage.replication.factor",
	"config.storage.topic", "config.storage.replication.factor",
	"status.storage.topic", "status.storage.partitions", "status.storage.replication.factor")

// IsClientConnectionKey reports whether key is a cluster connection or
// security key (bootstrap.servers, security.protocol, ssl.*, sasl.*): the
// keys MM2 copies from a cluster's settings into every client of that
// cluster.
func IsClientConnectionKey(key string) bool {
	return key == "bootstrap.servers" || key == "security.protocol" ||
		strings.HasPrefix(key, "ssl.") || strings.HasPrefix(key, "sasl.")
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// isFlowKey reports whether k is meaningful in a flow's settings.
func isFlowKey(k string) bool {
	return connectorKeys[k] || flowOnlyKeys[k] || deprecatedAliases[k] != "" || removedKeys[k] ||
		IsClientConnectionKey(k) || hasAnyPrefix(k, flowPrefixes)
}

// isClusterKey reports whether k looks like something set per cluster
// (client or worker settings), to recognise <undeclared alias>.k.
func isClusterKey(k string) bool {
	return IsClientConnectionKey(k) || workerKeys[k] ||
		hasAnyPrefix(k, []string{"consumer.", "producer.", "admin."}) || hasAnyPrefix(k, workerPrefixes)
}

package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/policy"
)

// Defaults kmirror applies when a key is unset. They match MM2 (Kafka 4.0)
// except DefaultOffsetSyncsTopicLocation.
const (
	DefaultReplicationFactor         = 2
	DefaultInternalReplicationFactor = 3 // offset-syncs, checkpoints, heartbeats topics
	DefaultOffsetLagMax              = 100
	DefaultTasksMax                  = 1
	DefaultOffsetStoragePartitions   = 25
	DefaultOffsetStorageRF           = 3
	// DefaultOffsetSyncsTopicLocation is kmirror's deliberate deviation:
	// MM2 defaults to "source".
	DefaultOffsetSyncsTopicLocation = "target"
	ByteArrayConverter              = "org.apache.kafka.connect.converters.ByteArrayConverter"
)

// Flow is one replication direction, Source->Target, with MM2's settings
// for its connectors resolved and validated.
type Flow struct {
	Source, Target string
	Enabled        bool // SOURCE->TARGET.enabled
	// Settings is the connector-level view (MirrorMakerConfig's
	// connectorBaseConfig): top-level connector keys, config.providers*,
	// replication.policy*, source.cluster.* / source.consumer.* ... from the
	// cluster settings, the aliases, then the SOURCE->TARGET.* overlay.
	Settings map[string]string
	// Worker is the Connect worker view (workerConfig): the target's cluster
	// settings, top-level offset.storage*, config.storage*, status.storage*,
	// converter, task*, worker* and replication.policy* keys, and MM2's
	// defaults for group.id, client.id and the storage topics.
	Worker map[string]string

	Topics, TopicsExclude   []string
	ConfigPropertiesExclude []string
	Groups, GroupsExclude   []string

	PolicyClass, Separator                 string
	SeparatorSet, InternalSeparatorEnabled bool

	// Built once at load from the keys above.
	Policy        policy.Policy  // replication.policy.*
	TopicFilter   *policy.Filter // topics / topics.exclude
	GroupFilter   *policy.Filter // groups / groups.exclude
	ConfigExclude *regexp.Regexp // config.properties.exclude

	ReplicationFactor int16

	RefreshTopicsEnabled     bool
	RefreshTopicsInterval    time.Duration
	SyncTopicConfigsEnabled  bool
	SyncTopicConfigsInterval time.Duration
	SyncTopicACLsEnabled     bool
	SyncTopicACLsInterval    time.Duration

	EmitOffsetSyncsEnabled   bool
	OffsetSyncsTopicLocation string // "source" or "target"
	OffsetLagMax             int64

	OffsetSyncsTopicReplicationFactor int16
	CheckpointsTopicReplicationFactor int16
	HeartbeatsTopicReplicationFactor  int16

	EmitHeartbeatsEnabled        bool
	EmitHeartbeatsInterval       time.Duration
	HeartbeatsReplicationEnabled bool

	EmitCheckpointsEnabled   bool
	EmitCheckpointsInterval  time.Duration
	RefreshGroupsEnabled     bool
	RefreshGroupsInterval    time.Duration
	SyncGroupOffsetsEnabled  bool
	SyncGroupOffsetsInterval time.Duration

	TasksMax            int
	AdminTimeout        time.Duration // admin.timeout.ms
	ConsumerPollTimeout time.Duration // consumer.poll.timeout.ms

	OffsetStorageTopic             string
	OffsetStoragePartitions        int32
	OffsetStorageReplicationFactor int16

	// Java client properties per role, assembled with MM2's precedence:
	// cluster connection keys, then flow-level consumer./producer./admin.
	// keys, then cluster-level ALIAS.consumer./producer./admin. keys.
	// Consumers get enable.auto.commit=false and auto.offset.reset=earliest
	// unless set. TargetProducer also applies SOURCE->TARGET.producer.override.*
	// last, since kmirror's one target producer writes both data (MM2's
	// worker producer) and offset syncs.
	SourceConsumer, SourceAdmin, TargetProducer, TargetAdmin, TargetConsumer map[string]string

	// kmirror's own settings (see the keys in kmirror.go), read trimmed.
	Passthrough            Switch            // PassthroughKey
	FetchesPerBroker       int               // FetchesKey; 0: the data path's default
	Workers                Workers           // WorkersKey
	WorkersGroupID         string            // WorkersGroupIDKey; default kmirror-SOURCE->TARGET
	Slots                  int               // SlotsKey: exactly-once slots in group mode
	StartFromGroup         string            // StartGroupKey; "" for none
	ThrottleBytesPerSecond int64             // ThrottleKey; 0: no bound
	Provenance             Switch            // ProvenanceKey; Auto when unset
	OffsetTranslation      OffsetTranslation // OffsetTranslationKey
	OffsetIndexRetention   time.Duration     // OffsetIndexRetentionKey; 0: unset, -1 ms: no limit
	MaxSyncsPerPartition   int               // MaxSyncsKey; 0: unset
	StallTimeout           time.Duration     // StallTimeoutKey
	LagThreshold           time.Duration     // LagThresholdKey
	// ExactlyOnce: TARGET.exactly.once.source.support = enabled.
	ExactlyOnce bool
	// Client: the values of the client keys kmirror acts on itself.
	Client ClientValues
	// OffsetFlushInterval: offset.flush.interval.ms of the worker view,
	// DefaultOffsetFlushInterval unless a positive number.
	OffsetFlushInterval time.Duration

	settings layer
	cfg      *Config
}

// Name is "SOURCE->TARGET".
func (f *Flow) Name() string { return f.Source + "->" + f.Target }

// OffsetSyncsTopic is the name of the flow's offset-syncs topic; it lives on
// the cluster named by OffsetSyncsTopicLocation and names the other one.
func (f *Flow) OffsetSyncsTopic() string {
	if f.OffsetSyncsTopicLocation == "source" {
		return f.Policy.OffsetSyncsTopic(f.Target)
	}
	return f.Policy.OffsetSyncsTopic(f.Source)
}

// String is the flow name; it never includes settings.
func (f *Flow) String() string { return f.Name() }

// File is the path of the configuration file the flow comes from.
func (f *Flow) File() string { return f.cfg.Path }

// Position returns the raw key that set a flow setting and its line, for
// messages raised by other packages (line 0 if it was a default).
func (f *Flow) Position(setting string) (key string, line int) {
	v, ok := f.settings[setting]
	if !ok || v.src == "" {
		return setting, 0
	}
	return v.src, f.cfg.Props.Line(v.src)
}

// buildFlow assembles and validates the flow s->t. Warnings are recorded
// only when record is true (the flows built by Parse).
func (c *Config) buildFlow(s, t string, errs *errorList, record bool) *Flow {
	st := c.settingsLayer(s, t)
	f := &Flow{Source: s, Target: t, settings: st, cfg: c, Settings: st.strings()}
	b := &builder{c: c, f: f, s: st, errs: errs, record: record}
	f.Enabled = b.boolean("enabled", false)
	if !f.Enabled && record {
		return f // validated only when enabled
	}
	b.typed()
	return f
}

// settingsLayer is MirrorMakerConfig.connectorBaseConfig with provenance.
func (c *Config) settingsLayer(s, t string) layer {
	out := layer{}
	top := layer{}
	for _, k := range c.Props.order {
		if strings.Contains(k, "->") {
			continue
		}
		if (connectorKeys[k] && !topLevelIgnored[k]) || deprecatedAliases[k] != "" || strings.HasPrefix(k, "kmirror.") ||
			strings.HasPrefix(k, providersKey) || strings.HasPrefix(k, "replication.policy") {
			top[k] = kv{c.Props.m[k].value, k}
		}
	}
	translateAliases(top)
	for k, v := range top {
		out[k] = v
	}
	for _, side := range []struct{ alias, prefix string }{{s, "source."}, {t, "target."}} {
		for k, v := range c.clusters[side.alias] {
			if strings.HasPrefix(k, "consumer") || strings.HasPrefix(k, "producer") || strings.HasPrefix(k, "admin") {
				out[side.prefix+k] = v
			} else {
				out[side.prefix+"cluster."+k] = v
			}
		}
	}
	out.putIfAbsent("source.cluster.alias", kv{s, ""})
	out.putIfAbsent("target.cluster.alias", kv{t, ""})
	flow := layer{}
	p := s + "->" + t + "."
	for _, k := range c.Props.order {
		if strings.HasPrefix(k, p) {
			flow[k[len(p):]] = kv{c.Props.m[k].value, k}
		}
	}
	translateAliases(flow)
	for k, v := range flow {
		out[k] = v
	}
	out.putIfAbsent("enabled", kv{"false", ""})
	return out
}

// translateAliases renames deprecated keys within one level; the new name
// wins when both are present.
func translateAliases(l layer) {
	for old, repl := range deprecatedAliases {
		if v, ok := l[old]; ok {
			l.putIfAbsent(repl, v)
			delete(l, old)
		}
	}
}

// workerLayer is MirrorMakerConfig.workerConfig(s->t) with provenance.
func (c *Config) workerLayer(s, t string) layer {
	w := layer{}
	for k, v := range c.clusters[t] {
		w[k] = v
	}
	for _, k := range c.Props.order {
		if !strings.Contains(k, "->") && (hasAnyPrefix(k, workerPrefixes) || strings.HasPrefix(k, providersKey)) {
			w[k] = kv{c.Props.m[k].value, k}
		}
	}
	for k, v := range map[string]string{
		"group.id":             s + "-mm2",
		"client.id":            s + "->" + t,
		"offset.storage.topic": "mm2-offsets." + s + ".internal",
		"status.storage.topic": "mm2-status." + s + ".internal",
		"config.storage.topic": "mm2-configs." + s + ".internal",
		"key.converter":        ByteArrayConverter,
		"value.converter":      ByteArrayConverter,
		"header.converter":     ByteArrayConverter,
	} {
		w.putIfAbsent(k, kv{v, ""})
	}
	return w
}

// builder extracts typed settings, collecting errors.
type builder struct {
	c      *Config
	f      *Flow
	s      layer
	errs   *errorList
	record bool
}

// fail reports a problem with setting key, positioned at the raw key that
// supplied it (or at the flow when it is unset).
func (b *builder) fail(l layer, key, format string, args ...any) {
	raw := l[key].src
	if raw == "" {
		raw = b.f.Name() + "." + key
	}
	e := b.c.errAt(raw, format, args...)
	if v := b.c.Props.Display(raw); strings.Contains(v, " #") && !IsSensitive(raw) {
		e.Msg += " (.properties files have no end-of-line comments)"
	}
	b.errs.add(e)
}

func (b *builder) warn(raw, format string, args ...any) {
	if b.record {
		b.c.warn(raw, format, args...)
	}
}

// hidden reports whether key's value must not appear in messages: it is
// sensitive or came from a config provider.
func (b *builder) hidden(l layer, key string) bool {
	raw := l[key].src
	return raw != "" && (b.c.Props.Resolved(raw) || IsSensitive(raw))
}

func (b *builder) show(l layer, key string) string {
	if raw := l[key].src; raw != "" {
		return b.c.show(raw)
	}
	return strconv.Quote(l[key].val)
}

func (b *builder) boolean(key string, def bool) bool { return b.boolIn(b.s, key, def) }

func (b *builder) boolIn(l layer, key string, def bool) bool {
	v, ok := l[key]
	if !ok {
		return def
	}
	switch strings.ToLower(javaTrim(v.val)) {
	case "true":
		return true
	case "false":
		return false
	}
	b.fail(l, key, "invalid boolean %s (expected true or false)", b.show(l, key))
	return def
}

// integer parses a Java int/long/short (ConfigDef trims the value) and
// checks it against [min, max].
func (b *builder) integer(l layer, key string, def, min, max int64, rule string) int64 {
	v, ok := l[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(javaTrim(v.val), 10, 64)
	if err != nil {
		b.fail(l, key, "invalid number %s", b.show(l, key))
		return def
	}
	if n < min || n > max {
		if b.hidden(l, key) {
			b.fail(l, key, "%s is out of range: %s", b.show(l, key), rule)
		} else {
			b.fail(l, key, "%d is out of range: %s", n, rule)
		}
		return def
	}
	return n
}

// numShow is n for messages, or the hidden form of key's value.
func (b *builder) numShow(l layer, key, n string) string {
	if b.hidden(l, key) {
		return b.show(l, key)
	}
	return n
}

// replicationFactor accepts -1 (broker default) or 1..32767.
func (b *builder) replicationFactor(l layer, key string, def int64) int16 {
	n := b.integer(l, key, def, -1, math.MaxInt16, "must be -1 (broker default) or between 1 and 32767")
	if n == 0 {
		b.fail(l, key, "%s is out of range: must be -1 (broker default) or between 1 and 32767", b.numShow(l, key, "0"))
		return int16(def)
	}
	return int16(n)
}

// interval reads an X.enabled / X.interval.seconds pair. As in MM2, a
// negative interval disables the task; zero is rejected for enabled tasks.
func (b *builder) interval(enabledKey, secondsKey string, defEnabled bool, defSecs int64) (bool, time.Duration) {
	en := b.boolean(enabledKey, defEnabled)
	limit := int64(math.MaxInt64 / int64(time.Second))
	secs := b.integer(b.s, secondsKey, defSecs, -limit, limit, fmt.Sprintf("must be at most %d seconds", limit))
	if secs < 0 {
		en = false
	} else if secs == 0 && en {
		b.fail(b.s, secondsKey, "must be positive (a negative value disables the task)")
	}
	return en, time.Duration(secs) * time.Second
}

func (b *builder) millis(key string, def int64) time.Duration {
	limit := int64(math.MaxInt64 / int64(time.Millisecond))
	return time.Duration(b.integer(b.s, key, def, 0, limit, "must not be negative")) * time.Millisecond
}

// list reads a regex list and checks that it compiles.
func (b *builder) list(key string, def []string) []string {
	v, ok := b.s[key]
	if !ok {
		return append([]string(nil), def...)
	}
	l := policy.ParseList(v.val)
	if _, err := policy.CompilePattern(l); err != nil {
		if b.hidden(b.s, key) {
			b.fail(b.s, key, "regex list %s does not compile", b.show(b.s, key))
		} else {
			b.fail(b.s, key, "%v", err)
		}
	}
	return l
}

// choice reads a string that must be one of values.
func (b *builder) choice(l layer, key, def string, fold bool, values ...string) string {
	v, ok := l[key]
	if !ok {
		return def
	}
	s := javaTrim(v.val)
	for _, want := range values {
		if s == want || fold && strings.EqualFold(s, want) {
			return want
		}
	}
	b.fail(l, key, "invalid value %s (expected one of: %s)", b.show(l, key), strings.Join(values, ", "))
	return def
}

// class checks a class-valued key against the classes kmirror implements.
func (b *builder) class(key string, allowed ...string) {
	v, ok := b.s[key]
	if !ok {
		return
	}
	s := javaTrim(v.val)
	for _, a := range allowed {
		if s == a || s == a[strings.LastIndexByte(a, '.')+1:] {
			return
		}
	}
	b.fail(b.s, key, "class %s is not supported by kmirror (supported: %s)", b.show(b.s, key), strings.Join(allowed, ", "))
}

func (b *builder) typed() {
	f, s := b.f, b.s

	f.Topics = b.list("topics", policy.DefaultTopics)
	f.TopicsExclude = b.list("topics.exclude", policy.DefaultTopicsExclude)
	f.ConfigPropertiesExclude = b.list("config.properties.exclude", policy.DefaultConfigPropertiesExclude)
	f.Groups = b.list("groups", policy.DefaultGroups)
	f.GroupsExclude = b.list("groups.exclude", policy.DefaultGroupsExclude)
	// The lists compile (or list reported why): no errors left here.
	f.TopicFilter, _ = policy.NewFilter(f.Topics, f.TopicsExclude)
	f.GroupFilter, _ = policy.NewFilter(f.Groups, f.GroupsExclude)
	f.ConfigExclude, _ = policy.CompilePattern(f.ConfigPropertiesExclude)

	f.PolicyClass = policy.DefaultClass
	if v, ok := s["replication.policy.class"]; ok {
		f.PolicyClass = javaTrim(v.val)
	}
	f.Separator = policy.DefaultSeparator
	if v, ok := s["replication.policy.separator"]; ok {
		// MM2 hands the policy the raw, untrimmed value.
		f.Separator, f.SeparatorSet = v.val, true
		if v.val != strings.TrimSpace(v.val) {
			b.warn(v.src, "replication.policy.separator %s has surrounding whitespace, which becomes part of remote topic names", b.show(s, "replication.policy.separator"))
		}
	}
	f.InternalSeparatorEnabled = b.boolean("replication.policy.internal.topic.separator.enabled", true)
	var err error
	f.Policy, err = policy.New(policy.Config{Class: f.PolicyClass, Separator: f.Separator, SeparatorSet: f.SeparatorSet,
		InternalSeparatorEnabled: f.InternalSeparatorEnabled, SourceAlias: f.Source})
	if err != nil {
		if b.hidden(s, "replication.policy.class") {
			err = fmt.Errorf("unsupported replication policy class %s", b.show(s, "replication.policy.class"))
		}
		b.fail(s, "replication.policy.class", "%v", err)
	}

	f.ReplicationFactor = b.replicationFactor(s, "replication.factor", DefaultReplicationFactor)
	f.RefreshTopicsEnabled, f.RefreshTopicsInterval = b.interval("refresh.topics.enabled", "refresh.topics.interval.seconds", true, 600)
	f.SyncTopicConfigsEnabled, f.SyncTopicConfigsInterval = b.interval("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds", true, 600)
	f.SyncTopicACLsEnabled, f.SyncTopicACLsInterval = b.interval("sync.topic.acls.enabled", "sync.topic.acls.interval.seconds", true, 600)

	f.EmitOffsetSyncsEnabled = b.boolean("emit.offset-syncs.enabled", true)
	f.OffsetSyncsTopicLocation = b.choice(s, "offset-syncs.topic.location", DefaultOffsetSyncsTopicLocation, false, "source", "target")
	f.OffsetLagMax = b.integer(s, "offset.lag.max", DefaultOffsetLagMax, 0, math.MaxInt64, "must not be negative")
	f.OffsetSyncsTopicReplicationFactor = b.replicationFactor(s, "offset-syncs.topic.replication.factor", DefaultInternalReplicationFactor)
	f.CheckpointsTopicReplicationFactor = b.replicationFactor(s, "checkpoints.topic.replication.factor", DefaultInternalReplicationFactor)
	f.HeartbeatsTopicReplicationFactor = b.replicationFactor(s, "heartbeats.topic.replication.factor", DefaultInternalReplicationFactor)

	f.EmitHeartbeatsEnabled, f.EmitHeartbeatsInterval = b.interval("emit.heartbeats.enabled", "emit.heartbeats.interval.seconds", true, 1)
	f.HeartbeatsReplicationEnabled = b.boolean("heartbeats.replication.enabled", true)

	f.EmitCheckpointsEnabled, f.EmitCheckpointsInterval = b.interval("emit.checkpoints.enabled", "emit.checkpoints.interval.seconds", true, 60)
	f.RefreshGroupsEnabled, f.RefreshGroupsInterval = b.interval("refresh.groups.enabled", "refresh.groups.interval.seconds", true, 600)
	f.SyncGroupOffsetsEnabled, f.SyncGroupOffsetsInterval = b.interval("sync.group.offsets.enabled", "sync.group.offsets.interval.seconds", false, 60)

	f.TasksMax = int(b.integer(s, "tasks.max", DefaultTasksMax, 1, math.MaxInt32, "must be at least 1"))
	f.AdminTimeout = b.millis("admin.timeout.ms", 60000)
	f.ConsumerPollTimeout = b.millis("consumer.poll.timeout.ms", 1000)

	b.checkOffsetSyncs()
	b.checkUnsupported()
	b.worker()
	b.kmirror()
	b.clients()
	b.checkExactlyOnce()
}

// checkOffsetSyncs applies MM2's rules for emit.offset-syncs.enabled=false:
// the source connector rejects offset-syncs topic settings, and checkpoints
// cannot run.
func (b *builder) checkOffsetSyncs() {
	f, s := b.f, b.s
	if f.EmitOffsetSyncsEnabled {
		return
	}
	for k, v := range s {
		if strings.HasPrefix(k, "offset-syncs-") || strings.HasPrefix(k, "offset-syncs.topic.") {
			b.fail(s, "emit.offset-syncs.enabled", "cannot be false while %s is set (line %d)", v.src, b.c.Props.Line(v.src))
			break
		}
	}
	if f.SyncGroupOffsetsEnabled {
		raw, _ := f.Position("sync.group.offsets.enabled")
		b.warn(raw, "flow %s: sync.group.offsets.enabled has no effect because emit.offset-syncs.enabled is false", f.Name())
	}
	f.EmitCheckpointsEnabled = false
	f.SyncGroupOffsetsEnabled = false
}

// checkUnsupported rejects pluggable Java classes kmirror cannot load.
func (b *builder) checkUnsupported() {
	b.class("topic.filter.class", "org.apache.kafka.connect.mirror.DefaultTopicFilter")
	b.class("group.filter.class", "org.apache.kafka.connect.mirror.DefaultGroupFilter")
	b.class("config.property.filter.class", "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter")
	b.class("forwarding.admin.class", "org.apache.kafka.clients.admin.ForwardingAdmin")
	if v, ok := b.s["transforms"]; ok && javaTrim(v.val) != "" {
		b.fail(b.s, "transforms", "single message transforms are not supported by kmirror")
	}
	for _, k := range []string{"key.converter", "value.converter", "header.converter"} {
		if v, ok := b.s[k]; ok && javaTrim(v.val) != ByteArrayConverter {
			b.warn(v.src, "%s is ignored: kmirror always copies raw bytes", v.src)
		}
	}
}

func (b *builder) worker() {
	f := b.f
	w := b.c.workerLayer(f.Source, f.Target)
	f.Worker = w.strings()
	f.OffsetStorageTopic = javaTrim(w["offset.storage.topic"].val)
	if f.OffsetStorageTopic == "" {
		b.fail(w, "offset.storage.topic", "must not be empty")
	}
	f.OffsetStoragePartitions = int32(b.integer(w, "offset.storage.partitions", DefaultOffsetStoragePartitions, -1, math.MaxInt32,
		"must be -1 (broker default) or positive"))
	if f.OffsetStoragePartitions == 0 {
		b.fail(w, "offset.storage.partitions", "%s is out of range: must be -1 (broker default) or positive", b.numShow(w, "offset.storage.partitions", "0"))
		f.OffsetStoragePartitions = DefaultOffsetStoragePartitions
	}
	f.OffsetStorageReplicationFactor = b.replicationFactor(w, "offset.storage.replication.factor", DefaultOffsetStorageRF)
}

// clients assembles the per-role client properties (MirrorConnectorConfig)
// and checks that every key of them takes effect.
func (b *builder) clients() {
	f, s := b.f, b.s
	build := func(cluster string, layers ...string) layer {
		m := layer{}
		for k, v := range layerWithPrefix(s, cluster+".cluster.") {
			if IsClientConnectionKey(k) {
				m[k] = v
			}
		}
		for _, p := range layers {
			for k, v := range layerWithPrefix(s, p) {
				if !strings.HasPrefix(k, "override.") || p == "producer.override." {
					m[k] = v
				}
			}
		}
		return m
	}
	consumer := func(m layer) layer {
		m["enable.auto.commit"] = kv{"false", m["enable.auto.commit"].src}
		m.putIfAbsent("auto.offset.reset", kv{"earliest", ""})
		return m
	}
	// Java's ConfigDef trims every value it parses, and reads these enums
	// in any case; the data paths compare them as they are.
	normalise := func(m layer) layer {
		for k, v := range m {
			v.val = javaTrim(v.val)
			if k == "auto.offset.reset" || k == "isolation.level" {
				v.val = strings.ToLower(v.val)
			}
			m[k] = v
		}
		return m
	}
	sc := normalise(consumer(build("source", "consumer.", "source.consumer.")))
	sa := normalise(build("source", "admin.", "source.admin."))
	ta := normalise(build("target", "admin.", "target.admin."))
	tc := normalise(consumer(build("target", "consumer.", "target.consumer.")))
	tp := normalise(build("target", "producer.", "target.producer.", "producer.override."))
	f.SourceConsumer, f.SourceAdmin, f.TargetAdmin, f.TargetConsumer, f.TargetProducer = sc.strings(), sa.strings(), ta.strings(), tc.strings(), tp.strings()
	b.clientValues(sc, tp)
	b.checkClientKeys([]clientRole{{clients.Consumer, "consumer", sc, typedSourceConsumerKeys}, {clients.Admin, "admin", sa, nil},
		{clients.Admin, "admin", ta, nil}, {clients.Consumer, "consumer", tc, nil}, {clients.Producer, "producer", tp, typedTargetProducerKeys}})
}

func layerWithPrefix(l layer, p string) layer {
	m := layer{}
	for k, v := range l {
		if strings.HasPrefix(k, p) && len(k) > len(p) {
			m[k[len(p):]] = v
		}
	}
	return m
}

// checkExactlyOnce validates the Connect exactly-once keys MM2 honours per
// flow.
func (b *builder) checkExactlyOnce() {
	s := b.s
	if b.choice(s, "exactly.once.support", "requested", true, "requested", "required") == "required" {
		if b.f.Client.Isolation != ReadCommitted {
			b.fail(s, "exactly.once.support", "required needs the source consumer's isolation.level = read_committed (set %s.consumer.isolation.level)", b.f.Source)
		}
	}
	if b.choice(s, "transaction.boundary", "poll", true, "poll", "interval", "connector") == "connector" {
		b.fail(s, "transaction.boundary", "\"connector\" is not supported: MirrorMaker 2 connectors do not define transaction boundaries")
	}
}

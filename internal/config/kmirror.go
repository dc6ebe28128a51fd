package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// kmirror's own keys. All but the REST keys may be set at top level (every
// flow) or per flow (SOURCE->TARGET.key); the REST keys only at top level.
const (
	// PassthroughKey chooses a flow's data path: "auto" (the default) and
	// "true" forward source batches as they are, without decompression and
	// recompression, wherever the flow needs no per-record work (no
	// provenance header, no compression.type of its own for the target
	// producer; exactly-once runs on passthrough too, in target
	// transactions); "false" always decodes and re-encodes records.
	PassthroughKey = "kmirror.passthrough.enabled"
	// FetchesKey is how many fetches a flow keeps in flight to each source
	// broker, 1 to MaxFetchesPerBroker; unset, the data path's default.
	FetchesKey = "kmirror.fetches.per.broker"
	// WorkersKey is "single" (the default: this process copies every
	// partition) or "group" (every kmirror running the flow joins a
	// consumer group on the source, WorkersGroupIDKey, by default
	// kmirror-SOURCE->TARGET, whose coordinator spreads the partitions
	// over the workers). The group never gets committed offsets;
	// session.timeout.ms and heartbeat.interval.ms of the source consumer
	// tune how fast a dead worker is noticed.
	WorkersKey        = "kmirror.workers"
	WorkersGroupIDKey = "kmirror.workers.group.id"
	// SlotsKey, for exactly-once with group workers, is how many slots
	// (transactional IDs) the flow's partitions are spread over: the
	// group hands out whole slots, so it bounds how many workers share
	// the work (default DefaultSlots).
	SlotsKey = "kmirror.exactly.once.slots"
	// StartGroupKey names a consumer group on the source whose committed
	// offsets are where partitions without progress start (what `kmirror
	// mm1` sets from MM1's group.id). kmirror commits nothing to it.
	StartGroupKey = "kmirror.start.from.group"
	// ThrottleKey bounds the bytes per second a flow copies to its target
	// (the bytes of the batches sent);
	// 0 is no bound.
	ThrottleKey = "kmirror.throttle.bytes.per.second"
	// ProvenanceKey turns the provenance header on or off; unset, the
	// header is written by flows that keep topic names on a cycle.
	ProvenanceKey = "kmirror.provenance.header.enabled"
	// OffsetTranslationKey is "exact" (the default) or "mm2".
	OffsetTranslationKey = "kmirror.offset.translation"
	// OffsetIndexRetentionKey is the retention.ms of a new offset index
	// topic: positive, or -1 for no limit.
	OffsetIndexRetentionKey = "kmirror.offset.index.retention.ms"
	// MaxSyncsKey is how many offset syncs are kept per partition (at
	// least 4).
	MaxSyncsKey = "kmirror.offset.translation.max.syncs.per.partition"
	// StallTimeoutKey: a partition behind its source whose progress has
	// not moved for this many milliseconds is stalled (status, metrics,
	// /ready) and, with nothing in flight, restarted. LagThresholdKey: a
	// partition whose oldest uncopied record is at least this old is
	// lagging.
	StallTimeoutKey = "kmirror.partition.stall.timeout.ms"
	LagThresholdKey = "kmirror.partition.lag.threshold.ms"

	RESTListenerKey = "kmirror.rest.listener" // host:port
	RESTTokenKey    = "kmirror.rest.token"    // bearer token; use a config provider
	RESTAuthKey     = "kmirror.rest.auth"     // "none" turns the token off
	RESTCertKey     = "kmirror.rest.tls.cert" // PEM certificate file: serve HTTPS
	RESTKeyKey      = "kmirror.rest.tls.key"  // PEM key file
	// RESTAllowedHostsKey lists the host names (comma-separated, no port)
	// an API without a token answers besides loopback and IP addresses:
	// the guard against DNS rebinding (rest.HostGuard).
	RESTAllowedHostsKey = "kmirror.rest.allowed.hosts"
)

// MaxFetchesPerBroker bounds FetchesKey.
const MaxFetchesPerBroker = 8

// DefaultOffsetFlushInterval is how often progress is saved when
// offset.flush.interval.ms is not set. MM2's default is 60 s; kmirror saves
// every second so that a crash re-copies at most about a second of data.
const DefaultOffsetFlushInterval = time.Second

var (
	kmirrorFlowKeys = set(PassthroughKey, FetchesKey, WorkersKey, WorkersGroupIDKey, SlotsKey, StartGroupKey,
		ThrottleKey, ProvenanceKey, OffsetTranslationKey, OffsetIndexRetentionKey, MaxSyncsKey,
		StallTimeoutKey, LagThresholdKey)
	kmirrorRESTKeys = set(RESTListenerKey, RESTTokenKey, RESTAuthKey, RESTCertKey, RESTKeyKey, RESTAllowedHostsKey)
)

// Switch is a setting that is on, off, or left to kmirror (Auto, also
// when unset).
type Switch int

// Switch values.
const (
	Auto Switch = iota
	On
	Off
)

func (s Switch) String() string { return [...]string{"auto", "true", "false"}[s] }

// Workers says how a flow's partitions are shared (WorkersKey).
type Workers int

// Workers values.
const (
	Single Workers = iota
	Group
)

func (w Workers) String() string { return [...]string{"single", "group"}[w] }

// OffsetTranslation is the translation mode of OffsetTranslationKey.
type OffsetTranslation int

// OffsetTranslation values.
const (
	TranslationExact OffsetTranslation = iota
	TranslationMM2
)

func (t OffsetTranslation) String() string { return [...]string{"exact", "mm2"}[t] }

// ParseOffsetTranslation reads a value of OffsetTranslationKey ("" means
// exact).
func ParseOffsetTranslation(s string) (OffsetTranslation, bool) {
	switch javaTrim(s) {
	case "", "exact":
		return TranslationExact, true
	case "mm2":
		return TranslationMM2, true
	}
	return TranslationExact, false
}

// REST holds the REST API settings (top-level kmirror.rest.* keys).
type REST struct {
	Listener        string // host:port; "" serves nothing unless --rest-addr says
	Token           string // bearer token; "" when unset
	Open            bool   // kmirror.rest.auth = none: no token needed
	TLSCert, TLSKey string // PEM files; both or neither
	// AllowedHosts: kmirror.rest.allowed.hosts, lower case.
	AllowedHosts []string
}

// ParseAllowedHosts reads a value of RESTAllowedHostsKey: host names
// without scheme or port.
func ParseAllowedHosts(v string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(v, ",") {
		h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		if h == "" {
			continue
		}
		if strings.ContainsAny(h, ":/ *@[]") {
			return nil, fmt.Errorf("want host names without scheme, port or wildcard, not %q", h)
		}
		out = append(out, h)
	}
	return out, nil
}

// kmirror reads the flow's kmirror.* keys and the worker keys kmirror
// acts on.
func (b *builder) kmirror() {
	b.dataPathKeys()
	b.sharingKeys()
	b.copyKeys()
	b.offsetKeys()
	b.workerLayerKeys()
}

// dataPathKeys reads PassthroughKey and FetchesKey.
func (b *builder) dataPathKeys() {
	f, s := b.f, b.s
	switch v, _ := b.value(PassthroughKey); strings.ToLower(v) {
	case "", "auto":
	case "true":
		f.Passthrough = On
	case "false":
		f.Passthrough = Off
	default:
		b.fail(s, PassthroughKey, "want true, false or auto, not %s", b.show(s, PassthroughKey))
	}
	if v, ok := b.value(FetchesKey); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxFetchesPerBroker {
			b.fail(s, FetchesKey, "want a whole number from 1 to %d, not %s", MaxFetchesPerBroker, b.show(s, FetchesKey))
		} else {
			f.FetchesPerBroker = n
		}
	}
}

// sharingKeys reads WorkersKey, WorkersGroupIDKey and StartGroupKey.
func (b *builder) sharingKeys() {
	f, s := b.f, b.s
	switch v, _ := b.value(WorkersKey); strings.ToLower(v) {
	case "", "single":
	case "group":
		f.Workers = Group
	default:
		b.fail(s, WorkersKey, "want single or group, not %s", b.show(s, WorkersKey))
	}
	f.WorkersGroupID = "kmirror-" + f.Name()
	if v, ok := b.value(WorkersGroupIDKey); ok {
		f.WorkersGroupID = v
	}
	f.StartFromGroup, _ = b.value(StartGroupKey)
}

// copyKeys reads ThrottleKey and ProvenanceKey.
func (b *builder) copyKeys() {
	f, s := b.f, b.s
	if v, ok := b.value(ThrottleKey); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			b.fail(s, ThrottleKey, "want a whole number of bytes per second, not %s", b.show(s, ThrottleKey))
		} else {
			f.ThrottleBytesPerSecond = n
		}
	}
	if v, ok := b.value(ProvenanceKey); ok {
		switch on, err := strconv.ParseBool(v); {
		case err != nil:
			b.fail(s, ProvenanceKey, "want true or false, not %s", b.show(s, ProvenanceKey))
		case on:
			f.Provenance = On
		default:
			f.Provenance = Off
		}
	}
}

// offsetKeys reads OffsetTranslationKey, OffsetIndexRetentionKey and
// MaxSyncsKey.
func (b *builder) offsetKeys() {
	f, s := b.f, b.s
	if v, ok := s[OffsetTranslationKey]; ok {
		t, ok := ParseOffsetTranslation(v.val)
		if !ok {
			b.fail(s, OffsetTranslationKey, "must be exact or mm2, not %s", b.show(s, OffsetTranslationKey))
		}
		f.OffsetTranslation = t
	}
	if v, ok := b.value(OffsetIndexRetentionKey); ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < -1 || ms == 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			b.fail(s, OffsetIndexRetentionKey, "must be a positive number of milliseconds or -1")
		} else {
			f.OffsetIndexRetention = time.Duration(ms) * time.Millisecond
		}
	}
	if v, ok := b.value(MaxSyncsKey); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 {
			b.fail(s, MaxSyncsKey, "must be a number of at least 4")
		} else {
			f.MaxSyncsPerPartition = n
		}
	}
}

// workerLayerKeys reads the worker keys exactly.once.source.support and
// offset.flush.interval.ms, and StallTimeoutKey, LagThresholdKey and
// SlotsKey.
func (b *builder) workerLayerKeys() {
	f, s := b.f, b.s
	// Connect reads its enums case-insensitively, trimmed.
	w := b.c.workerLayer(f.Source, f.Target)
	f.ExactlyOnce = b.choice(w, "exactly.once.source.support", "disabled", true, "enabled", "disabled", "preparing") == "enabled"
	limit := int64(math.MaxInt64 / int64(time.Millisecond))
	f.StallTimeout = time.Duration(b.integer(s, StallTimeoutKey, DefaultStallTimeout.Milliseconds(), 1, limit, "must be a positive number of milliseconds")) * time.Millisecond
	f.LagThreshold = time.Duration(b.integer(s, LagThresholdKey, DefaultLagThreshold.Milliseconds(), 1, limit, "must be a positive number of milliseconds")) * time.Millisecond
	ms := b.integer(w, "offset.flush.interval.ms", DefaultOffsetFlushInterval.Milliseconds(), 1, limit,
		fmt.Sprintf("must be from 1 to %d milliseconds", limit))
	f.OffsetFlushInterval = time.Duration(ms) * time.Millisecond
	f.Slots = int(b.integer(s, SlotsKey, DefaultSlots, 1, MaxSlots, fmt.Sprintf("must be a whole number from 1 to %d", MaxSlots)))
}

// DefaultSlots and MaxSlots: SlotsKey.
const (
	DefaultSlots = 16
	MaxSlots     = 1024
)

// Defaults of StallTimeoutKey and LagThresholdKey.
const (
	DefaultStallTimeout = 60 * time.Second
	DefaultLagThreshold = 30 * time.Second
)

// value returns key's trimmed value; an empty value counts as unset.
func (b *builder) value(key string) (string, bool) {
	v := javaTrim(b.s[key].val)
	return v, v != ""
}

// parseREST reads the top-level kmirror.rest.* keys.
func (c *Config) parseREST(errs *errorList) {
	get := func(k string) string { v, _ := c.Props.Get(k); return javaTrim(v) }
	r := REST{Listener: get(RESTListenerKey), Token: get(RESTTokenKey),
		TLSCert: get(RESTCertKey), TLSKey: get(RESTKeyKey)}
	switch get(RESTAuthKey) {
	case "", "token":
	case "none":
		r.Open = true
	default:
		errs.add(c.errAt(RESTAuthKey, "want token or none, not %s", c.show(RESTAuthKey)))
	}
	if (r.TLSCert == "") != (r.TLSKey == "") {
		set, missing := RESTCertKey, RESTKeyKey
		if r.TLSCert == "" {
			set, missing = RESTKeyKey, RESTCertKey
		}
		errs.add(c.errAt(set, "HTTPS needs %s too", missing))
	}
	if v, ok := c.Props.Get(RESTAllowedHostsKey); ok {
		hosts, err := ParseAllowedHosts(v)
		if err != nil {
			errs.add(c.errAt(RESTAllowedHostsKey, "%v", err))
		}
		r.AllowedHosts = hosts
	}
	c.REST = r
}

// checkKmirrorKey warns about an unknown kmirror.* key k (suffix of the
// raw key, after any flow prefix).
func (c *Config) checkKmirrorKey(raw, k string, perFlow bool) {
	switch {
	case kmirrorFlowKeys[k]:
	case kmirrorRESTKeys[k] && !perFlow:
	case kmirrorRESTKeys[k]:
		c.warn(raw, "%q is read only at top level (%s); ignored", raw, k)
	default:
		known := make([]string, 0, len(kmirrorFlowKeys)+len(kmirrorRESTKeys))
		for n := range kmirrorFlowKeys {
			known = append(known, n)
		}
		if !perFlow {
			for n := range kmirrorRESTKeys {
				known = append(known, n)
			}
		}
		c.warn(raw, "unknown kmirror key %q%s", raw, didYouMean(k, raw[:len(raw)-len(k)], known))
	}
}

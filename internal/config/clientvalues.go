package config

import (
	"math"
	"strconv"
	"time"
)

// OffsetReset is where a partition without progress starts: the source
// consumer's auto.offset.reset.
type OffsetReset int

// OffsetReset values. ResetNone behaves as ResetEarliest: kmirror has no
// consumer that could fail on a missing position.
const (
	ResetEarliest OffsetReset = iota
	ResetLatest
	ResetNone
)

func (r OffsetReset) String() string { return [...]string{"earliest", "latest", "none"}[r] }

// Isolation is the source consumer's isolation.level. kmirror copies only
// committed records whatever it says; IsolationUnset when not set.
type Isolation int

// Isolation values.
const (
	IsolationUnset Isolation = iota
	ReadCommitted
	ReadUncommitted
)

func (i Isolation) String() string { return [...]string{"", "read_committed", "read_uncommitted"}[i] }

// ClientValues are the values of Java client keys that kmirror acts on
// itself, beyond configuring its franz-go clients: typed and checked at
// load, so that nothing later reads them from the property maps.
type ClientValues struct {
	StartAt   OffsetReset // source consumer auto.offset.reset (default earliest)
	Isolation Isolation   // source consumer isolation.level
	// The source consumer's fetch sizes; 0 when unset (the data path's
	// defaults).
	FetchMaxBytes     int32         // fetch.max.bytes
	PartitionMaxBytes int32         // max.partition.fetch.bytes
	FetchMaxWait      time.Duration // fetch.max.wait.ms
	// The workers' group consumer (kmirror.workers = group): its
	// session.timeout.ms and heartbeat.interval.ms; 0 when unset
	// (franz-go's defaults).
	SessionTimeout, HeartbeatInterval time.Duration
	// TargetCodec is the target producer's compression.type in lower
	// case, or "" when unset (batches keep the source's codec).
	TargetCodec string
	// DefaultsFromSource: use.defaults.from = source (topic config sync
	// copies the source's default values too). Any other value means the
	// target, as in MM2, where the key is a string compared with "source".
	DefaultsFromSource bool
}

// Codecs are the values of compression.type.
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// The client keys clientValues checks, of the source consumer and of the
// target producer; the client-level check (clientErrors) leaves them
// alone there, so that one bad value gives one error.
var (
	typedSourceConsumerKeys = set("auto.offset.reset", "isolation.level", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.max.wait.ms",
		"session.timeout.ms", "heartbeat.interval.ms")
	typedTargetProducerKeys = set("compression.type")
)

// clientValues reads ClientValues from the source consumer's and the
// target producer's assembled properties. Errors are reported only for
// flows built by Parse, as for the other client keys (clientErrors).
func (b *builder) clientValues(sc, tp layer) {
	if !b.record {
		saved := b.errs
		b.errs = &errorList{}
		defer func() { b.errs = saved }()
	}
	v := &b.f.Client
	switch b.choice(sc, "auto.offset.reset", "earliest", true, "earliest", "latest", "none") {
	case "latest":
		v.StartAt = ResetLatest
	case "none":
		v.StartAt = ResetNone
	}
	switch b.choice(sc, "isolation.level", "", true, "read_committed", "read_uncommitted") {
	case "read_committed":
		v.Isolation = ReadCommitted
	case "read_uncommitted":
		v.Isolation = ReadUncommitted
	}
	v.FetchMaxBytes = int32(b.clientInt(sc, "fetch.max.bytes"))
	v.PartitionMaxBytes = int32(b.clientInt(sc, "max.partition.fetch.bytes"))
	v.FetchMaxWait = time.Duration(b.clientInt(sc, "fetch.max.wait.ms")) * time.Millisecond
	v.SessionTimeout = time.Duration(b.clientInt(sc, "session.timeout.ms")) * time.Millisecond
	v.HeartbeatInterval = time.Duration(b.clientInt(sc, "heartbeat.interval.ms")) * time.Millisecond
	v.TargetCodec = b.choice(tp, "compression.type", "", true, Codecs...)
	v.DefaultsFromSource = javaTrim(b.s["use.defaults.from"].val) == "source"
}

// clientInt reads a Java client int key that must be from 0 to
// math.MaxInt32 (the range kmirror's client takes); 0 when unset or bad.
func (b *builder) clientInt(l layer, key string) int64 {
	v, ok := l[key]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(javaTrim(v.val), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt32 {
		b.fail(l, key, "%s is not an integer in [0, %d]", b.show(l, key), math.MaxInt32)
		return 0
	}
	return n
}

package flow

import (
	"fmt"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/passthrough"
	"github.com/kmirror/kmirror/internal/slots"
)

// Plan is every decision a flow's Run takes from its configuration alone:
// how batches reach the target and why, how the source is fetched, where
// partitions without progress start, how the flow is shared and keyed for
// exactly-once. PlanOf makes it without a client or a cluster; build only
// makes the clients it names, and `kmirror check` prints it (Lines).
type Plan struct {
	// Encoding: which batches are re-encoded and why (the "data path" line).
	Encoding
	// AddOrigin: the provenance header is written, and records that came
	// from the target are dropped (OriginHeaderFlows' answer).
	AddOrigin bool
	// Fetches is how many fetches are in flight per source broker, each on
	// a source client of its own.
	Fetches int
	// The source consumer's fetch sizes; 0 keeps the data path's default.
	FetchMaxBytes, PartitionMaxBytes int32
	FetchMaxWait                     time.Duration
	// StartAtEnd: partitions with no progress start at the log end
	// (auto.offset.reset = latest), else at the log start.
	StartAtEnd bool
	// StartFromGroup is a consumer group on the source whose committed
	// offsets seed partitions without progress first (config.StartGroupKey),
	// or "".
	StartFromGroup string
	// IgnoredIsolation: the source consumer asks read_uncommitted, which
	// kmirror ignores (it copies committed records only).
	IgnoredIsolation bool
	// Group is the workers' consumer group on the source, "" for a single
	// worker.
	Group string
	// The group consumer's session timeout and heartbeat interval; 0
	// keeps franz-go's defaults.
	SessionTimeout, HeartbeatInterval time.Duration
	// TransactionalID is the producer's transactional ID, "" unless
	// exactly-once; with Slots > 0 it is the base of one ID per slot.
	TransactionalID string
	Slots           int
	// CheckpointsID is the transactional ID of the leader's checkpoint
	// writes in group mode (CheckpointsTransactionalID), else "".
	CheckpointsID string
	// Throttle bounds the bytes per second sent to the target; 0: none.
	Throttle int64

	source, target string // the aliases, for Lines
}

// PlanOf decides flow c's plan; addOrigin is OriginHeaderFlows' answer for c.
func PlanOf(c *config.Flow, addOrigin bool) Plan {
	p := Plan{
		Encoding:          encodingOf(c, addOrigin),
		AddOrigin:         addOrigin,
		Fetches:           fetchesOf(c),
		FetchMaxBytes:     c.Client.FetchMaxBytes,
		PartitionMaxBytes: c.Client.PartitionMaxBytes,
		FetchMaxWait:      c.Client.FetchMaxWait,
		StartAtEnd:        c.Client.StartAt == config.ResetLatest,
		IgnoredIsolation:  c.Client.Isolation == config.ReadUncommitted,
		StartFromGroup:    c.StartFromGroup,
		Throttle:          c.ThrottleBytesPerSecond,
		source:            c.Source,
		target:            c.Target,
	}
	if c.Workers == config.Group {
		p.Group = c.WorkersGroupID
		p.SessionTimeout, p.HeartbeatInterval = c.Client.SessionTimeout, c.Client.HeartbeatInterval
		p.CheckpointsID = CheckpointsTransactionalID(c)
	}
	if c.ExactlyOnce {
		p.TransactionalID = TransactionalID(c)
		if p.Group != "" {
			p.Slots = c.Slots
		}
	}
	return p
}

// DataPath is the log line of the plan's data path, with its attributes.
func (p Plan) DataPath() (string, []any) {
	if p.Why == "" {
		return "data path: source batches are forwarded without recompression", []any{"fetches_per_broker", p.Fetches}
	}
	return "data path: " + p.What, []any{"because", p.Why, "fetches_per_broker", p.Fetches}
}

// Lines says the plan in words, one decision a line, for `kmirror check`.
func (p Plan) Lines() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if p.Why == "" {
		add("data path: batch engine, source batches forwarded as they are, %d fetches per source broker", p.Fetches)
	} else {
		add("data path: batch engine, %s because %s, %d fetches per source broker", p.What, p.Why, p.Fetches)
	}
	part := "a share of the fetch, " + bytesOf(passthrough.DefaultPartitionMaxBytes) + " to " + bytesOf(passthrough.MaxAutoPartitionBytes)
	if p.PartitionMaxBytes > 0 {
		part = bytesOf(int(p.PartitionMaxBytes))
	}
	add("fetch sizes: %s per fetch, %s per partition, waiting at most %v", or(bytesOf(int(p.FetchMaxBytes)), p.FetchMaxBytes > 0, bytesOf(passthrough.DefaultFetchMaxBytes)),
		part, or(p.FetchMaxWait, p.FetchMaxWait > 0, passthrough.DefaultFetchMaxWait))
	start := "at the log start"
	if p.StartAtEnd {
		start = "at the log end (auto.offset.reset = latest)"
	}
	if p.StartFromGroup != "" {
		start = fmt.Sprintf("where consumer group %q on %s stands, else %s", p.StartFromGroup, p.source, start)
	}
	add("start: partitions without progress start %s", start)
	if p.IgnoredIsolation {
		add("isolation: read_uncommitted is ignored, only committed records are copied")
	}
	if p.AddOrigin {
		add("provenance header: written; records that came from the target are not copied back")
	} else {
		add("provenance header: off")
	}
	switch {
	case p.TransactionalID != "" && p.Slots > 0:
		add("exactly-once: on (%s.exactly.once.source.support = enabled), records and progress in target transactions, %d slots, transactional ids %s to %s",
			p.target, p.Slots, slots.TransactionalID(p.TransactionalID, 0), slots.TransactionalID(p.TransactionalID, p.Slots-1))
	case p.TransactionalID != "":
		add("exactly-once: on (%s.exactly.once.source.support = enabled), batches and progress in target transactions, transactional id %s", p.target, p.TransactionalID)
	default:
		add("exactly-once: off")
	}
	if p.Group != "" {
		timing := ""
		if p.SessionTimeout > 0 {
			timing += fmt.Sprintf(", session timeout %v", p.SessionTimeout)
		}
		if p.HeartbeatInterval > 0 {
			timing += fmt.Sprintf(", heartbeat every %v", p.HeartbeatInterval)
		}
		add("workers: group %q on %s shares the partitions between kmirror processes%s", p.Group, p.source, timing)
		add("checkpoints: the worker that leads the flow writes them in transactions (transactional id %s), fencing the one that led before", p.CheckpointsID)
	} else {
		add("workers: single (this process copies every partition)")
	}
	if p.Throttle > 0 {
		add("throttle: %d bytes per second", p.Throttle)
	}
	return out
}

// or is v if ok, else def.
func or[T any](v T, ok bool, def T) T {
	if ok {
		return v
	}
	return def
}

// bytesOf is n in bytes, with its size in KiB or MiB when whole.
func bytesOf(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Encoding is how a flow's batches reach the target on the batch engine
// (internal/passthrough): forwarded as they are wherever the flow allows
// (Why is empty), or re-encoded, every batch or those of another codec.
type Encoding struct {
	All   bool   // every batch is re-encoded
	Codec string // the target codec (compression.type), or "" to keep the source's
	// What says which batches are re-encoded and Why what makes the flow
	// re-encode them; both empty when batches are forwarded.
	What, Why string
}

// encodingOf decides how flow c's batches reach the target; addOrigin is
// OriginHeaderFlows' answer for c.
func encodingOf(c *config.Flow, addOrigin bool) Encoding {
	e := Encoding{All: c.Passthrough == config.Off, Codec: c.Client.TargetCodec}
	var because []string
	if e.All {
		because = append(because, config.PassthroughKey+" = false")
	}
	if addOrigin {
		because = append(because, "the provenance header is written")
	}
	if e.Codec != "" {
		because = append(because, "the target producer sets compression.type = "+e.Codec)
	}
	switch {
	case e.All || addOrigin:
		e.What = "every batch is re-encoded"
	case e.Codec != "":
		e.What = "batches not compressed with " + e.Codec + " are re-encoded with it"
	}
	if e.Codec != "" && (e.All || addOrigin) {
		e.What += ", compressed with " + e.Codec
	}
	e.Why = strings.Join(because, " and ")
	return e
}

// DefaultFetches is the default of config.FetchesKey: how many fetches a
// flow keeps in flight to each source broker, each on its own connection
// and for its share of the partitions. A Kafka broker answers the requests
// of one connection one at a time, so with one fetch a long round trip
// leaves the link idle between a response and the next request; Kafka's
// own followers use num.replica.fetchers the same way.
const DefaultFetches = 2

// fetchesOf is the flow's fetches per source broker.
func fetchesOf(c *config.Flow) int {
	if c.FetchesPerBroker > 0 {
		return c.FetchesPerBroker
	}
	return DefaultFetches
}

// CheckpointsTransactionalID is the transactional ID of a flow's
// checkpoint writes in group mode: the worker that starts leading the flow
// fences the one before it.
func CheckpointsTransactionalID(c *config.Flow) string {
	return "kmirror-" + c.Name() + "-checkpoints"
}

// TransactionalID is the transactional ID of a flow's producer in
// exactly-once mode. A second kmirror running the same flow fences the
// first.
func TransactionalID(c *config.Flow) string {
	return "kmirror-" + c.Name()
}

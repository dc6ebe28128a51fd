package clients

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Role selects which role-specific keys are mapped.
type Role int

// Client roles.
const (
	Admin Role = iota // connection, security and common keys only
	Producer
	Consumer
)

func (r Role) String() string {
	switch r {
	case Admin:
		return "admin"
	case Producer:
		return "producer"
	case Consumer:
		return "consumer"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Options maps the connection, security and common keys of props (the
// admin role). bootstrap.servers is required.
func Options(props map[string]string) ([]kgo.Opt, error) { return RoleOptions(Admin, props) }

// AdminOptions is Options.
func AdminOptions(props map[string]string) ([]kgo.Opt, error) { return RoleOptions(Admin, props) }

// ProducerOptions is Options plus the producer keys.
func ProducerOptions(props map[string]string) ([]kgo.Opt, error) {
	return RoleOptions(Producer, props)
}

// ConsumerOptions is Options plus the consumer keys.
func ConsumerOptions(props map[string]string) ([]kgo.Opt, error) {
	return RoleOptions(Consumer, props)
}

// RoleOptions maps props to kgo options for role. All problems found are
// reported together.
func RoleOptions(role Role, props map[string]string) ([]kgo.Opt, error) {
	b := build(role, props)
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	return b.opts, nil
}

// Unused returns, sorted, the keys of props that RoleOptions(role, props)
// does not apply: keys with no franz-go equivalent (e.g. batch.size,
// receive.buffer.bytes, reconnect.backoff.ms), keys of another role, and
// ssl.*/sasl.* keys the security protocol does not use.
func Unused(role Role, props map[string]string) []string {
	b := build(role, props)
	var out []string
	for k := range props {
		if !b.used[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// builder accumulates options, marks the keys it applies and collects errors.
type builder struct {
	role  Role
	props map[string]string
	used  map[string]bool
	opts  []kgo.Opt
	errs  []error
}

func build(role Role, props map[string]string) *builder {
	b := &builder{role: role, props: props, used: map[string]bool{}}
	b.connection()
	b.common()
	switch role {
	case Producer:
		b.producer()
	case Consumer:
		b.consumer()
	}
	return b
}

// get returns a property and marks it used.
func (b *builder) get(key string) (string, bool) {
	v, ok := b.props[key]
	if ok {
		b.used[key] = true
	}
	return v, ok
}

func (b *builder) add(o ...kgo.Opt) { b.opts = append(b.opts, o...) }

func (b *builder) fail(err error) { b.errs = append(b.errs, err) }

// intKey parses a Java INT/LONG property within [lo, hi]; ok is false if
// the key is absent or invalid (the error is recorded).
func (b *builder) intKey(key string, lo, hi int64) (int64, bool) {
	v, ok := b.get(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		b.fail(fmt.Errorf("%s: %q is not an integer in [%d, %d]", key, v, lo, hi))
		return 0, false
	}
	return n, true
}

func (b *builder) msKey(key string, lo, hi int64) (time.Duration, bool) {
	n, ok := b.intKey(key, lo, hi)
	return time.Duration(n) * time.Millisecond, ok
}

func (b *builder) boolKey(key string) (val, ok bool) {
	v, ok := b.get(key)
	if !ok {
		return false, false
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	b.fail(fmt.Errorf("%s: %q is not true or false", key, v))
	return false, false
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// validPort reports whether p is a port number, 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

func clamp(d, lo, hi time.Duration) time.Duration { return max(lo, min(d, hi)) }

// connection maps bootstrap.servers, client.id and security.
func (b *builder) connection() {
	servers, _ := b.get("bootstrap.servers")
	seeds := splitList(servers)
	if len(seeds) == 0 {
		b.fail(errors.New("bootstrap.servers is required"))
	}
	for _, s := range seeds {
		if host, port, err := net.SplitHostPort(s); err != nil || host == "" || !validPort(port) {
			hint := ""
			if strings.Contains(s, " #") {
				hint = " (a '#' starts a comment only at the start of a line; this one is part of the value)"
			}
			b.fail(fmt.Errorf("bootstrap.servers: %q is not host:port%s", s, hint))
		}
	}
	if len(seeds) > 0 {
		b.add(kgo.SeedBrokers(seeds...))
	}
	if v, ok := b.get("client.id"); ok && v != "" {
		b.add(kgo.ClientID(v))
	}

	proto, _ := b.get("security.protocol")
	var useTLS, useSASL bool
	switch p := strings.ToUpper(strings.TrimSpace(proto)); p {
	case "", "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		b.fail(fmt.Errorf("security.protocol: unsupported value %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", proto))
	}
	if useTLS {
		if cfg, err := b.tlsConfig(); err != nil {
			b.fail(err)
		} else {
			b.add(kgo.DialTLSConfig(cfg))
		}
	}
	if useSASL {
		if m, err := b.saslMechanism(); err != nil {
			b.fail(err)
		} else {
			b.add(kgo.SASL(m))
		}
	}
}

// saslMechanism builds PLAIN, SCRAM, GSSAPI or OAUTHBEARER from sasl.mechanism and sasl.jaas.config.
func (b *builder) saslMechanism() (sasl.Mechanism, error) {
	mech, ok := b.get("sasl.mechanism")
	mech = strings.TrimSpace(mech)
	if !ok || mech == "" {
		mech = "GSSAPI" // Java's default
	}
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER":
	default:
		return nil, fmt.Errorf("sasl.mechanism: %q is not supported (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or OAUTHBEARER)", mech)
	}
	raw, ok := b.get("sasl.jaas.config")
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("sasl.jaas.config is required for sasl.mechanism=%s", mech)
	}
	j, err := ParseJAAS(raw)
	if err != nil {
		return nil, err
	}
	switch mech {
	case "GSSAPI":
		return b.gssapi(j)
	case "OAUTHBEARER":
		return b.oauthBearer(j)
	}
	user, _ := j.Option("username")
	pass, hasPass := j.Option("password")
	if user == "" || !hasPass {
		return nil, fmt.Errorf("sasl.jaas.config: %s needs username and password options", j.LoginModule)
	}
	if mech == "PLAIN" {
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	}
	token, _ := j.Option("tokenauth") // delegation tokens
	a := scram.Auth{User: user, Pass: pass, IsToken: strings.EqualFold(token, "true")}
	if mech == "SCRAM-SHA-256" {
		return a.AsSha256Mechanism(), nil
	}
	return a.AsSha512Mechanism(), nil
}

const maxInt32 = math.MaxInt32

// common maps keys shared by every role.
func (b *builder) common() {
	if d, ok := b.msKey("metadata.max.age.ms", 0, math.MaxInt64/int64(time.Millisecond)); ok {
		// kgo bounds: 10ms <= min age <= max age <= 1h (min age default 5s).
		d = clamp(d, 10*time.Millisecond, time.Hour)
		b.add(kgo.MetadataMaxAge(d))
		if d < 5*time.Second {
			b.add(kgo.MetadataMinAge(d))
		}
	}
	if d, ok := b.msKey("connections.max.idle.ms", -1, math.MaxInt64/int64(time.Millisecond)); ok {
		if d < 0 { // -1: never close idle connections; kgo's maximum is 15m
			d = 15 * time.Minute
		}
		b.add(kgo.ConnIdleTimeout(clamp(d, 100*time.Millisecond, 15*time.Minute)))
	}
	if d, ok := b.msKey("socket.connection.setup.timeout.ms", 0, maxInt32); ok && d > 0 {
		b.add(kgo.DialTimeout(d))
	}
	base, hasBase := b.msKey("retry.backoff.ms", 0, math.MaxInt64/int64(time.Millisecond))
	maxBackoff, hasMax := b.msKey("retry.backoff.max.ms", 0, math.MaxInt64/int64(time.Millisecond))
	if hasBase || hasMax {
		if !hasBase {
			base = 100 * time.Millisecond
		}
		if !hasMax {
			maxBackoff = time.Second
		}
		b.add(kgo.RetryBackoffFn(javaBackoff(base, maxBackoff)))
	}
	if on, ok := b.boolKey("enable.metrics.push"); ok && !on {
		b.add(kgo.DisableClientMetrics())
	}
}

// javaBackoff mirrors the Java client's retry backoff: base * 2^(tries-1)
// with ±20% jitter, capped at limit; a base above limit is a constant limit.
func javaBackoff(base, limit time.Duration) func(int) time.Duration {
	base = min(base, limit)
	return func(tries int) time.Duration {
		d := float64(base)
		for i := 1; i < tries && d < float64(limit); i++ {
			d *= 2
		}
		d = min(d, float64(limit))
		if base < limit {
			d *= 0.8 + 0.4*rand.Float64()
		}
		return time.Duration(d)
	}
}

// producer maps producer keys. batch.size is deliberately not mapped: kgo's
// ProducerBatchMaxBytes also caps single records, which Java's batch.size
// does not, so max.request.size is the faithful equivalent.
func (b *builder) producer() {
	acksAll := true
	if v, ok := b.get("acks"); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "all", "-1":
			b.add(kgo.RequiredAcks(kgo.AllISRAcks()))
		case "1":
			acksAll = false
			b.add(kgo.RequiredAcks(kgo.LeaderAck()))
		case "0":
			acksAll = false
			b.add(kgo.RequiredAcks(kgo.NoAck()))
		default:
			b.fail(fmt.Errorf("acks: %q is not all, -1, 0 or 1", v))
		}
	}
	inflight, hasInflight := b.intKey("max.in.flight.requests.per.connection", 1, maxInt32)
	retries, hasRetries := b.intKey("retries", 0, maxInt32)
	idem, idemSet := b.boolKey("enable.idempotence")

	// Java turns idempotence off silently when it conflicts with other
	// settings, unless it was asked for explicitly.
	conflict := !acksAll || (hasInflight && inflight > 5) || (hasRetries && retries == 0)
	switch {
	case idemSet && idem && conflict:
		b.fail(errors.New("enable.idempotence=true requires acks=all, max.in.flight.requests.per.connection <= 5 and retries > 0"))
	case !idemSet:
		idem = !conflict
	}
	if !idem {
		if !hasInflight {
			inflight = 5 // Java's default
		}
		b.add(kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(int(inflight)))
	}
	if hasRetries && retries < maxInt32 {
		b.add(kgo.RecordRetries(int(retries)))
	}

	if d, ok := b.msKey("linger.ms", 0, maxInt32); ok {
		b.add(kgo.ProducerLinger(min(d, time.Minute))) // kgo's maximum
	}
	if n, ok := b.intKey("max.request.size", 512, 1<<30); ok {
		b.add(kgo.ProducerBatchMaxBytes(int32(n)))
		if n > 100<<20-1<<20 { // keep the broker write limit above the batch limit
			b.add(kgo.BrokerMaxWriteBytes(int32(min(n+1<<20, 1<<30))))
		}
	}
	if v, ok := b.get("compression.type"); ok {
		var c kgo.CompressionCodec
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "none":
			c = kgo.NoCompression()
		case "gzip":
			c = kgo.GzipCompression()
		case "snappy":
			c = kgo.SnappyCompression()
		case "lz4":
			c = kgo.Lz4Compression()
		case "zstd":
			c = kgo.ZstdCompression()
		default:
			b.fail(fmt.Errorf("compression.type: %q is not none, gzip, snappy, lz4 or zstd", v))
		}
		b.add(kgo.ProducerBatchCompression(c)) // unused if the value was invalid
	}
	if d, ok := b.msKey("delivery.timeout.ms", 0, maxInt32); ok {
		b.add(kgo.RecordDeliveryTimeout(max(d, time.Second))) // kgo's minimum
	}
	if d, ok := b.msKey("request.timeout.ms", 0, maxInt32); ok {
		b.add(kgo.ProduceRequestTimeout(max(d, 100*time.Millisecond)))
	}
	if n, ok := b.intKey("buffer.memory", 0, math.MaxInt64); ok {
		b.add(kgo.MaxBufferedBytes(int(min(n, math.MaxInt))))
	}
}

// consumer maps consumer keys. Group keys (group.id, enable.auto.commit...)
// are left to the caller: MM2's consumers assign partitions.
func (b *builder) consumer() {
	if n, ok := b.intKey("fetch.max.bytes", 0, maxInt32); ok {
		n = min(n, 1<<30)
		b.add(kgo.FetchMaxBytes(int32(n)))
		if n > 100<<20-1<<20 { // keep the broker read limit above the fetch limit
			b.add(kgo.BrokerMaxReadBytes(int32(min(n+1<<20, 1<<30))))
		}
	}
	if n, ok := b.intKey("max.partition.fetch.bytes", 0, maxInt32); ok {
		b.add(kgo.FetchMaxPartitionBytes(int32(n)))
	}
	if n, ok := b.intKey("fetch.min.bytes", 0, maxInt32); ok {
		b.add(kgo.FetchMinBytes(int32(n)))
	}
	if d, ok := b.msKey("fetch.max.wait.ms", 0, maxInt32); ok {
		b.add(kgo.FetchMaxWait(max(d, 10*time.Millisecond))) // kgo's minimum
	}
	if v, ok := b.get("isolation.level"); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "read_committed":
			b.add(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		case "read_uncommitted":
			b.add(kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
		default:
			b.fail(fmt.Errorf("isolation.level: %q is not read_committed or read_uncommitted", v))
		}
	}
	if v, ok := b.get("auto.offset.reset"); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "earliest":
			b.add(kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		case "latest":
			b.add(kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
		case "none":
			b.add(kgo.ConsumeResetOffset(kgo.NoResetOffset()))
		default:
			b.fail(fmt.Errorf("auto.offset.reset: %q is not supported (want earliest, latest or none)", v))
		}
	}
	if v, ok := b.get("client.rack"); ok && v != "" {
		b.add(kgo.Rack(v))
	}
	if on, ok := b.boolKey("check.crcs"); ok && !on {
		b.add(kgo.DisableFetchCRCValidation())
	}
}

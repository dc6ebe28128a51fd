package clients

import (
	"crypto/tls"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

const seed = "127.0.0.1:1"

func withSeed(kv ...string) map[string]string {
	m := map[string]string{"bootstrap.servers": seed}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// newClient builds a client from props, which also runs kgo's own option
// validation, and returns it for OptValue checks.
func newClient(t *testing.T, role Role, props map[string]string) *kgo.Client {
	t.Helper()
	opts, err := RoleOptions(role, props)
	if err != nil {
		t.Fatalf("RoleOptions: %v", err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestMappings(t *testing.T) {
	scram := `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`
	for _, tc := range []struct {
		name  string
		role  Role
		props map[string]string
		opt   any
		want  any
	}{
		{"seeds", Admin, map[string]string{"bootstrap.servers": " a:9092, b:9093 ,,[::1]:9094"}, kgo.SeedBrokers, []string{"a:9092", "b:9093", "[::1]:9094"}},
		{"client.id", Admin, withSeed("client.id", "A->B|MirrorSourceConnector-0|replication-consumer"), kgo.ClientID, "A->B|MirrorSourceConnector-0|replication-consumer"},
		{"plaintext has no TLS", Admin, withSeed("security.protocol", "PLAINTEXT"), kgo.DialTLSConfig, noTLS{}},
		{"sasl plaintext", Admin, withSeed("security.protocol", "sasl_plaintext", "sasl.mechanism", "SCRAM-SHA-512", "sasl.jaas.config", scram), kgo.SASL, mechIs("SCRAM-SHA-512")},
		{"sasl plain", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN", "sasl.jaas.config", strings.Replace(scram, "scram.Scram", "plain.Plain", 1)), kgo.SASL, mechIs("PLAIN")},
		{"sasl sha256", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "SCRAM-SHA-256", "sasl.jaas.config", scram), kgo.SASL, mechIs("SCRAM-SHA-256")},
		{"metadata.max.age.ms", Admin, withSeed("metadata.max.age.ms", "30000"), kgo.MetadataMaxAge, 30 * time.Second},
		{"metadata.max.age.ms clamped", Admin, withSeed("metadata.max.age.ms", "86400000"), kgo.MetadataMaxAge, time.Hour},
		{"metadata.max.age.ms small lowers min age", Admin, withSeed("metadata.max.age.ms", "1000"), kgo.MetadataMinAge, time.Second},
		{"connections.max.idle.ms", Admin, withSeed("connections.max.idle.ms", "60000"), kgo.ConnIdleTimeout, time.Minute},
		{"connections.max.idle.ms -1", Admin, withSeed("connections.max.idle.ms", "-1"), kgo.ConnIdleTimeout, 15 * time.Minute},
		{"socket.connection.setup.timeout.ms", Admin, withSeed("socket.connection.setup.timeout.ms", "3000"), kgo.DialTimeout, 3 * time.Second},
		{"linger.ms", Producer, withSeed("linger.ms", "7"), kgo.ProducerLinger, 7 * time.Millisecond},
		{"max.request.size", Producer, withSeed("max.request.size", "2000000"), kgo.ProducerBatchMaxBytes, int32(2000000)},
		{"max.request.size large", Producer, withSeed("max.request.size", "209715200"), kgo.BrokerMaxWriteBytes, int32(209715200 + 1<<20)},
		{"acks all", Producer, withSeed("acks", "all"), kgo.RequiredAcks, kgo.AllISRAcks()},
		{"acks -1", Producer, withSeed("acks", "-1"), kgo.DisableIdempotentWrite, false},
		{"acks 1", Producer, withSeed("acks", "1"), kgo.RequiredAcks, kgo.LeaderAck()},
		{"acks 0", Producer, withSeed("acks", "0"), kgo.RequiredAcks, kgo.NoAck()},
		{"acks 1 disables idempotence", Producer, withSeed("acks", "1"), kgo.DisableIdempotentWrite, true},
		{"idempotence off", Producer, withSeed("enable.idempotence", "false"), kgo.MaxProduceRequestsInflightPerBroker, 5},
		{"MM2 worker producer", Producer, withSeed("enable.idempotence", "false", "max.in.flight.requests.per.connection", "1", "acks", "all"), kgo.MaxProduceRequestsInflightPerBroker, 1},
		{"in-flight > 5 disables idempotence", Producer, withSeed("max.in.flight.requests.per.connection", "10"), kgo.MaxProduceRequestsInflightPerBroker, 10},
		{"retries 0 disables idempotence", Producer, withSeed("retries", "0"), kgo.DisableIdempotentWrite, true},
		{"retries", Producer, withSeed("retries", "3"), kgo.RecordRetries, int64(3)},
		{"compression gzip", Producer, withSeed("compression.type", "gzip"), kgo.ProducerBatchCompression, []kgo.CompressionCodec{kgo.GzipCompression()}},
		{"compression none", Producer, withSeed("compression.type", "none"), kgo.ProducerBatchCompression, []kgo.CompressionCodec{kgo.NoCompression()}},
		{"compression zstd", Producer, withSeed("compression.type", "ZSTD"), kgo.ProducerBatchCompression, []kgo.CompressionCodec{kgo.ZstdCompression()}},
		{"delivery.timeout.ms", Producer, withSeed("delivery.timeout.ms", "120000"), kgo.RecordDeliveryTimeout, 2 * time.Minute},
		{"delivery.timeout.ms MAX", Producer, withSeed("delivery.timeout.ms", "2147483647"), kgo.RecordDeliveryTimeout, 2147483647 * time.Millisecond},
		{"request.timeout.ms", Producer, withSeed("request.timeout.ms", "30000"), kgo.ProduceRequestTimeout, 30 * time.Second},
		{"buffer.memory", Producer, withSeed("buffer.memory", "33554432"), kgo.MaxBufferedBytes, int64(33554432)},
		{"fetch.max.bytes", Consumer, withSeed("fetch.max.bytes", "1048576"), kgo.FetchMaxBytes, int32(1048576)},
		{"fetch.max.bytes large", Consumer, withSeed("fetch.max.bytes", "209715200"), kgo.BrokerMaxReadBytes, int32(209715200 + 1<<20)},
		{"max.partition.fetch.bytes", Consumer, withSeed("max.partition.fetch.bytes", "2097152"), kgo.FetchMaxPartitionBytes, int32(2097152)},
		{"fetch.min.bytes", Consumer, withSeed("fetch.min.bytes", "100"), kgo.FetchMinBytes, int32(100)},
		{"fetch.max.wait.ms", Consumer, withSeed("fetch.max.wait.ms", "500"), kgo.FetchMaxWait, 500 * time.Millisecond},
		{"isolation.level", Consumer, withSeed("isolation.level", "read_committed"), kgo.FetchIsolationLevel, int8(1)},
		{"isolation.level uncommitted", Consumer, withSeed("isolation.level", "READ_UNCOMMITTED"), kgo.FetchIsolationLevel, int8(0)},
		{"auto.offset.reset earliest", Consumer, withSeed("auto.offset.reset", "earliest"), kgo.ConsumeResetOffset, kgo.NewOffset().AtStart()},
		{"auto.offset.reset latest", Consumer, withSeed("auto.offset.reset", "latest"), kgo.ConsumeResetOffset, kgo.NewOffset().AtEnd()},
		{"auto.offset.reset none", Consumer, withSeed("auto.offset.reset", "none"), kgo.ConsumeResetOffset, kgo.NoResetOffset()},
		{"client.rack", Consumer, withSeed("client.rack", "r1"), kgo.Rack, "r1"},
		{"producer keys ignored by consumer", Consumer, withSeed("linger.ms", "99"), kgo.ProducerLinger, 10 * time.Millisecond},
		{"consumer keys ignored by admin", Admin, withSeed("fetch.max.wait.ms", "999"), kgo.FetchMaxWait, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, tc.role, tc.props)
			got := cl.OptValue(tc.opt)
			switch want := tc.want.(type) {
			case noTLS:
				if c, _ := got.(*tls.Config); c != nil {
					t.Errorf("TLS config set")
				}
			case mechIs:
				ms, _ := got.([]sasl.Mechanism)
				if len(ms) != 1 || ms[0].Name() != string(want) {
					t.Errorf("SASL = %v, want %s", ms, want)
				}
			default:
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %#v, want %#v", got, tc.want)
				}
			}
		})
	}
}

type (
	noTLS  struct{} // expect no TLS config
	mechIs string   // expect this SASL mechanism
)

func TestRetryBackoff(t *testing.T) {
	f := javaBackoff(100*time.Millisecond, time.Second)
	for tries, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		for range 20 {
			got := f(tries)
			lo, hi := time.Duration(float64(want)*0.8), time.Duration(float64(want)*1.2)
			if got < lo || got > hi {
				t.Fatalf("tries %d: %v not in [%v, %v]", tries, got, lo, hi)
			}
		}
	}
	if got := javaBackoff(5*time.Second, time.Second)(3); got != time.Second {
		t.Errorf("base above max: %v", got)
	}
	cl := newClient(t, Admin, withSeed("retry.backoff.ms", "50", "retry.backoff.max.ms", "50"))
	if got := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)(7); got != 50*time.Millisecond {
		t.Errorf("constant backoff: %v", got)
	}
}

func TestErrors(t *testing.T) {
	jaas := `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`
	for _, tc := range []struct {
		name  string
		role  Role
		props map[string]string
		want  string
	}{
		{"no bootstrap", Admin, map[string]string{}, "bootstrap.servers is required"},
		{"empty bootstrap", Admin, map[string]string{"bootstrap.servers": " , "}, "bootstrap.servers is required"},
		{"bootstrap without port", Admin, map[string]string{"bootstrap.servers": "a:1,b"}, `"b" is not host:port`},
		{"protocol", Admin, withSeed("security.protocol", "TLS"), "security.protocol"},
		{"gssapi default", Admin, withSeed("security.protocol", "SASL_SSL"), "sasl.jaas.config is required for sasl.mechanism=GSSAPI"},
		{"oauth", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "OAUTHBEARER", "sasl.jaas.config", jaas), "needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"},
		{"oauth without principal", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "OAUTHBEARER", "sasl.jaas.config", oauthLoginModule+` required unsecuredLoginStringClaim_scope=x;`), "needs option unsecuredLoginStringClaim_sub"},
		{"oauth token endpoint", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "OAUTHBEARER", "sasl.jaas.config", oauthLoginModule+` required;`, "sasl.oauthbearer.token.endpoint.url", "https://idp/token"), "sasl.oauthbearer.token.endpoint.url is not supported"},
		{"no jaas", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN"), "sasl.jaas.config is required"},
		{"bad jaas", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN", "sasl.jaas.config", "M required"), "invalid sasl.jaas.config"},
		{"jaas without password", Admin, withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN", "sasl.jaas.config", `M required username=u;`), "needs username and password"},
		{"jks truststore", Admin, withSeed("security.protocol", "SSL", "ssl.truststore.location", "/x.jks", "ssl.truststore.type", "JKS"), "ssl.truststore.location: open /x.jks"},
		{"pkcs12 keystore", Admin, withSeed("security.protocol", "SSL", "ssl.keystore.location", "/x.p12", "ssl.keystore.type", "PKCS12"), "ssl.keystore.location: open /x.p12"},
		{"jceks truststore type", Admin, withSeed("security.protocol", "SSL", "ssl.truststore.location", "/x.jks", "ssl.truststore.type", "JCEKS"), "ssl.truststore.type=JCEKS is not supported"},
		{"missing truststore file", Admin, withSeed("security.protocol", "SSL", "ssl.truststore.location", "/nonexistent/ca.pem", "ssl.truststore.type", "PEM"), "ssl.truststore.location"},
		{"endpoint algo", Admin, withSeed("security.protocol", "SSL", "ssl.endpoint.identification.algorithm", "ldaps"), "ssl.endpoint.identification.algorithm"},
		{"tls protocol", Admin, withSeed("security.protocol", "SSL", "ssl.enabled.protocols", "TLSv1.2,SSLv3"), `unsupported protocol "SSLv3"`},
		{"cipher", Admin, withSeed("security.protocol", "SSL", "ssl.cipher.suites", "TLS_FOO"), `unsupported cipher suite "TLS_FOO"`},
		{"bad int", Admin, withSeed("metadata.max.age.ms", "5m"), "metadata.max.age.ms"},
		{"acks", Producer, withSeed("acks", "2"), "acks"},
		{"explicit idempotence conflict", Producer, withSeed("enable.idempotence", "true", "acks", "1"), "enable.idempotence=true requires"},
		{"bool", Producer, withSeed("enable.idempotence", "yes"), "enable.idempotence"},
		{"compression", Producer, withSeed("compression.type", "brotli"), "compression.type"},
		{"max.request.size too small", Producer, withSeed("max.request.size", "100"), "max.request.size"},
		{"negative linger", Producer, withSeed("linger.ms", "-1"), "linger.ms"},
		{"isolation", Consumer, withSeed("isolation.level", "serializable"), "isolation.level"},
		{"reset by_duration", Consumer, withSeed("auto.offset.reset", "by_duration:PT1H"), "auto.offset.reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RoleOptions(tc.role, tc.props)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}

	// Every problem is reported at once.
	_, err := ProducerOptions(map[string]string{"acks": "x", "linger.ms": "y"})
	for _, want := range []string{"bootstrap.servers", "acks", "linger.ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("joined error %v lacks %q", err, want)
		}
	}
}

func TestUnused(t *testing.T) {
	props := withSeed(
		"client.id", "c", "security.protocol", "PLAINTEXT",
		"ssl.truststore.location", "/ca.pem", "sasl.mechanism", "PLAIN", // unused with PLAINTEXT
		"linger.ms", "5", "batch.size", "16384", "fetch.max.bytes", "1",
		"receive.buffer.bytes", "65536", "reconnect.backoff.ms", "50", "key.serializer", "x",
	)
	for _, tc := range []struct {
		role Role
		want []string
	}{
		{Admin, []string{"batch.size", "fetch.max.bytes", "key.serializer", "linger.ms", "receive.buffer.bytes", "reconnect.backoff.ms", "sasl.mechanism", "ssl.truststore.location"}},
		{Producer, []string{"batch.size", "fetch.max.bytes", "key.serializer", "receive.buffer.bytes", "reconnect.backoff.ms", "sasl.mechanism", "ssl.truststore.location"}},
		{Consumer, []string{"batch.size", "key.serializer", "linger.ms", "receive.buffer.bytes", "reconnect.backoff.ms", "sasl.mechanism", "ssl.truststore.location"}},
	} {
		if got := Unused(tc.role, props); !slices.Equal(got, tc.want) {
			t.Errorf("%v: Unused = %q, want %q", tc.role, got, tc.want)
		}
	}
	if got := Unused(Admin, withSeed()); len(got) != 0 {
		t.Errorf("Unused = %q", got)
	}
}

// Secrets never reach error messages.
func TestSecretsNotInErrors(t *testing.T) {
	keyPEM := "-----BEGIN PRIVATE KEY-----\n" + secret + "AAAA\n-----END PRIVATE KEY-----\n"
	base := withSeed("security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-512")
	cases := []map[string]string{}
	for _, jaas := range []string{
		`org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="` + secret,
		`org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password=` + secret + ` extra;`,
		`org.apache.kafka.common.security.scram.ScramLoginModule ` + secret + ` password="x";`,
		`org.apache.kafka.common.security.scram.ScramLoginModule required password="` + secret + `";`,
		secret,
	} {
		p := maps.Clone(base)
		p["sasl.jaas.config"] = jaas
		cases = append(cases, p)
	}
	p := maps.Clone(base)
	p["sasl.mechanism"] = "GSSAPI"
	p["sasl.jaas.config"] = `M required password="` + secret + `";`
	cases = append(cases, p)
	cases = append(cases, withSeed("security.protocol", "SSL",
		"ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", keyPEM, "ssl.keystore.key", keyPEM,
		"ssl.key.password", secret, "ssl.keystore.password", secret, "ssl.truststore.password", secret))
	cases = append(cases, withSeed("security.protocol", "SSL", "ssl.keystore.certificate.chain", keyPEM))
	cases = append(cases, withSeed("security.protocol", "SSL", "ssl.truststore.certificates", keyPEM))
	cases = append(cases, withSeed("security.protocol", "SSL", "ssl.truststore.certificates",
		"-----BEGIN CERTIFICATE-----\n"+secret+"AA==\n-----END CERTIFICATE-----\n"))
	for i, props := range cases {
		_, err := ConsumerOptions(props)
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:6]) {
			t.Errorf("case %d: error leaks a secret: %v", i, err)
		}
	}
}

func TestRoleString(t *testing.T) {
	if Admin.String() != "admin" || Producer.String() != "producer" || Consumer.String() != "consumer" || Role(9).String() != "Role(9)" {
		t.Error("Role.String")
	}
}

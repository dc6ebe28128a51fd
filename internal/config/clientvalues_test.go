package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestClientValues reads every client key kmirror acts on itself into
// Flow.Client: good values give the typed field, each bad value exactly one
// error naming file:line and the raw key (line 5 is the first line after
// kmirrorBase).
func TestClientValues(t *testing.T) {
	tests := []struct {
		name, line string
		get        func(ClientValues) any
		want       any
		err        string // the whole error; "" for none
	}{
		// auto.offset.reset: an enum.
		{"start default", "", func(v ClientValues) any { return v.StartAt }, ResetEarliest, ""},
		{"start latest", "A.consumer.auto.offset.reset = Latest ", func(v ClientValues) any { return v.StartAt }, ResetLatest, ""},
		{"start none", "A->B.consumer.auto.offset.reset = none", func(v ClientValues) any { return v.StartAt }, ResetNone, ""},
		{"start bad", "A.consumer.auto.offset.reset = sometimes", nil, nil,
			`mm2.properties:5: A.consumer.auto.offset.reset: invalid value "sometimes" (expected one of: earliest, latest, none)`},

		// isolation.level: an enum with an unset state.
		{"isolation unset", "", func(v ClientValues) any { return v.Isolation }, IsolationUnset, ""},
		{"isolation committed", "A.consumer.isolation.level = READ_COMMITTED", func(v ClientValues) any { return v.Isolation }, ReadCommitted, ""},
		{"isolation bad", "A->B.source.consumer.isolation.level = dirty", nil, nil,
			`mm2.properties:5: A->B.source.consumer.isolation.level: invalid value "dirty" (expected one of: read_committed, read_uncommitted)`},

		// Fetch sizes: ints from 0 to 2^31-1.
		{"fetch bytes unset", "", func(v ClientValues) any { return v.FetchMaxBytes }, int32(0), ""},
		{"fetch bytes", "A.consumer.fetch.max.bytes = 1048576", func(v ClientValues) any { return v.FetchMaxBytes }, int32(1 << 20), ""},
		{"fetch bytes not a number", "A.consumer.fetch.max.bytes = x", nil, nil,
			`mm2.properties:5: A.consumer.fetch.max.bytes: "x" is not an integer in [0, 2147483647]`},
		{"partition bytes", "A->B.consumer.max.partition.fetch.bytes = 65536", func(v ClientValues) any { return v.PartitionMaxBytes }, int32(65536), ""},
		{"partition bytes negative", "A->B.consumer.max.partition.fetch.bytes = -1", nil, nil,
			`mm2.properties:5: A->B.consumer.max.partition.fetch.bytes: "-1" is not an integer in [0, 2147483647]`},
		{"fetch wait", "A.consumer.fetch.max.wait.ms = 250", func(v ClientValues) any { return v.FetchMaxWait }, 250 * time.Millisecond, ""},
		{"fetch wait too long", "A.consumer.fetch.max.wait.ms = 2147483648", nil, nil,
			`mm2.properties:5: A.consumer.fetch.max.wait.ms: "2147483648" is not an integer in [0, 2147483647]`},

		{"session timeout", "A.consumer.session.timeout.ms = 6000\nA->B.kmirror.workers = group", func(v ClientValues) any { return v.SessionTimeout }, 6 * time.Second, ""},
		{"session timeout bad", "A.consumer.session.timeout.ms = 6s", nil, nil,
			`mm2.properties:5: A.consumer.session.timeout.ms: "6s" is not an integer in [0, 2147483647]`},
		{"heartbeat interval", "A->B.consumer.heartbeat.interval.ms = 500", func(v ClientValues) any { return v.HeartbeatInterval }, 500 * time.Millisecond, ""},
		{"heartbeat interval negative", "A->B.consumer.heartbeat.interval.ms = -500", nil, nil,
			`mm2.properties:5: A->B.consumer.heartbeat.interval.ms: "-500" is not an integer in [0, 2147483647]`},

		// compression.type: an enum, kept in lower case.
		{"codec unset", "", func(v ClientValues) any { return v.TargetCodec }, "", ""},
		{"codec", "B.producer.compression.type = ZSTD", func(v ClientValues) any { return v.TargetCodec }, "zstd", ""},
		{"codec override", "A->B.producer.override.compression.type = lz4", func(v ClientValues) any { return v.TargetCodec }, "lz4", ""},
		{"codec bad", "B.producer.compression.type = brotli", nil, nil,
			`mm2.properties:5: B.producer.compression.type: invalid value "brotli" (expected one of: none, gzip, snappy, lz4, zstd)`},

		// use.defaults.from: a string MM2 compares with "source".
		{"defaults from target", "", func(v ClientValues) any { return v.DefaultsFromSource }, false, ""},
		{"defaults from source", "A->B.use.defaults.from = source ", func(v ClientValues) any { return v.DefaultsFromSource }, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("mm2.properties", []byte(kmirrorBase+tt.line+"\n"), noEnv)
			if tt.err != "" {
				var ce *Error
				if err == nil || err.Error() != tt.err || !errors.As(err, &ce) {
					t.Fatalf("error %v, want exactly one *config.Error %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(c.Flows[0].Client); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings %q", c.Warnings)
			}
		})
	}
}

// TestClientValuesHidden: a bad value that came from a config provider is
// not shown in the error.
func TestClientValuesHidden(t *testing.T) {
	env := func(k string) (string, bool) { return "sekret", k == "WAIT" }
	_, err := Parse("mm2.properties", []byte(kmirrorBase+"config.providers = env\nconfig.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\nA.consumer.fetch.max.wait.ms = ${env:WAIT}\n"), env)
	if err == nil || !strings.Contains(err.Error(), "mm2.properties:7: A.consumer.fetch.max.wait.ms:") || strings.Contains(err.Error(), "sekret") {
		t.Errorf("error %v, want one at line 7 without the value", err)
	}
}

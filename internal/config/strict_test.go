package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNothingSilent: each case of the "nothing fails silently" report is
// honoured as MM2 reads it, warned about with file:line, or rejected with
// file:line.
func TestNothingSilent(t *testing.T) {
	tests := []struct {
		name  string
		line  string               // line 5 of the file
		check func(f *Flow) string // "" when the value was read right
		warn  string               // wanted warning (prefix mm2.properties:5: implied)
		err   string               // wanted error (prefix mm2.properties:5: implied)
	}{
		{name: "EOS upper case", line: "B.exactly.once.source.support = ENABLED",
			check: func(f *Flow) string { return want(f.ExactlyOnce, true) }},
		{name: "EOS trailing space", line: "B.exactly.once.source.support = enabled ",
			check: func(f *Flow) string { return want(f.ExactlyOnce, true) }},
		{name: "EOS disabled", line: "B.exactly.once.source.support = Disabled",
			check: func(f *Flow) string { return want(f.ExactlyOnce, false) }},
		{name: "EOS bad value", line: "B.exactly.once.source.support = yes",
			err: `B.exactly.once.source.support: invalid value "yes"`},
		{name: "group workers with exactly-once", line: "A->B.kmirror.workers = group\nB.exactly.once.source.support = enabled",
			check: func(f *Flow) string {
				return want(f.Workers == Group && f.ExactlyOnce && f.Slots == DefaultSlots, true)
			}},
		{name: "exactly-once slots", line: "A->B.kmirror.exactly.once.slots = 4 ",
			check: func(f *Flow) string { return want(f.Slots, 4) }},
		{name: "exactly-once slots zero", line: "A->B.kmirror.exactly.once.slots = 0",
			err: "A->B.kmirror.exactly.once.slots: 0 is out of range: must be a whole number from 1 to 1024"},
		{name: "workers mixed case", line: "A->B.kmirror.workers = Group",
			check: func(f *Flow) string { return want(f.Workers, Group) }},
		{name: "passthrough upper case", line: "kmirror.passthrough.enabled = FALSE ",
			check: func(f *Flow) string { return want(f.Passthrough, Off) }},
		{name: "kmirror key typo", line: "kmirror.passthru.enabled = true",
			warn: `unknown kmirror key "kmirror.passthru.enabled" (did you mean "kmirror.passthrough.enabled"?)`},
		{name: "kmirror key typo per flow", line: "A->B.kmirror.fetchs.per.broker = 2",
			warn: `unknown kmirror key "A->B.kmirror.fetchs.per.broker" (did you mean "A->B.kmirror.fetches.per.broker"?)`},
		{name: "fetches not a number", line: "A->B.kmirror.fetches.per.broker = banana",
			err: `A->B.kmirror.fetches.per.broker: want a whole number from 1 to 8, not "banana"`},
		{name: "flush interval overflows", line: "B.offset.flush.interval.ms = 9223372036854775807",
			err: "B.offset.flush.interval.ms: 9223372036854775807 is out of range"},
		{name: "flush interval not a number", line: "B.offset.flush.interval.ms = soon",
			err: `B.offset.flush.interval.ms: invalid number "soon"`},
		{name: "flush interval trimmed", line: "B.offset.flush.interval.ms = 250 ",
			check: func(f *Flow) string { return want(f.OffsetFlushInterval, 250*time.Millisecond) }},
		{name: "flow written with - (the > lost)", line: "A-B.topics = orders.*",
			warn: `unknown key "A-B.topics": did you mean "A->B.topics"? (a flow is written SOURCE->TARGET)`},
		{name: "trailing comment", line: "A->B.topics = orders.* # 需要根据实际情况修改",
			warn: `"A->B.topics": the value ends in "# 需要根据实际情况修改", which is part of the value`},
		{name: "hash inside a value", line: "A->B.topics = orders#1"},
		{name: "tasks.max", line: "tasks.max = 4", warn: `"tasks.max" has no effect: kmirror copies all partitions`},
		{name: "metric.reporters", line: "metric.reporters = com.example.Reporter",
			warn: `"metric.reporters" has no effect: Java metric reporters do not run in kmirror`},
		{name: "status.storage", line: "status.storage.topic = st", warn: `"status.storage.topic" has no effect: kmirror run writes no Connect status`},
		{name: "per-flow offsets.storage.topic", line: "A->B.offsets.storage.topic = o",
			warn: `"A->B.offsets.storage.topic" has no effect: kmirror keeps a flow's progress in the target worker's offset.storage.topic`},
		{name: "batch.size", line: "B.producer.batch.size = 100000",
			warn: `"B.producer.batch.size" has no effect: franz-go fills batches up to max.request.size`},
		{name: "producer of a cluster nothing writes to", line: "A.producer.batch.size = 100000",
			warn: `"A.producer.batch.size" has no effect: no enabled flow writes to cluster A`},
		{name: "send.buffer.bytes of a client", line: "A.consumer.send.buffer.bytes = 65536",
			warn: `"A.consumer.send.buffer.bytes" has no effect: kmirror leaves socket buffer sizes to the operating system`},
		{name: "send.buffer.bytes of the worker", line: "B.send.buffer.bytes = 65536",
			warn: `"B.send.buffer.bytes" has no effect: it is a Connect worker setting`},
		{name: "callback handler", line: "A.sasl.login.callback.handler.class = com.example.Handler",
			warn: `"A.sasl.login.callback.handler.class" has no effect: kmirror cannot load Java classes`},
		{name: "client key typo under an alias", line: "A.consumer.isolation.levle = read_committed",
			warn: `unknown consumer key "A.consumer.isolation.levle" (did you mean "A.consumer.isolation.level"?)`},
		{name: "client key typo per flow", line: "A->B.producer.lingr.ms = 5",
			warn: `unknown producer key "A->B.producer.lingr.ms" (did you mean "A->B.producer.linger.ms"?)`},
		{name: "cluster key typo", line: "A.bootstrap.server = a:1",
			warn: `unknown key "A.bootstrap.server" (did you mean "A.bootstrap.servers"?)`},
		{name: "worker client key at cluster level", line: "A.request.timeout.ms = 5000",
			warn: `"A.request.timeout.ms" has no effect: it is a Connect worker setting`},
		{name: "key of a disabled flow", line: "B->A.kmirror.fetches.per.broker = 3",
			warn: `"B->A.kmirror.fetches.per.broker" has no effect: flow B->A is not enabled`},
		{name: "producer key of a heartbeat-only pair", line: "B->A.producer.linger.ms = 5"},
		{name: "errors.tolerance", line: "A->B.errors.tolerance = all",
			warn: `"A->B.errors.tolerance" has no effect: Connect's error handling does not apply`},
		{name: "client number not a number", line: "A.consumer.fetch.max.bytes = banana",
			err: `A.consumer.fetch.max.bytes: "banana" is not an integer`},
		{name: "client enum", line: "A->B.producer.acks = maybe", err: `A->B.producer.acks: "maybe" is not all, -1, 0 or 1`},
		{name: "group timeouts in group mode", line: "A->B.kmirror.workers = group\nA.consumer.session.timeout.ms = 6000"},
		{name: "group timeouts without group mode", line: "A.consumer.session.timeout.ms = 6000",
			warn: `"A.consumer.session.timeout.ms" has no effect: only a flow with kmirror.workers = group uses a consumer group`},
		{name: "client enum in upper case, trimmed", line: "A.consumer.auto.offset.reset = LATEST ",
			check: func(f *Flow) string { return want(f.SourceConsumer["auto.offset.reset"], "latest") }},
		{name: "honoured client key", line: "A.consumer.fetch.max.bytes = 1048576",
			check: func(f *Flow) string { return want(f.SourceConsumer["fetch.max.bytes"], "1048576") }},
	}
	// Without an enabled flow the kmirror keys of every flow do nothing,
	// and every cluster needs its bootstrap servers for the heartbeats.
	if _, err := Parse("mm2.properties", []byte("clusters = A, B\nA.bootstrap.servers = a:1\n"), noEnv); err == nil ||
		!strings.Contains(err.Error(), `mm2.properties:1: clusters: cluster "B" has no B.bootstrap.servers`) {
		t.Errorf("heartbeats without bootstrap servers: %v", err)
	}
	c, err := Parse("mm2.properties", []byte("clusters = A, B\nkmirror.workers = group\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"), noEnv)
	if err != nil || len(c.Warnings) != 2 || c.Warnings[1] != `mm2.properties:2: "kmirror.workers" has no effect: no flow is enabled` {
		t.Errorf("no flow: %v %q", err, c.Warnings)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("mm2.properties", []byte(kmirrorBase+tt.line+"\n"), noEnv)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), "mm2.properties:5: "+tt.err) {
					t.Fatalf("error %v, want one containing %q", err, "mm2.properties:5: "+tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.warn != "":
				if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "mm2.properties:5: "+tt.warn) {
					t.Errorf("warnings %q, want one starting %q", c.Warnings, "mm2.properties:5: "+tt.warn)
				}
			case len(c.Warnings) != 0:
				t.Errorf("warnings %q, want none", c.Warnings)
			}
			if tt.check != nil {
				if msg := tt.check(c.Flows[0]); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

func want[T comparable](got, want T) string {
	if got != want {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	return ""
}

func TestTrailingComment(t *testing.T) {
	for _, tt := range []struct{ key, value, want string }{
		{"bootstrap.servers", "localhost:9092 # 需要根据实际情况修改", `"bootstrap.servers": the value ends in "# 需要根据实际情况修改"`},
		{"ssl.truststore.password", "pw\t#替换密码", `"ssl.truststore.password": the value ends in " #...",`},
		{"topics", "a#b", ""},
		{"topics", "#a", ""},
	} {
		got := ""
		if TrailingComment(tt.value) != "" {
			got = TrailingCommentWarning(tt.key, tt.value)
		}
		if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) || strings.Contains(got, "替换密码") {
			t.Errorf("%s = %q: warning %q, want %q", tt.key, tt.value, got, tt.want)
		}
	}
}

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestStrictConfig runs kmirror on real brokers with the mistakes a new
// user makes: values MM2 reads case-insensitively and trimmed take effect
// (exactly-once with "ENABLED ", group workers off with "Single"), keys that
// have no effect and typos are each warned about with file:line while the
// flow copies, and bad numbers stop kmirror with file:line.
func TestStrictConfig(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	src, dst := alias(t, "a"), alias(t, "b")
	topic := testkafka.Topic(t, "strict")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 20, "s")

	typos := []struct{ line, want string }{
		{dst + ".exactly.once.source.support = ENABLED ", ""}, // honoured: exactly-once
		{src + "->" + dst + ".kmirror.workers = Single", ""},  // honoured
		{"kmirror.passthru.enabled = true", `unknown kmirror key "kmirror.passthru.enabled" (did you mean "kmirror.passthrough.enabled"?)`},
		{"tasks.max = 4", `"tasks.max" has no effect`},
		{"metric.reporters = com.example.Reporter", `"metric.reporters" has no effect`},
		{"status.storage.topic = st", `"status.storage.topic" has no effect`},
		{src + "->" + dst + ".offsets.storage.topic = own-offsets", `"` + src + "->" + dst + `.offsets.storage.topic" has no effect`},
		{dst + ".producer.batch.size = 100000", `"` + dst + `.producer.batch.size" has no effect`},
		{src + ".consumer.send.buffer.bytes = 65536", `"` + src + `.consumer.send.buffer.bytes" has no effect`},
		{src + ".sasl.login.callback.handler.class = com.example.Handler", `"` + src + `.sasl.login.callback.handler.class" has no effect`},
		{src + ".consumer.isolation.levle = read_committed", `unknown consumer key "` + src + `.consumer.isolation.levle" (did you mean "` + src + `.consumer.isolation.level"?)`},
	}
	base := mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic)
	first := strings.Count(base, "\n") + 1
	lines := make([]string, len(typos))
	for i, ty := range typos {
		lines[i] = ty.line
	}
	cfg := writeFile(t, "mm2.properties", base+strings.Join(lines, "\n")+"\n")
	p := startKmirror(t, cfg)
	waitFor(t, 90*time.Second, "the records on the target", func() bool {
		return hasTopic(t, b, src+"."+topic) && countAll(t, b, src+"."+topic) == 20
	})
	p.stop()
	log := strings.ReplaceAll(p.log.String(), `\"`, `"`) // slog quotes the messages
	for i, ty := range typos {
		if ty.want == "" {
			continue
		}
		if want := "mm2.properties:" + strconv.Itoa(first+i) + ": " + ty.want; !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// 'ENABLED ' turned exactly-once on: the flow writes in transactions.
	if !strings.Contains(log, "records and progress are written in transactions") {
		t.Errorf("exactly.once.source.support = 'ENABLED ' did not turn exactly-once on")
	}

	// Bad values stop kmirror before it connects, naming file:line.
	for _, bad := range []struct{ line, want string }{
		{src + "->" + dst + ".kmirror.fetches.per.broker = banana", `kmirror.fetches.per.broker: want a whole number from 1 to 8, not "banana"`},
		{dst + ".offset.flush.interval.ms = 9223372036854775807", "offset.flush.interval.ms: 9223372036854775807 is out of range"},
		{dst + ".exactly.once.source.support = yes", `exactly.once.source.support: invalid value "yes"`},
	} {
		cfg := writeFile(t, "bad.properties", base+bad.line+"\n")
		out, code := runKmirror(t, 30*time.Second, "run", cfg)
		if want := "bad.properties:" + strconv.Itoa(first) + ": "; code == 0 || !strings.Contains(out, want) || !strings.Contains(out, bad.want) {
			t.Errorf("%s: exit %d, want non-zero with %q and %q:\n%s", bad.line, code, want, bad.want, out)
		}
	}
}

// TestHeartbeatsOnly: with clusters listed and no flow enabled, Apache MM2
// runs a heartbeat herder for every pair, so heartbeats flow both ways;
// kmirror, on the same kind of file, does the same.
func TestHeartbeatsOnly(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	beats := func(c *testkafka.Cluster, from, to string) int {
		if !hasTopic(t, c, "heartbeats") {
			return 0
		}
		n := 0
		for _, r := range c.ReadAll(t, "heartbeats") {
			if h, err := wire.DecodeHeartbeat(r.Key, r.Value); err == nil && h.SourceAlias == from && h.TargetAlias == to {
				n++
			}
		}
		return n
	}
	for _, who := range []string{"Apache MM2", "kmirror"} {
		src, dst := alias(t, "a"), alias(t, "b")
		cfg := writeFile(t, "mm2.properties", strings.Join([]string{
			"clusters = " + src + ", " + dst,
			src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
			dst + ".bootstrap.servers = " + strings.Join(b.Bootstrap, ","),
			"heartbeats.topic.replication.factor = 1",
			// MM2's Connect workers need these on one-node clusters.
			"offset.storage.replication.factor = 1",
			"status.storage.replication.factor = 1",
			"config.storage.replication.factor = 1",
		}, "\n")+"\n")
		var p *proc
		if who == "kmirror" {
			p = startKmirror(t, cfg)
		} else {
			p = startMM2(t, cfg)
		}
		// Apache MM2 starts a Connect worker per direction: at load 40
		// that took more than 2 minutes.
		waitFor(t, 240*time.Second, who+": heartbeats both ways", func() bool {
			return beats(b, src, dst) >= 2 && beats(a, dst, src) >= 2
		})
		if who == "kmirror" {
			p.stop()
			if log := p.log.String(); !strings.Contains(log, "no flow is enabled: only heartbeats run") {
				t.Errorf("kmirror did not say it runs heartbeats only:\n%s", log)
			}
		} else {
			p.stopJava()
		}
		t.Logf("%s: heartbeats %s->%s: %d, %s->%s: %d", who, src, dst, beats(b, src, dst), dst, src, beats(a, dst, src))
	}
}

package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestThrottle copies 4 MB at 500 kB/s: it cannot finish in less than
// about seven seconds (one second of burst), on either data path; without
// the throttle it takes about one. Only the lower bound is checked; a
// loaded machine may take longer.
func TestThrottle(t *testing.T) {
	t.Parallel()
	for _, pt := range []bool{false, true} {
		name := "re-encode"
		if pt {
			name = "passthrough"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cs := testkafka.Shared(t, 2)
			a, b := cs[0], cs[1]
			topic := testkafka.Topic(t, "throttle")
			a.CreateTopic(t, topic, 2, nil)
			cl := a.Client(t, kgo.ProducerBatchCompression(kgo.NoCompression()))
			var recs []*kgo.Record
			for i := 0; i < 4000; i++ {
				recs = append(recs, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{byte(i)}, 1000)})
			}
			if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			src, dst := alias(t, "src"), alias(t, "dst")
			extra := []string{src + "->" + dst + ".topics = " + topic, src + "->" + dst + ".kmirror.throttle.bytes.per.second = 500000"}
			if pt {
				extra = append(extra, "kmirror.passthrough.enabled = true")
			} else {
				extra = append(extra, reencodeAll)
			}
			start := time.Now()
			p := startKmirror(t, writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, extra...)))
			remote := src + "." + topic
			waitFor(t, 90*time.Second, "all records", func() bool { return countOrZero(t, b, remote) == 4000 })
			took := time.Since(start)
			p.stop()
			t.Logf("4 MB at 500 kB/s took %v from start", took)
			if took < 5*time.Second {
				t.Errorf("4 MB arrived in %v; at 500 kB/s with a 1 s burst it needs about 7 s", took)
			}
		})
	}
}

func TestThrottleBadValue(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	cfg := writeFile(t, "mm2.properties", mm2Config("s", "d", cs[0], cs[1], "s->d.kmirror.throttle.bytes.per.second = fast"))
	out, code := runKmirror(t, 60*time.Second, "run", cfg)
	if code == 0 || !strings.Contains(out, "mm2.properties:") || !strings.Contains(out, "kmirror.throttle.bytes.per.second") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

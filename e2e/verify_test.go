package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestVerify: kmirror verify proves a copy complete, and catches a record on
// the target that did not come from the source.
func TestVerify(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "verify")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 100, "v")
	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic))
	p := startKmirror(t, cfg)
	remote := src + "." + topic
	waitFor(t, 60*time.Second, "records", func() bool { return countOrZero(t, b, remote) == 100 })
	p.stop()

	out, code := runKmirror(t, 60*time.Second, "verify", "--config", cfg, "--output", "json")
	var res struct {
		OK         bool `json:"ok"`
		Partitions []struct {
			Matched int `json:"matched"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.OK || len(res.Partitions) != 2 || res.Partitions[0].Matched+res.Partitions[1].Matched != 100 {
		t.Fatalf("verify of a complete copy: exit %d, %+v, %v\n%s", code, res, err, out)
	}

	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: remote, Partition: 0, Value: []byte("not from the source")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, code = runKmirror(t, 60*time.Second, "verify", "--config", cfg)
	if code != 1 || !strings.Contains(out, "matches no source record") || !strings.Contains(out, "1 of 2 partitions differ") {
		t.Errorf("verify after a foreign write: exit %d\n%s", code, out)
	}
}

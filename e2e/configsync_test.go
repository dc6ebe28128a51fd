package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// topicOverride returns topic's own value of key on c, if it has one.
func topicOverride(t *testing.T, c *testkafka.Cluster, topic, key string) (string, bool) {
	t.Helper()
	rcs, err := c.Admin(t).DescribeTopicConfigs(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range rc.Configs {
		if kv.Key == key && kv.Source == kmsg.ConfigSourceDynamicTopicConfig {
			return kv.MaybeValue(), true
		}
	}
	return "", false
}

func alterTopic(t *testing.T, c *testkafka.Cluster, topic string, op kadm.AlterConfig) {
	t.Helper()
	rs, err := c.Admin(t).AlterTopicConfigs(ctx(t), []kadm.AlterConfig{op}, topic)
	if err == nil {
		_, err = rs.On(topic, func(r *kadm.AlterConfigsResponse) error { return r.Err })
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestTopicConfigSync changes a source topic's config while kmirror runs:
// the remote topic follows within sync.topic.configs.interval.seconds, and
// a removed source override is removed from the remote topic too.
func TestTopicConfigSync(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "cfgsync")
	a.CreateTopic(t, topic, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic,
		"sync.topic.configs.interval.seconds = 2"))
	p := startKmirror(t, cfg)
	remote := src + "." + topic
	retention := func() string { v, _ := topicOverride(t, b, remote, "retention.ms"); return v }
	waitFor(t, 30*time.Second, remote+" with retention.ms=3600000", func() bool {
		return hasTopic(t, b, remote) && retention() == "3600000"
	})

	alterTopic(t, a, topic, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")})
	waitFor(t, 15*time.Second, "remote retention.ms=7200000", func() bool { return retention() == "7200000" })

	alterTopic(t, a, topic, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"})
	waitFor(t, 15*time.Second, "remote retention.ms override removed", func() bool {
		_, ok := topicOverride(t, b, remote, "retention.ms")
		return !ok
	})
	p.stop()
}

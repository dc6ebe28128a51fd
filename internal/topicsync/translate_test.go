package topicsync

import (
	"bytes"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestTranslate(t *testing.T) {
	const (
		topic = kmsg.ConfigSourceDynamicTopicConfig
		def   = kmsg.ConfigSourceDefaultConfig
	)
	cfg := func(k, v string, src kmsg.ConfigSource) kadm.Config {
		return kadm.Config{Key: k, Value: str(v), Source: src}
	}
	// What a Kafka 4 target knows of the keys below.
	kafka4 := map[string]bool{
		"retention.ms": true, "segment.ms": true, "message.timestamp.before.max.ms": true, "message.timestamp.after.max.ms": true,
	}
	kafka3 := map[string]bool{
		"retention.ms": true, "message.format.version": true, "message.timestamp.difference.max.ms": true,
		"message.timestamp.before.max.ms": true, "message.timestamp.after.max.ms": true,
	}
	tests := []struct {
		name  string
		known map[string]bool
		src   []kadm.Config
		want  map[string]string // key -> value of the translated configs that are not defaults
		warns []string          // keys warned about
	}{
		{"known keys pass", kafka4,
			[]kadm.Config{cfg("retention.ms", "1000", topic)},
			map[string]string{"retention.ms": "1000"}, nil},
		{"removed key dropped", kafka4,
			[]kadm.Config{cfg("message.format.version", "0.10.2-IV0", topic), cfg("retention.ms", "1000", topic)},
			map[string]string{"retention.ms": "1000"}, []string{"message.format.version"}},
		{"removed key at its default dropped without a warning", kafka4,
			[]kadm.Config{cfg("message.downconversion.enable", "true", def)},
			map[string]string{}, nil},
		{"difference split into before and after, over their defaults", kafka4,
			[]kadm.Config{cfg("message.timestamp.difference.max.ms", "3600000", topic),
				cfg("message.timestamp.before.max.ms", "9223372036854775807", def)},
			map[string]string{"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"},
			[]string{"message.timestamp.difference.max.ms"}},
		{"a successor the source sets itself wins", kafka4,
			[]kadm.Config{cfg("message.timestamp.difference.max.ms", "3600000", topic),
				cfg("message.timestamp.after.max.ms", "60000", topic)},
			map[string]string{"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "60000"},
			[]string{"message.timestamp.difference.max.ms"}},
		{"a target that knows the old keys keeps them", kafka3,
			[]kadm.Config{cfg("message.format.version", "0.10.2-IV0", topic), cfg("message.timestamp.difference.max.ms", "5", topic)},
			map[string]string{"message.format.version": "0.10.2-IV0", "message.timestamp.difference.max.ms": "5"}, nil},
		{"excluded old key is neither translated nor warned about", kafka4,
			[]kadm.Config{cfg("message.downconversion.enable", "false", topic), cfg("min.insync.replicas", "2", topic)},
			map[string]string{}, nil},
		{"a v0 answer without sources: target default values are defaults", kafka4,
			[]kadm.Config{cfg("retention.ms", "604800000", sourceV0), cfg("segment.ms", "1000", sourceV0),
				cfg("message.format.version", "0.11.0-IV2", sourceV0)},
			map[string]string{"segment.ms": "1000"}, []string{"message.format.version"}},
		{"unknown target keeps everything", nil,
			[]kadm.Config{cfg("message.format.version", "0.10.2-IV0", topic)},
			map[string]string{"message.format.version": "0.10.2-IV0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			s := &Syncer{TargetAlias: "B", Log: slog.New(slog.NewTextHandler(&log, nil)),
				ConfigExclude: regexp.MustCompile(`^(message\.downconversion\.enable|min\.insync\.replicas)$`)}
			s.defaults = map[string]string{"retention.ms": "604800000", "segment.ms": "604800000"}
			for range 2 { // the second round warns no more
				got := map[string]string{}
				for _, c := range s.translate("t", tt.src, tt.known) {
					if c.Source != def {
						got[c.Key] = *c.Value
					}
				}
				if !maps.Equal(got, tt.want) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
			}
			var warned []string
			for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
				if _, rest, ok := strings.Cut(line, " key="); ok {
					warned = append(warned, strings.Fields(rest)[0])
					if !strings.Contains(line, "topic=t ") || !strings.Contains(line, "level=WARN") {
						t.Errorf("warning %q does not name the topic", line)
					}
				}
			}
			if !slices.Equal(warned, tt.warns) {
				t.Errorf("warned about %v, want %v\n%s", warned, tt.warns, log.String())
			}
		})
	}
}

// TestCreateDropsRefusedConfigs creates a topic on a real Kafka 4 broker
// with configs it refuses (a removed key, a bad value): the topic is created
// with the rest, and each refused key is warned about once.
func TestCreateDropsRefusedConfigs(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	name := testkafka.Topic(t, "refused")
	s, log := brokerSyncer(t, cs[0], cs[1], name)
	ctx := testCtx(t)
	tp := &Topic{Name: name, Remote: "A." + name, Partitions: 1}
	made, err := s.createAll(ctx, []*Topic{tp}, map[string]map[string]*string{name: {
		"retention.ms":           str("1000"),
		"message.format.version": str("0.10.2"),
		"cleanup.policy":         str("nonsense"),
	}})
	if err != nil || len(made) != 1 || !strings.Contains(log.String(), "configs=1") {
		t.Fatalf("created %d topics, err %v; want 1, nil, and configs=1 logged\n%s", len(made), err, log)
	}
	waitListed(t, ctx, s.Target, []string{tp.Remote}, func(int) int32 { return 1 })
	if got := topicOverrides(t, ctx, s.Target, tp.Remote); !maps.Equal(got, map[string]string{"retention.ms": "1000"}) {
		t.Errorf("remote topic configs %v, want only retention.ms=1000", got)
	}
	for _, key := range []string{"message.format.version", "cleanup.policy"} {
		if c := strings.Count(log.String(), "key="+key+" "); c != 1 {
			t.Errorf("%d warnings about %s, want 1:\n%s", c, key, log)
		}
	}
}

package topicsync

import (
	"regexp"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConfigChanges(t *testing.T) {
	const (
		topic   = kmsg.ConfigSourceDynamicTopicConfig
		def     = kmsg.ConfigSourceDefaultConfig
		static  = kmsg.ConfigSourceStaticBrokerConfig
		cluster = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	)
	cfg := func(k, v string, src kmsg.ConfigSource) kadm.Config {
		return kadm.Config{Key: k, Value: str(v), Source: src}
	}
	exclude := regexp.MustCompile(`^(min\.insync\.replicas)$`)
	tests := []struct {
		name       string
		fromSource bool
		src, tgt   []kadm.Config
		want       []string // describeOps form: "k=v" SET, "-k" DELETE
	}{
		{"new override is set",
			false, []kadm.Config{cfg("retention.ms", "1000", topic)}, []kadm.Config{cfg("retention.ms", "604800000", def)},
			[]string{"retention.ms=1000"}},
		{"changed override is set",
			false, []kadm.Config{cfg("retention.ms", "2000", topic)}, []kadm.Config{cfg("retention.ms", "1000", topic)},
			[]string{"retention.ms=2000"}},
		{"same override is unchanged",
			false, []kadm.Config{cfg("retention.ms", "1000", topic)}, []kadm.Config{cfg("retention.ms", "1000", topic)},
			nil},
		{"same value from the target's default still becomes an override",
			false, []kadm.Config{cfg("retention.ms", "1000", topic)}, []kadm.Config{cfg("retention.ms", "1000", cluster)},
			[]string{"retention.ms=1000"}},
		{"source default deletes the target override",
			false, []kadm.Config{cfg("retention.ms", "604800000", def)}, []kadm.Config{cfg("retention.ms", "1000", topic)},
			[]string{"-retention.ms"}},
		{"source default and no target override is unchanged",
			false, []kadm.Config{cfg("retention.ms", "604800000", def)}, []kadm.Config{cfg("retention.ms", "604800000", def)},
			nil},
		{"source default is set with use.defaults.from=source",
			true, []kadm.Config{cfg("retention.ms", "604800000", def)}, []kadm.Config{cfg("retention.ms", "1000", topic)},
			[]string{"retention.ms=604800000"}},
		{"source cluster-wide default is set",
			false, []kadm.Config{cfg("max.message.bytes", "2000000", cluster)}, nil,
			[]string{"max.message.bytes=2000000"}},
		{"excluded override is untouched",
			false, []kadm.Config{cfg("min.insync.replicas", "2", topic)}, []kadm.Config{cfg("min.insync.replicas", "1", topic)},
			nil},
		{"excluded default does not delete",
			false, []kadm.Config{cfg("min.insync.replicas", "1", def)}, []kadm.Config{cfg("min.insync.replicas", "2", topic)},
			nil},
		{"static broker config is untouched",
			false, []kadm.Config{cfg("segment.bytes", "1024", static)}, []kadm.Config{cfg("segment.bytes", "4096", topic)},
			nil},
		{"sensitive config is untouched",
			false, []kadm.Config{{Key: "secret", Sensitive: true, Source: topic}}, []kadm.Config{cfg("secret", "x", topic)},
			nil},
		{"target-only override stays",
			false, nil, []kadm.Config{cfg("retention.ms", "1000", topic)},
			nil},
		{"several at once, in source order",
			false,
			[]kadm.Config{cfg("cleanup.policy", "compact", topic), cfg("retention.ms", "604800000", def), cfg("segment.ms", "60000", topic)},
			[]kadm.Config{cfg("cleanup.policy", "delete", def), cfg("retention.ms", "1000", topic), cfg("segment.ms", "60000", topic)},
			[]string{"cleanup.policy=compact", "-retention.ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Syncer{ConfigExclude: exclude, DefaultsFromSource: tt.fromSource}
			got := describeOps(s.configChanges(tt.src, tt.tgt))
			if !slices.Equal(got, tt.want) && (len(got) > 0 || len(tt.want) > 0) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

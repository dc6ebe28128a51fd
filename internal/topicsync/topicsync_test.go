package topicsync

import (
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/policy"
)

func str(s string) *string { return &s }

func TestTargetConfigs(t *testing.T) {
	cs := []kadm.Config{
		{Key: "retention.ms", Value: str("1000"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "cleanup.policy", Value: str("delete"), Source: kmsg.ConfigSourceDefaultConfig},
		{Key: "min.insync.replicas", Value: str("2"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "log.secret", Value: nil, Sensitive: true, Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "segment.bytes", Value: str("1024"), Source: kmsg.ConfigSourceStaticBrokerConfig},
		{Key: "max.message.bytes", Value: str("2000000"), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig},
	}
	exclude, err := policy.CompilePattern(policy.DefaultConfigPropertiesExclude)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		fromSource bool
		exclude    *regexp.Regexp
		want       []string
	}{
		{"defaults from target", false, exclude, []string{"retention.ms", "max.message.bytes"}},
		{"defaults from source", true, exclude, []string{"retention.ms", "cleanup.policy", "max.message.bytes"}},
		{"no exclusions", false, nil, []string{"retention.ms", "min.insync.replicas", "max.message.bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Syncer{DefaultsFromSource: tt.fromSource, ConfigExclude: tt.exclude}
			got := s.TargetConfigs(cs)
			if len(got) != len(tt.want) {
				t.Errorf("got %d configs %v, want %v", len(got), keys(got), tt.want)
			}
			for _, k := range tt.want {
				if _, ok := got[k]; !ok {
					t.Errorf("missing %s in %v", k, keys(got))
				}
			}
		})
	}
}

func keys(m map[string]*string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// defaultPolicy returns MM2's default replication policy and a filter of
// the topics that match pattern, with the default exclusions.
func defaultPolicy(t testing.TB, pattern string) (policy.Policy, *policy.Filter) {
	t.Helper()
	p, err := policy.New(policy.Config{Class: "DefaultReplicationPolicy", Separator: "."})
	if err != nil {
		t.Fatal(err)
	}
	f, err := policy.NewFilter([]string{pattern}, policy.DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	return p, f
}

func TestShouldReplicate(t *testing.T) {
	p, f := defaultPolicy(t, ".*")
	none, err := policy.NewFilter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		topic  string
		filter *policy.Filter
		hb     bool
		want   bool
	}{
		{"orders", f, true, true},
		{"__consumer_offsets", f, true, false},
		{"mm2-offset-syncs.B.internal", f, true, false},
		{"B.orders", f, true, false},   // came from the target: a cycle
		{"C.orders", f, true, true},    // from a third cluster
		{"C.B.orders", f, true, false}, // passed through the target
		{"heartbeats", none, true, true},
		{"heartbeats", none, false, false},
		{"B.heartbeats", none, true, false},
	}
	for _, tt := range tests {
		s := &Syncer{SourceAlias: "A", TargetAlias: "B", Policy: p, Topics: tt.filter, HeartbeatsReplication: tt.hb}
		if got := s.ShouldReplicate(tt.topic); got != tt.want {
			t.Errorf("ShouldReplicate(%q, heartbeats %v) = %v, want %v", tt.topic, tt.hb, got, tt.want)
		}
	}
}

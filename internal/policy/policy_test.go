package policy

import (
	"strings"
	"testing"
)

func mustNew(t *testing.T, c Config) Policy {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewClasses(t *testing.T) {
	for _, class := range []string{"", DefaultClass, "DefaultReplicationPolicy", IdentityClass, "IdentityReplicationPolicy", " " + DefaultClass + " "} {
		if _, err := New(Config{Class: class}); err != nil {
			t.Errorf("New(%q): %v", class, err)
		}
	}
	_, err := New(Config{Class: "com.example.MyPolicy"})
	if err == nil || !strings.Contains(err.Error(), "com.example.MyPolicy") {
		t.Fatalf("unknown class error = %v", err)
	}
}

type opt struct {
	s  string
	ok bool
}

func TestDefaultPolicy(t *testing.T) {
	dot := mustNew(t, Config{})
	under := mustNew(t, Config{Separator: "__", SeparatorSet: true, InternalSeparatorEnabled: true})
	underOff := mustNew(t, Config{Separator: "__", SeparatorSet: true, InternalSeparatorEnabled: false})
	// The flag is ignored when no separator was set explicitly.
	unsetOff := mustNew(t, Config{InternalSeparatorEnabled: false})
	// An explicit "." with the flag off is the same as the default.
	dotOff := mustNew(t, Config{Separator: ".", SeparatorSet: true})

	tests := []struct {
		name string
		p    Policy
		fn   func(Policy) any
		want any
	}{
		{"format", dot, func(p Policy) any { return p.FormatRemoteTopic("us-west", "orders") }, "us-west.orders"},
		{"format custom sep", under, func(p Policy) any { return p.FormatRemoteTopic("A", "t") }, "A__t"},
		{"format empty sep", mustNew(t, Config{SeparatorSet: true}), func(p Policy) any { return p.FormatRemoteTopic("A", "t") }, "At"},
		{"source simple", dot, func(p Policy) any { return opt2(p.TopicSource("us-west.orders")) }, opt{"us-west", true}},
		{"source nested", dot, func(p Policy) any { return opt2(p.TopicSource("A.B.t")) }, opt{"A", true}},
		{"source none", dot, func(p Policy) any { return opt2(p.TopicSource("x")) }, opt{"", false}},
		{"source trailing sep", dot, func(p Policy) any { return opt2(p.TopicSource("a.")) }, opt{"", false}},
		{"source trailing seps", dot, func(p Policy) any { return opt2(p.TopicSource("a...")) }, opt{"", false}},
		{"source only seps", dot, func(p Policy) any { return opt2(p.TopicSource("..")) }, opt{"", false}},
		{"source empty", dot, func(p Policy) any { return opt2(p.TopicSource("")) }, opt{"", false}},
		{"source double sep", dot, func(p Policy) any { return opt2(p.TopicSource("a..b")) }, opt{"a", true}},
		{"source leading sep", dot, func(p Policy) any { return opt2(p.TopicSource(".x")) }, opt{"", true}},
		{"source custom sep", under, func(p Policy) any { return opt2(p.TopicSource("A__b.c")) }, opt{"A", true}},
		{"source custom sep no match", under, func(p Policy) any { return opt2(p.TopicSource("A.b")) }, opt{"", false}},
		{"source regex chars in sep", mustNew(t, Config{Separator: "|", SeparatorSet: true}), func(p Policy) any { return opt2(p.TopicSource("A|b")) }, opt{"A", true}},
		{"upstream", dot, func(p Policy) any { return opt2(p.UpstreamTopic("A.B.t")) }, opt{"B.t", true}},
		{"upstream none", dot, func(p Policy) any { return opt2(p.UpstreamTopic("t")) }, opt{"", false}},
		{"upstream double sep", dot, func(p Policy) any { return opt2(p.UpstreamTopic("a..b")) }, opt{".b", true}},
		{"upstream leading sep", dot, func(p Policy) any { return opt2(p.UpstreamTopic(".x")) }, opt{"x", true}},
		{"original", dot, func(p Policy) any { return p.OriginalTopic("C.B.A.x") }, "x"},
		{"original local", dot, func(p Policy) any { return p.OriginalTopic("x") }, "x"},
		{"original trailing", dot, func(p Policy) any { return p.OriginalTopic("A.b.") }, "b."},
		{"heartbeats", dot, func(p Policy) any { return p.HeartbeatsTopic() }, "heartbeats"},
		{"heartbeats custom sep", under, func(p Policy) any { return p.HeartbeatsTopic() }, "heartbeats"},
		{"offset syncs", dot, func(p Policy) any { return p.OffsetSyncsTopic("B") }, "mm2-offset-syncs.B.internal"},
		{"offset syncs custom", under, func(p Policy) any { return p.OffsetSyncsTopic("CLUSTER") }, "mm2-offset-syncs__CLUSTER__internal"},
		{"offset syncs flag off", underOff, func(p Policy) any { return p.OffsetSyncsTopic("CLUSTER") }, "mm2-offset-syncs.CLUSTER.internal"},
		{"offset syncs unset flag off", unsetOff, func(p Policy) any { return p.OffsetSyncsTopic("C") }, "mm2-offset-syncs.C.internal"},
		{"offset syncs explicit dot flag off", dotOff, func(p Policy) any { return p.OffsetSyncsTopic("C") }, "mm2-offset-syncs.C.internal"},
		{"checkpoints", dot, func(p Policy) any { return p.CheckpointsTopic("A") }, "A.checkpoints.internal"},
		{"checkpoints custom", under, func(p Policy) any { return p.CheckpointsTopic("CLUSTER") }, "CLUSTER__checkpoints__internal"},
		{"checkpoints flag off", underOff, func(p Policy) any { return p.CheckpointsTopic("CLUSTER") }, "CLUSTER.checkpoints.internal"},
		{"is heartbeats", dot, func(p Policy) any { return p.IsHeartbeatsTopic("heartbeats") }, true},
		{"is heartbeats remote", dot, func(p Policy) any { return p.IsHeartbeatsTopic("B.A.heartbeats") }, true},
		{"is heartbeats not", dot, func(p Policy) any { return p.IsHeartbeatsTopic("myheartbeats") }, false},
		{"is heartbeats suffix", dot, func(p Policy) any { return p.IsHeartbeatsTopic("A.heartbeats.x") }, false},
		{"is checkpoints", dot, func(p Policy) any { return p.IsCheckpointsTopic("A.checkpoints.internal") }, true},
		{"is checkpoints custom", under, func(p Policy) any { return p.IsCheckpointsTopic("A__checkpoints__internal") }, true},
		{"is checkpoints custom dot", under, func(p Policy) any { return p.IsCheckpointsTopic("A.checkpoints.internal") }, false},
		{"is checkpoints flag off", underOff, func(p Policy) any { return p.IsCheckpointsTopic("A.checkpoints.internal") }, true},
		{"is mm2 internal", dot, func(p Policy) any { return p.IsMM2InternalTopic("mm2-offsets.A.internal") }, true},
		{"is mm2 internal custom", under, func(p Policy) any { return p.IsMM2InternalTopic("x__internal") }, true},
		{"is mm2 internal not", dot, func(p Policy) any { return p.IsMM2InternalTopic("mm2-offsets_CLUSTER_internal") }, false},
		{"internal underscore sep not", dot, func(p Policy) any { return p.IsInternalTopic("mm2-offsets_CLUSTER_internal") }, false},
		{"internal custom sep", mustNew(t, Config{Separator: "_", SeparatorSet: true, InternalSeparatorEnabled: true}), func(p Policy) any { return p.IsInternalTopic("mm2-offsets_CLUSTER_internal") }, true},
		{"internal hidden", dot, func(p Policy) any { return p.IsInternalTopic(".hiddentopic") }, true},
		{"internal dunder", dot, func(p Policy) any { return p.IsInternalTopic("__consumer_offsets") }, true},
		{"internal dash", dot, func(p Policy) any { return p.IsInternalTopic("connect-offsets-internal") }, true},
		{"internal dot (custom sep)", under, func(p Policy) any { return p.IsInternalTopic("mm2-configs.A.internal") }, true},
		{"internal plain", dot, func(p Policy) any { return p.IsInternalTopic("orders") }, false},
		{"internal heartbeats", dot, func(p Policy) any { return p.IsInternalTopic("heartbeats") }, false},
		{"internal single underscore", dot, func(p Policy) any { return p.IsInternalTopic("_schemas") }, false},
	}
	for _, tt := range tests {
		if got := tt.fn(tt.p); got != tt.want {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
		}
	}
}

func opt2(s string, ok bool) opt { return opt{s, ok} }

func TestIdentityPolicy(t *testing.T) {
	id := mustNew(t, Config{Class: IdentityClass, SourceAlias: "A"})
	noAlias := mustNew(t, Config{Class: "IdentityReplicationPolicy"})
	under := mustNew(t, Config{Class: IdentityClass, SourceAlias: "A", Separator: "_", SeparatorSet: true, InternalSeparatorEnabled: true})
	tests := []struct {
		name string
		p    Policy
		fn   func(Policy) any
		want any
	}{
		{"format keeps name", id, func(p Policy) any { return p.FormatRemoteTopic("A", "orders") }, "orders"},
		{"format heartbeats", id, func(p Policy) any { return p.FormatRemoteTopic("A", "heartbeats") }, "A.heartbeats"},
		{"format heartbeats-like", id, func(p Policy) any { return p.FormatRemoteTopic("A", "myheartbeats") }, "A.myheartbeats"},
		{"format heartbeats custom sep", under, func(p Policy) any { return p.FormatRemoteTopic("B", "heartbeats") }, "B_heartbeats"},
		{"source is alias", id, func(p Policy) any { return opt2(p.TopicSource("orders")) }, opt{"A", true}},
		{"source dotted is alias", id, func(p Policy) any { return opt2(p.TopicSource("B.orders")) }, opt{"A", true}},
		{"source unset alias", noAlias, func(p Policy) any { return opt2(p.TopicSource("orders")) }, opt{"", false}},
		{"source heartbeats", id, func(p Policy) any { return opt2(p.TopicSource("B.heartbeats")) }, opt{"B", true}},
		{"source local heartbeats", id, func(p Policy) any { return opt2(p.TopicSource("heartbeats")) }, opt{"", false}},
		{"upstream self", id, func(p Policy) any { return opt2(p.UpstreamTopic("orders")) }, opt{"orders", true}},
		{"upstream self without alias", noAlias, func(p Policy) any { return opt2(p.UpstreamTopic("orders")) }, opt{"orders", true}},
		{"upstream heartbeats", id, func(p Policy) any { return opt2(p.UpstreamTopic("B.A.heartbeats")) }, opt{"A.heartbeats", true}},
		{"upstream heartbeats-like", id, func(p Policy) any { return opt2(p.UpstreamTopic("myheartbeats")) }, opt{"", false}},
		{"original", id, func(p Policy) any { return p.OriginalTopic("orders") }, "orders"},
		{"original heartbeats", id, func(p Policy) any { return p.OriginalTopic("B.A.heartbeats") }, "heartbeats"},
		{"is heartbeats", id, func(p Policy) any { return p.IsHeartbeatsTopic("A.heartbeats") }, true},
		{"is heartbeats like", id, func(p Policy) any { return p.IsHeartbeatsTopic("x.myheartbeats") }, false},
		{"internal names unchanged", id, func(p Policy) any { return p.CheckpointsTopic("A") + " " + p.OffsetSyncsTopic("B") }, "A.checkpoints.internal mm2-offset-syncs.B.internal"},
		{"internal", id, func(p Policy) any { return p.IsInternalTopic("A.checkpoints.internal") }, true},
	}
	for _, tt := range tests {
		if got := tt.fn(tt.p); got != tt.want {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
		}
	}
}

func TestJavaSplit(t *testing.T) {
	tests := []struct {
		s, sep string
		want   []string
	}{
		{"a.b", ".", []string{"a", "b"}},
		{"a.", ".", []string{"a"}},
		{".a", ".", []string{"", "a"}},
		{"..", ".", []string{}},
		{"", ".", []string{""}},
		{"abc", ".", []string{"abc"}},
		{"a..b..", ".", []string{"a", "", "b"}},
		{"abc", "", []string{"a", "b", "c"}},
		{"", "", []string{""}},
	}
	for _, tt := range tests {
		got := javaSplit(tt.s, tt.sep)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("javaSplit(%q, %q) = %q, want %q", tt.s, tt.sep, got, tt.want)
		}
	}
}

func TestIsCycle(t *testing.T) {
	dot := mustNew(t, Config{})
	id := mustNew(t, Config{Class: IdentityClass, SourceAlias: "B"})
	tests := []struct {
		p      Policy
		topic  string
		target string
		want   bool
	}{
		{dot, "orders", "A", false},
		{dot, "A.orders", "A", true},
		{dot, "A.orders", "C", false},
		{dot, "C.B.A.x", "A", true},
		{dot, "C.B.A.x", "B", true},
		{dot, "C.B.A.x", "D", false},
		{dot, "A.heartbeats", "A", true},
		{dot, "heartbeats", "A", false},
		{dot, ".x", "", true}, // empty alias from a leading separator
		{id, "orders", "A", false},
		{id, "orders", "B", true}, // identity: the alias itself is the target
		{id, "A.heartbeats", "A", true},
	}
	for _, tt := range tests {
		if got := IsCycle(tt.p, tt.topic, tt.target); got != tt.want {
			t.Errorf("IsCycle(%q, %q) = %v, want %v", tt.topic, tt.target, got, tt.want)
		}
	}
}

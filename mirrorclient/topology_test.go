package mirrorclient

import (
	"slices"
	"testing"

	"github.com/kmirror/kmirror/internal/policy"
)

func mustPolicy(t *testing.T, c policy.Config) policy.Policy {
	t.Helper()
	p, err := policy.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var defaultPol = policy.Config{InternalSeparatorEnabled: true}

func TestReplicationHops(t *testing.T) {
	tests := []struct {
		name   string
		pol    policy.Config
		topics []string
		alias  string
		want   int
	}{
		{"direct", defaultPol, []string{"A.heartbeats"}, "A", 1},
		{"two hops", defaultPol, []string{"B.A.heartbeats"}, "A", 2},
		{"middle of chain", defaultPol, []string{"B.A.heartbeats"}, "B", 1},
		{"shortest path wins", defaultPol, []string{"C.B.A.heartbeats", "A.heartbeats", "B.A.heartbeats"}, "A", 1},
		{"three hops", defaultPol, []string{"C.B.A.heartbeats"}, "A", 3},
		{"not upstream", defaultPol, []string{"A.heartbeats", "B.heartbeats"}, "C", -1},
		{"local heartbeats only", defaultPol, []string{"heartbeats"}, "A", -1},
		{"data topics do not count", defaultPol, []string{"A.orders", "heartbeats"}, "A", -1},
		{"no topics", defaultPol, nil, "A", -1},
		{"cycle stops", defaultPol, []string{"A.B.A.heartbeats"}, "C", -1},
		{"cycle still finds earlier", defaultPol, []string{"A.B.A.heartbeats"}, "B", 2},
		{"custom separator", policy.Config{Separator: "__", SeparatorSet: true, InternalSeparatorEnabled: true},
			[]string{"B__A__heartbeats", "A.heartbeats"}, "A", 2},
		{"identity policy prefixes heartbeats", policy.Config{Class: policy.IdentityClass, SourceAlias: "A"},
			[]string{"A.heartbeats", "orders"}, "A", 1},
		{"identity policy ignores data topics", policy.Config{Class: policy.IdentityClass, SourceAlias: "A"},
			[]string{"orders", "heartbeats"}, "A", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replicationHops(mustPolicy(t, tt.pol), tt.topics, tt.alias); got != tt.want {
				t.Errorf("replicationHops(%q, %q) = %d, want %d", tt.topics, tt.alias, got, tt.want)
			}
		})
	}
}

func TestCountHops(t *testing.T) {
	p := mustPolicy(t, defaultPol)
	tests := []struct {
		topic, alias string
		want         int
	}{
		{"source2.source1.topic", "source1", 2},
		{"source2.source1.topic", "source2", 1},
		{"source2.source1.topic", "source3", -1},
		{"topic", "source1", -1},
		{"A.B.A.B.t", "C", -1},
	}
	for _, tt := range tests {
		if got := countHops(p, tt.topic, tt.alias); got != tt.want {
			t.Errorf("countHops(%q, %q) = %d, want %d", tt.topic, tt.alias, got, tt.want)
		}
	}
}

// Topics of a cluster C downstream of A and B.
var sample = []string{
	"heartbeats", "A.heartbeats", "B.A.heartbeats", "B.heartbeats",
	"A.orders", "B.A.orders", "B.payments", "local",
	"A.checkpoints.internal", "B.checkpoints.internal",
	"mm2-offset-syncs.A.internal", "mm2-offsets.A.internal", "__consumer_offsets", ".hidden",
	"A.x-internal", "heartbeats!", "source1-heartbeats",
}

func TestTopologyLists(t *testing.T) {
	identity := policy.Config{Class: policy.IdentityClass, SourceAlias: "A"}
	noAlias := policy.Config{Class: policy.IdentityClass}
	tests := []struct {
		name string
		pol  policy.Config
		fn   func(policy.Policy, []string) []string
		want []string
	}{
		{"heartbeat topics", defaultPol, heartbeatTopics,
			[]string{"A.heartbeats", "B.A.heartbeats", "B.heartbeats", "heartbeats"}},
		{"checkpoint topics", defaultPol, checkpointTopics,
			[]string{"A.checkpoints.internal", "B.checkpoints.internal"}},
		{"upstream clusters", defaultPol, upstreamClusters, []string{"A", "B"}},
		{"remote topics", defaultPol, func(p policy.Policy, ts []string) []string { return remoteTopics(p, ts, "") },
			[]string{"A.heartbeats", "A.orders", "B.A.heartbeats", "B.A.orders", "B.heartbeats", "B.payments"}},
		{"remote topics from A", defaultPol, func(p policy.Policy, ts []string) []string { return remoteTopics(p, ts, "A") },
			[]string{"A.heartbeats", "A.orders"}},
		{"remote topics from B", defaultPol, func(p policy.Policy, ts []string) []string { return remoteTopics(p, ts, "B") },
			[]string{"B.A.heartbeats", "B.A.orders", "B.heartbeats", "B.payments"}},
		// With the identity policy every non-internal topic is from A,
		// except heartbeats topics, which keep their prefixes.
		{"identity remote topics", identity, func(p policy.Policy, ts []string) []string { return remoteTopics(p, ts, "") },
			[]string{"A.heartbeats", "A.orders", "B.A.heartbeats", "B.A.orders", "B.heartbeats", "B.payments", "heartbeats!", "local"}},
		{"identity remote topics from A", identity, func(p policy.Policy, ts []string) []string { return remoteTopics(p, ts, "A") },
			[]string{"A.heartbeats", "A.orders", "B.A.orders", "B.payments", "heartbeats!", "local"}},
		{"identity without alias", noAlias, func(p policy.Policy, ts []string) []string { return remoteTopics(p, ts, "") },
			[]string{"A.heartbeats", "B.A.heartbeats", "B.heartbeats"}},
		{"identity upstream clusters", identity, upstreamClusters, []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.fn(mustPolicy(t, tt.pol), sample)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCustomSeparatorTopics(t *testing.T) {
	topics := []string{"A__checkpoints__internal", "A.checkpoints.internal", "A__heartbeats", "A__t", "A.t"}
	tests := []struct {
		name            string
		internalSep     bool
		wantCheckpoints []string
		wantRemote      []string
	}{
		{"internal separator enabled", true, []string{"A__checkpoints__internal"}, []string{"A__heartbeats", "A__t"}},
		// "A__checkpoints__internal" is then an ordinary remote topic.
		{"internal separator disabled", false, []string{"A.checkpoints.internal"}, []string{"A__checkpoints__internal", "A__heartbeats", "A__t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, policy.Config{Separator: "__", SeparatorSet: true, InternalSeparatorEnabled: tt.internalSep})
			if got := checkpointTopics(p, topics); !slices.Equal(got, tt.wantCheckpoints) {
				t.Errorf("checkpoint topics %q, want %q", got, tt.wantCheckpoints)
			}
			if got := remoteTopics(p, topics, "A"); !slices.Equal(got, tt.wantRemote) {
				t.Errorf("remote topics %q, want %q", got, tt.wantRemote)
			}
		})
	}
}

package flow

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/progress"
)

func TestRoleDefaults(t *testing.T) {
	tests := []struct {
		name          string
		role          clients.Role
		props         map[string]string
		maxBytes      int32
		partitionMax  int32
		wantFetchOpts bool
	}{
		{"consumer, nothing set", clients.Consumer, nil, DefaultFetchMaxBytes, DefaultPartitionFetchMaxBytes, true},
		{"consumer, Java keys set", clients.Consumer, map[string]string{"fetch.max.bytes": "1", "max.partition.fetch.bytes": "1"}, 50 << 20, 1 << 20, true},
		{"producer", clients.Producer, nil, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append(roleDefaults(tt.role, tt.props), kgo.SeedBrokers("127.0.0.1:1"))
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if !tt.wantFetchOpts {
				if n := len(roleDefaults(tt.role, tt.props)); n != 1 {
					t.Errorf("%d options, want only the metadata age", n)
				}
				return
			}
			// With the Java keys set, roleDefaults adds nothing and
			// franz-go's own defaults remain (the keys themselves are
			// applied by internal/clients).
			if got := cl.OptValue(kgo.FetchMaxBytes).(int32); got != tt.maxBytes {
				t.Errorf("fetch max bytes %d, want %d", got, tt.maxBytes)
			}
			if got := cl.OptValue(kgo.FetchMaxPartitionBytes).(int32); got != tt.partitionMax {
				t.Errorf("partition fetch max bytes %d, want %d", got, tt.partitionMax)
			}
		})
	}
}

func TestPositiveInt(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "1048576": 1048576, " 500 ": 500, "-1": 0, "x": 0, "99999999999": 0} {
		if got := positiveInt(in); got != want {
			t.Errorf("positiveInt(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestDataPathOf(t *testing.T) {
	base := "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
	tests := []struct {
		name        string
		body        string
		eos, origin bool
		want        bool
		why, err    string
	}{
		{"default", base, false, false, true, "", ""},
		{"auto", base + PassthroughKey + " = auto\n", false, false, true, "", ""},
		{"true", base + "A->B." + PassthroughKey + " = true\n", false, false, true, "", ""},
		{"false", base + PassthroughKey + " = false\n", false, false, false, PassthroughKey + " = false", ""},
		{"exactly-once", base, true, false, false, "exactly-once", ""},
		{"provenance header", base + PassthroughKey + " = true\n", false, true, false, "the provenance header is written", ""},
		{"target codec", base + "B.producer.compression.type = zstd\n", false, false, false, "compression.type", ""},
		{"bad value", base + "\n" + PassthroughKey + " = yes\n", false, false, false, "", "test.properties:6: " + PassthroughKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.properties", []byte(tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, why, err := dataPathOf(cfg.Flows[0], tt.eos, tt.origin)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("passthrough %v (%q), want %v (%q)", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestFetchesOf(t *testing.T) {
	base := "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
	tests := []struct {
		name, body string
		want       int
		err        string
	}{
		{"default", base, DefaultFetches, ""},
		{"record path default", base + PassthroughKey + " = false\n", DefaultRecordFetches, ""},
		{"record path set", base + PassthroughKey + " = false\n" + FetchesKey + " = 2\n", 2, ""},
		{"top level", base + FetchesKey + " = 4\n", 4, ""},
		{"per flow", base + "A->B." + FetchesKey + " = 1\n", 1, ""},
		{"most", base + FetchesKey + " = 8\n", MaxFetches, ""},
		{"zero", base + FetchesKey + " = 0\n", 0, "test.properties:5: " + FetchesKey},
		{"too many", base + "A->B." + FetchesKey + " = 9\n", 0, "test.properties:5: A->B." + FetchesKey},
		{"not a number", base + FetchesKey + " = two\n", 0, `not "two"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.properties", []byte(tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			pt, _, err := dataPathOf(cfg.Flows[0], false, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fetchesOf(cfg.Flows[0], pt)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("fetchesOf = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestGroupLeader(t *testing.T) {
	tests := []struct {
		name       string
		subscribed []string
		owned      []progress.TP
		want       bool
	}{
		{"nothing subscribed", nil, []progress.TP{{Topic: "a", Partition: 0}}, false},
		{"owns partition 0 of the first topic", []string{"b", "a"}, []progress.TP{{Topic: "a", Partition: 0}}, true},
		{"owns another partition of it", []string{"b", "a"}, []progress.TP{{Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}, false},
		{"owns nothing", []string{"a"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &groupHooks{subscribed: map[string]bool{}}
			for _, s := range tt.subscribed {
				h.subscribed[s] = true
			}
			m := map[string][]int32{}
			for _, tp := range tt.owned {
				m[tp.Topic] = append(m[tp.Topic], tp.Partition)
			}
			h.track(m, true)
			if got := h.leads(); got != tt.want {
				t.Errorf("leads() = %v, want %v", got, tt.want)
			}
			h.track(m, false)
			if h.leads() {
				t.Error("still leads after its partitions were revoked")
			}
		})
	}
}

// TestPeriodicFollowsLead runs a job that only the leading worker may run:
// nothing while it does not lead, at once and then every interval while it
// does, nothing again after it stopped leading.
func TestPeriodicFollowsLead(t *testing.T) {
	var leading atomic.Bool
	var runs atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic(ctx, 30*time.Millisecond, 5*time.Millisecond, leading.Load, func() { runs.Add(1) })
	}()
	time.Sleep(100 * time.Millisecond)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d runs while not leading", n)
	}
	leading.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runs.Load(); n < 3 {
		t.Fatalf("%d runs in 5 s while leading, want it every 30 ms", n)
	}
	leading.Store(false)
	time.Sleep(200 * time.Millisecond) // a run already under way may end
	n := runs.Load()
	time.Sleep(100 * time.Millisecond)
	if m := runs.Load(); m != n {
		t.Errorf("%d more runs after leading ended", m-n)
	}
	cancel()
	<-done

	// Without a lead function it runs at once, whoever leads.
	runs.Store(0)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go periodic(ctx, time.Hour, time.Millisecond, nil, func() { runs.Add(1) })
	deadline = time.Now().Add(5 * time.Second)
	for runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs without a lead function, want 1 at once", runs.Load())
	}
}

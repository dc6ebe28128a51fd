// Package topology finds which clusters replicate to which from the
// heartbeats topics on each cluster, and sets that against the enabled flows.
package topology

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/wire"
)

// tailRecords is how many of the newest records of a heartbeats topic are
// read to find its last heartbeat.
const tailRecords = 50

// HeartbeatsTopic is a heartbeats topic found on a cluster.
type HeartbeatsTopic struct {
	Topic string `json:"topic"`
	// Chain lists the clusters the heartbeats came through, nearest
	// first: "B.A.heartbeats" is [B A]. Empty for the local topic.
	Chain []string `json:"chain"`
	// Last is the newest heartbeat read from the topic (nil: none).
	Last *time.Time `json:"last_heartbeat,omitempty"`
}

// Cluster is what was found on one declared cluster.
type Cluster struct {
	Alias  string            `json:"alias"`
	Error  string            `json:"error,omitempty"`
	Topics []HeartbeatsTopic `json:"heartbeat_topics"`
}

// Edge is a replication seen in the heartbeats, configured or not.
type Edge struct {
	Source     string     `json:"source"`
	Target     string     `json:"target"`
	Configured bool       `json:"configured"`
	Evidence   []string   `json:"evidence"` // "A.heartbeats on B"
	Last       *time.Time `json:"last_heartbeat,omitempty"`
	AgeSeconds *float64   `json:"last_heartbeat_age_seconds,omitempty"`
}

// Flow is an enabled flow of the configuration.
type Flow struct {
	Name string `json:"name"`
	Seen bool   `json:"seen"`
}

// Report is what "kmirror topology" prints.
type Report struct {
	Clusters          []Cluster `json:"clusters"`
	Edges             []Edge    `json:"replications"`
	Paths             []string  `json:"paths"` // multi-hop, "A->B->C"
	Flows             []Flow    `json:"configured_flows"`
	ConfiguredNotSeen []string  `json:"configured_not_seen"`
	SeenNotConfigured []string  `json:"seen_not_configured"`
}

// ScanAll scans every declared cluster at once, each within timeout.
func ScanAll(cfg *config.Config, timeout time.Duration) []Cluster {
	scans := make([]Cluster, len(cfg.Clusters))
	var wg sync.WaitGroup
	for i, a := range cfg.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			scans[i] = Scan(ctx, cfg, a)
		}()
	}
	wg.Wait()
	return scans
}

// clusterView returns the admin client properties and replication policy
// of alias, as a flow into it sees them.
func clusterView(cfg *config.Config, alias string) (map[string]string, policy.Policy, error) {
	for _, other := range cfg.Clusters {
		if other == alias {
			continue
		}
		f, err := cfg.Pair(other, alias)
		if err != nil {
			return nil, nil, err
		}
		return f.TargetAdmin, f.Policy, nil
	}
	// A lone cluster: its own connection keys and the default policy.
	p, err := policy.New(policy.Config{InternalSeparatorEnabled: true})
	return cfg.ClusterProps[alias], p, err
}

// Scan lists the heartbeats topics of one cluster and reads the
// newest heartbeat of each remote one.
func Scan(ctx context.Context, cfg *config.Config, alias string) Cluster {
	s := Cluster{Alias: alias, Topics: []HeartbeatsTopic{}}
	props, pol, err := clusterView(cfg, alias)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	cl, opts, err := clients.New("kmirror-cli|topology", clients.Admin, props)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx)
	if err != nil {
		s.Error = fmt.Sprintf("unreachable: %v", err)
		return s
	}
	for _, name := range td.Names() {
		if !pol.IsHeartbeatsTopic(name) {
			continue
		}
		h := HeartbeatsTopic{Topic: name, Chain: chain(pol, name)}
		if len(h.Chain) > 0 {
			h.Last = lastHeartbeat(ctx, adm, opts, name)
		}
		s.Topics = append(s.Topics, h)
	}
	sort.Slice(s.Topics, func(i, j int) bool { return s.Topics[i].Topic < s.Topics[j].Topic })
	return s
}

// chain returns the aliases topic was replicated through, nearest first,
// stopping at a repeated alias.
func chain(pol policy.Policy, topic string) []string {
	var out []string
	for {
		src, ok := pol.TopicSource(topic)
		if !ok || slices.Contains(out, src) {
			return out
		}
		out = append(out, src)
		if topic, ok = pol.UpstreamTopic(topic); !ok {
			return out
		}
	}
}

// lastHeartbeat reads the newest records of partition 0 of topic and
// returns the latest heartbeat timestamp among them (nil if none).
func lastHeartbeat(ctx context.Context, adm *kadm.Client, opts []kgo.Opt, topic string) *time.Time {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil
	}
	end, ok1 := ends.Lookup(topic, 0)
	start, ok2 := starts.Lookup(topic, 0)
	if !ok1 || !ok2 || end.Err != nil || start.Err != nil || end.Offset <= start.Offset {
		return nil
	}
	from := max(start.Offset, end.Offset-tailRecords)
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	var last int64 = -1
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if h, err := wire.DecodeHeartbeat(r.Key, r.Value); err == nil && h.Timestamp > last {
				last = h.Timestamp
			}
			done = done || r.Offset >= end.Offset-1
		})
		if done {
			break
		}
	}
	if last < 0 {
		return nil
	}
	t := time.UnixMilli(last)
	return &t
}

// Build turns the heartbeats topics found on each cluster into
// replications (every hop of every chain) and multi-hop paths, and sets
// them against the enabled flows.
func Build(scans []Cluster, flows []string, now time.Time) Report {
	topo := Report{Clusters: scans, Paths: []string{}, Flows: []Flow{}, ConfiguredNotSeen: []string{}, SeenNotConfigured: []string{}}
	configured := make(map[string]bool)
	for _, f := range flows {
		configured[f] = true
	}
	edges := make(map[string]*Edge)
	addEdge := func(src, dst, evidence string, last *time.Time) {
		name := src + "->" + dst
		e := edges[name]
		if e == nil {
			e = &Edge{Source: src, Target: dst, Configured: configured[name]}
			edges[name] = e
		}
		if !slices.Contains(e.Evidence, evidence) {
			e.Evidence = append(e.Evidence, evidence)
		}
		if last != nil && (e.Last == nil || last.After(*e.Last)) {
			e.Last = last
		}
	}
	paths := make(map[string]bool)
	for _, s := range scans {
		for _, h := range s.Topics {
			if len(h.Chain) == 0 {
				continue
			}
			ev := h.Topic + " on " + s.Alias
			// The newest heartbeat dates the hop into this cluster only.
			addEdge(h.Chain[0], s.Alias, ev, h.Last)
			for i := 1; i < len(h.Chain); i++ {
				addEdge(h.Chain[i], h.Chain[i-1], ev, nil)
			}
			if len(h.Chain) > 1 {
				p := slices.Clone(h.Chain)
				slices.Reverse(p)
				paths[strings.Join(append(p, s.Alias), "->")] = true
			}
		}
	}
	for _, e := range edges {
		if e.Last != nil {
			age := now.Sub(*e.Last).Seconds()
			e.AgeSeconds = &age
		}
		topo.Edges = append(topo.Edges, *e)
		if !e.Configured {
			topo.SeenNotConfigured = append(topo.SeenNotConfigured, e.Source+"->"+e.Target)
		}
	}
	sort.Slice(topo.Edges, func(i, j int) bool {
		a, b := topo.Edges[i], topo.Edges[j]
		return a.Source < b.Source || a.Source == b.Source && a.Target < b.Target
	})
	sort.Strings(topo.SeenNotConfigured)
	for p := range paths {
		topo.Paths = append(topo.Paths, p)
	}
	sort.Strings(topo.Paths)
	for _, f := range flows {
		_, seen := edges[f]
		topo.Flows = append(topo.Flows, Flow{Name: f, Seen: seen})
		if !seen {
			topo.ConfiguredNotSeen = append(topo.ConfiguredNotSeen, f)
		}
	}
	return topo
}

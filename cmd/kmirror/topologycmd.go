package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
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

// hbTopic is a heartbeats topic found on a cluster.
type hbTopic struct {
	Topic string `json:"topic"`
	// Chain lists the clusters the heartbeats came through, nearest
	// first: "B.A.heartbeats" is [B A]. Empty for the local topic.
	Chain []string `json:"chain"`
	// Last is the newest heartbeat read from the topic (nil: none).
	Last *time.Time `json:"last_heartbeat,omitempty"`
}

// clusterScan is what was found on one declared cluster.
type clusterScan struct {
	Alias  string    `json:"alias"`
	Error  string    `json:"error,omitempty"`
	Topics []hbTopic `json:"heartbeat_topics"`
}

// topoEdge is a replication seen in the heartbeats, configured or not.
type topoEdge struct {
	Source     string     `json:"source"`
	Target     string     `json:"target"`
	Configured bool       `json:"configured"`
	Evidence   []string   `json:"evidence"` // "A.heartbeats on B"
	Last       *time.Time `json:"last_heartbeat,omitempty"`
	AgeSeconds *float64   `json:"last_heartbeat_age_seconds,omitempty"`
}

// topoFlow is an enabled flow of the configuration.
type topoFlow struct {
	Name string `json:"name"`
	Seen bool   `json:"seen"`
}

// topology is what "kmirror topology" prints.
type topology struct {
	Clusters          []clusterScan `json:"clusters"`
	Edges             []topoEdge    `json:"replications"`
	Paths             []string      `json:"paths"` // multi-hop, "A->B->C"
	Flows             []topoFlow    `json:"configured_flows"`
	ConfiguredNotSeen []string      `json:"configured_not_seen"`
	SeenNotConfigured []string      `json:"seen_not_configured"`
}

// topologyCmd is "kmirror topology".
func topologyCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror topology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "MM2 properties file (required)")
	output := fs.String("output", "text", "output format: text or json")
	timeout := fs.Duration("timeout", 15*time.Second, "time limit per cluster")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *cfgPath == "":
		fmt.Fprintln(stderr, "kmirror topology: missing --config")
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kmirror topology: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *output != "text" && *output != "json":
		fmt.Fprintf(stderr, "kmirror topology: --output %q: want text or json\n", *output)
		return 2
	}
	cfg, err := config.Load(*cfgPath, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror topology: invalid configuration:\n%v\n", err)
		return 1
	}
	scans := make([]clusterScan, len(cfg.Clusters))
	var wg sync.WaitGroup
	for i, a := range cfg.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			scans[i] = scanCluster(ctx, cfg, a)
		}()
	}
	wg.Wait()
	var flows []string
	for _, f := range cfg.Flows {
		flows = append(flows, f.Name())
	}
	topo := buildTopology(scans, flows, time.Now())
	if err := printTopology(stdout, topo, *output); err != nil {
		fmt.Fprintln(stderr, "kmirror topology:", err)
		return 1
	}
	code := 0
	for _, s := range scans {
		if s.Error != "" {
			fmt.Fprintf(stderr, "kmirror topology: cluster %s: %s\n", s.Alias, s.Error)
			code = 1
		}
	}
	return code
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

// scanCluster lists the heartbeats topics of one cluster and reads the
// newest heartbeat of each remote one.
func scanCluster(ctx context.Context, cfg *config.Config, alias string) clusterScan {
	s := clusterScan{Alias: alias, Topics: []hbTopic{}}
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
		h := hbTopic{Topic: name, Chain: chain(pol, name)}
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

// buildTopology turns the heartbeats topics found on each cluster into
// replications (every hop of every chain) and multi-hop paths, and sets
// them against the enabled flows.
func buildTopology(scans []clusterScan, flows []string, now time.Time) topology {
	topo := topology{Clusters: scans, Paths: []string{}, Flows: []topoFlow{}, ConfiguredNotSeen: []string{}, SeenNotConfigured: []string{}}
	configured := make(map[string]bool)
	for _, f := range flows {
		configured[f] = true
	}
	edges := make(map[string]*topoEdge)
	addEdge := func(src, dst, evidence string, last *time.Time) {
		name := src + "->" + dst
		e := edges[name]
		if e == nil {
			e = &topoEdge{Source: src, Target: dst, Configured: configured[name]}
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
		topo.Flows = append(topo.Flows, topoFlow{Name: f, Seen: seen})
		if !seen {
			topo.ConfiguredNotSeen = append(topo.ConfiguredNotSeen, f)
		}
	}
	return topo
}

func printTopology(w io.Writer, t topology, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(t)
	}
	fmt.Fprintln(w, "Replication seen in heartbeats topics:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  SOURCE\tTARGET\tCONFIGURED\tLAST HEARTBEAT\tEVIDENCE")
	for _, e := range t.Edges {
		age := "-"
		if e.AgeSeconds != nil {
			age = fmt.Sprintf("%.0fs ago", *e.AgeSeconds)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Source, e.Target, yesNo(e.Configured), age, strings.Join(e.Evidence, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Edges) == 0 {
		fmt.Fprintln(w, "  (none: no remote heartbeats topics; are heartbeats emitted and replicated?)")
	}
	if len(t.Paths) > 0 {
		fmt.Fprintln(w, "Paths over more than one hop:")
		for _, p := range t.Paths {
			fmt.Fprintln(w, "  "+p)
		}
	}
	fmt.Fprintln(w, "Configured flows:")
	if len(t.Flows) == 0 {
		fmt.Fprintln(w, "  (none enabled)")
	}
	for _, f := range t.Flows {
		state := "seen"
		if !f.Seen {
			state = "configured but not seen"
		}
		fmt.Fprintf(w, "  %s: %s\n", f.Name, state)
	}
	if len(t.SeenNotConfigured) > 0 {
		fmt.Fprintln(w, "Seen but not configured:")
		for _, s := range t.SeenNotConfigured {
			fmt.Fprintln(w, "  "+s)
		}
	}
	for _, c := range t.Clusters {
		if c.Error != "" {
			fmt.Fprintf(w, "Cluster %s: %s\n", c.Alias, c.Error)
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

package dashboard

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/runner"
	"github.com/kmirror/kmirror/internal/topology"
)

// DefaultTopologyInterval is how often Run scans the heartbeats.
const DefaultTopologyInterval = 30 * time.Second

// topoView is the topology view: the clusters, and between them the flows
// this kmirror runs and the replications the heartbeats show.
type topoView struct {
	Clusters  []topoCluster `json:"clusters"`
	Edges     []topoEdge    `json:"edges"`
	ScannedAt *time.Time    `json:"scanned_at"` // of the heartbeats; nil: none scanned
	// Past maxTopoClusters clusters, the replications that are neither
	// run here nor configured are counted, not drawn, with the clusters
	// only they name.
	HiddenEdges    int `json:"hidden_edges"`
	HiddenClusters int `json:"hidden_clusters"`
}

// maxTopoClusters is how many clusters the view draws with every
// replication the heartbeats show; past it, only those of its own flows.
const maxTopoClusters = 8

type topoCluster struct {
	Alias string `json:"alias"`
	Error string `json:"error,omitempty"` // of its heartbeat scan
}

// topoEdge is one ordered pair of clusters.
type topoEdge struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Flow, Kind, State and Lag are of the flow this kmirror runs on the
	// pair ("" none).
	Flow  string `json:"flow,omitempty"`
	Kind  string `json:"kind,omitempty"`
	State string `json:"state,omitempty"`
	Lag   int64  `json:"lag"`
	// Heartbeats: the pair was seen in a heartbeats topic, its newest
	// heartbeat AgeSeconds old (nil: none dated). Configured: an enabled
	// flow of the configuration, as the scan saw it.
	Heartbeats bool     `json:"heartbeats"`
	Configured bool     `json:"configured"`
	AgeSeconds *float64 `json:"heartbeat_age_seconds"`
}

// topologyOf joins the flows and the last heartbeat scan (nil: none,
// taken at at).
func topologyOf(flows []runner.FlowStatus, rep *topology.Report, at time.Time) topoView {
	v := topoView{Clusters: []topoCluster{}, Edges: []topoEdge{}}
	clusters := map[string]int{}
	addCluster := func(alias string) {
		if _, ok := clusters[alias]; !ok {
			clusters[alias] = len(v.Clusters)
			v.Clusters = append(v.Clusters, topoCluster{Alias: alias})
		}
	}
	edges := map[[2]string]int{}
	edge := func(src, tgt string) *topoEdge {
		addCluster(src)
		addCluster(tgt)
		k := [2]string{src, tgt}
		i, ok := edges[k]
		if !ok {
			i = len(v.Edges)
			edges[k] = i
			v.Edges = append(v.Edges, topoEdge{Source: src, Target: tgt})
		}
		return &v.Edges[i]
	}
	for _, f := range flows {
		pair := f.Name
		if f.Pair != "" {
			pair = f.Pair
		}
		src, tgt, ok := strings.Cut(pair, "->")
		if !ok {
			continue
		}
		e := edge(src, tgt)
		if e.Flow != "" && f.Kind != runner.Replication {
			continue // a replication flow names the pair first
		}
		e.Flow, e.Kind, e.State, e.Lag = f.Name, string(f.Kind), f.State, 0
		for _, p := range f.Partitions {
			e.Lag += max(p.Lag, 0)
		}
	}
	if rep != nil {
		t := at
		v.ScannedAt = &t
		for _, c := range rep.Clusters {
			addCluster(c.Alias)
			v.Clusters[clusters[c.Alias]].Error = c.Error
		}
		for _, re := range rep.Edges {
			e := edge(re.Source, re.Target)
			e.Heartbeats, e.Configured = true, re.Configured
			if re.Last != nil {
				age := at.Sub(*re.Last).Seconds()
				e.AgeSeconds = &age
			}
		}
		for _, f := range rep.ConfiguredNotSeen {
			if src, tgt, ok := strings.Cut(f, "->"); ok {
				edge(src, tgt).Configured = true
			}
		}
	}
	if len(v.Clusters) > maxTopoClusters {
		v = ownEdges(v)
	}
	sort.Slice(v.Clusters, func(i, j int) bool { return v.Clusters[i].Alias < v.Clusters[j].Alias })
	sort.Slice(v.Edges, func(i, j int) bool {
		a, b := v.Edges[i], v.Edges[j]
		return a.Source < b.Source || a.Source == b.Source && a.Target < b.Target
	})
	return v
}

// ownEdges keeps of v the edges of flows run here or configured, and the
// scanned clusters and those such edges name; it counts the others.
func ownEdges(v topoView) topoView {
	keep := map[string]bool{}
	out := topoView{ScannedAt: v.ScannedAt, Edges: []topoEdge{}, Clusters: []topoCluster{}}
	for _, e := range v.Edges {
		if e.Flow == "" && !e.Configured {
			out.HiddenEdges++
			continue
		}
		out.Edges = append(out.Edges, e)
		keep[e.Source], keep[e.Target] = true, true
	}
	for _, c := range v.Clusters {
		if keep[c.Alias] || c.Error != "" {
			out.Clusters = append(out.Clusters, c)
		} else {
			out.HiddenClusters++
		}
	}
	return out
}

// Rescans while a configured flow is not in the heartbeats yet, early on:
// a new flow shows in the view within seconds, not an interval.
const (
	quickRescan      = 5 * time.Second
	quickRescanUntil = 2 * time.Minute
)

// scanTopology runs Config.Topology every TopologyInterval until ctx ends,
// more often for its first quickRescanUntil while a configured flow is
// not seen.
func (d *Dashboard) scanTopology(ctx context.Context) {
	start := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep := d.cfg.Topology(ctx)
		if ctx.Err() != nil {
			return
		}
		d.mu.Lock()
		d.topo, d.topoAt = &rep, time.Now()
		d.mu.Unlock()
		wait := d.cfg.TopologyInterval
		if len(rep.ConfiguredNotSeen) > 0 && time.Since(start) < quickRescanUntil {
			wait = min(wait, quickRescan)
		}
		t.Reset(wait)
	}
}

package dashboard

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/runner"
	"github.com/kmirror/kmirror/internal/topology"
)

// pagedFlows: flow A->B with topics t (4 partitions) and u (2), B->A with
// topic t (2); states and lags vary.
func pagedFlows() flows {
	p := func(topic string, n int32, state string, lag int64) datapath.PartitionStatus {
		return datapath.PartitionStatus{Topic: topic, Partition: n, Remote: "A." + topic, State: state, Lag: lag, Done: 9, SourceEnd: 9 + lag}
	}
	return flows{
		{Name: "A->B", Kind: "replication", State: "running", Partitions: []datapath.PartitionStatus{
			p("t", 0, "running", 0), p("t", 1, "lagging", 50), p("t", 2, "running", 5), p("t", 3, "stalled", 7),
			p("u", 0, "running", 100), p("u", 1, "paused", 0),
		}},
		{Name: "B->A", Kind: "replication", State: "running", Partitions: []datapath.PartitionStatus{
			{Topic: "t", Partition: 0, Remote: "B.t", State: "running"}, {Topic: "t", Partition: 1, Remote: "B.t", State: "waiting", Lag: 3},
		}},
	}
}

// TestPartitionsPage: /ui/api/partitions filters by flow, state and
// topic, sorts by state (non-running first), lag or name, and pages.
func TestPartitionsPage(t *testing.T) {
	_, srv := served(t, pagedFlows(), metrics.New(), nil)
	tests := []struct {
		query      string
		want       []string // flow topic/partition, in order
		total      int
		page, pgs  int
		badRequest bool
	}{
		{"", []string{"A->B t/3", "B->A t/1", "A->B t/1", "A->B u/1", "A->B u/0", "A->B t/2", "A->B t/0", "B->A t/0"}, 8, 0, 1, false},
		{"sort=lag", []string{"A->B u/0", "A->B t/1", "A->B t/3", "A->B t/2", "B->A t/1", "A->B u/1", "A->B t/0", "B->A t/0"}, 8, 0, 1, false},
		{"sort=topic", []string{"A->B t/0", "A->B t/1", "A->B t/2", "A->B t/3", "A->B u/0", "A->B u/1", "B->A t/0", "B->A t/1"}, 8, 0, 1, false},
		{"flow=B->A", []string{"B->A t/1", "B->A t/0"}, 2, 0, 1, false},
		{"state=not-running", []string{"A->B t/3", "B->A t/1", "A->B t/1", "A->B u/1"}, 4, 0, 1, false},
		{"state=running&sort=lag", []string{"A->B u/0", "A->B t/2", "A->B t/0", "B->A t/0"}, 4, 0, 1, false},
		{"q=U", []string{"A->B u/1", "A->B u/0"}, 2, 0, 1, false},
		{"q=b.t", []string{"B->A t/1", "B->A t/0"}, 2, 0, 1, false}, // the remote topic
		{"sort=topic&size=3&page=1", []string{"A->B t/3", "A->B u/0", "A->B u/1"}, 8, 1, 3, false},
		{"sort=topic&size=3&page=9", []string{"B->A t/0", "B->A t/1"}, 8, 2, 3, false}, // past the end: the last page
		{"q=nothing", []string{}, 0, 0, 1, false},
		{"sort=size", nil, 0, 0, 0, true},
		{"size=0", nil, 0, 0, 0, true},
		{"size=501", nil, 0, 0, 0, true},
		{"page=-1", nil, 0, 0, 0, true},
		{"page=x", nil, 0, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			resp, body := get(t, srv.URL+"/ui/api/partitions?"+tc.query, token)
			if tc.badRequest {
				if resp.StatusCode != 400 || !strings.Contains(body, `"error"`) {
					t.Fatalf("%d %s, want 400 with an error", resp.StatusCode, body)
				}
				return
			}
			var pg struct {
				Total, Page, Pages, Size int
				Partitions               []struct {
					Flow, Topic string
					Partition   int32
				}
			}
			if err := json.Unmarshal([]byte(body), &pg); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
			}
			got := []string{}
			for _, p := range pg.Partitions {
				got = append(got, fmt.Sprintf("%s %s/%d", p.Flow, p.Topic, p.Partition))
			}
			if !slices.Equal(got, tc.want) || pg.Total != tc.total || pg.Page != tc.page || pg.Pages != tc.pgs {
				t.Errorf("got %v, total %d, page %d of %d; want %v, %d, %d of %d", got, pg.Total, pg.Page, pg.Pages, tc.want, tc.total, tc.page, tc.pgs)
			}
		})
	}
	if q, err := ParseQuery(url.Values{}); err != nil || q.Sort != SortState || q.Size != DefaultPageSize {
		t.Errorf("default query %+v, %v", q, err)
	}
}

// TestOverview: the poll has every flow's totals and state counts but
// only the asked page of partitions, with their histories.
func TestOverview(t *testing.T) {
	fs := pagedFlows()
	m := metrics.New()
	m.RecordsLost.WithLabelValues("A", "B", "t", "3").Add(4)
	d, srv := served(t, fs, m, nil)
	for i := range 3 {
		d.Sample(time.Unix(4000+int64(i)*5, 0))
	}
	_, body := get(t, srv.URL+"/ui/api/overview?size=2", token)
	var ov struct {
		Flows []struct {
			Name           string
			Lag            int64
			PartitionCount int            `json:"partition_count"`
			States         map[string]int `json:"states"`
			Partitions     any            `json:"partitions"`
		}
		Partitions struct {
			Total      int
			Partitions []struct {
				Topic      string
				Partition  int32
				LagHistory []float64 `json:"lag_history"`
			}
		}
		Gaps      []gapView
		GapsTotal int `json:"gaps_total"`
		Topology  topoView
	}
	if err := json.Unmarshal([]byte(body), &ov); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(ov.Flows) != 2 || ov.Flows[0].Lag != 162 || ov.Flows[0].PartitionCount != 6 || ov.Flows[0].Partitions != nil ||
		ov.Flows[0].States["running"] != 3 || ov.Flows[0].States["stalled"] != 1 {
		t.Errorf("flows %+v", ov.Flows)
	}
	if p := ov.Partitions; p.Total != 8 || len(p.Partitions) != 2 || p.Partitions[0].Topic != "t" || p.Partitions[0].Partition != 3 ||
		len(p.Partitions[0].LagHistory) != 3 || p.Partitions[0].LagHistory[2] != 7 {
		t.Errorf("page %+v, want t/3 first with 3 samples of lag", p)
	}
	if len(ov.Gaps) != 1 || ov.GapsTotal != 1 || ov.Gaps[0].RecordsLost != 4 {
		t.Errorf("gaps %+v (%d)", ov.Gaps, ov.GapsTotal)
	}
	if len(ov.Topology.Clusters) != 2 || len(ov.Topology.Edges) != 2 || ov.Topology.Edges[0].Flow != "A->B" || ov.Topology.Edges[0].Lag != 162 {
		t.Errorf("topology %+v", ov.Topology)
	}
}

// TestGroupReadiness: a group is ready for a cutover (cutover.Decide)
// when every committed offset is translated, checked recently, its
// partitions are copied and it is active on neither cluster.
func TestGroupReadiness(t *testing.T) {
	now := time.Now()
	fs := pagedFlows() // A.t/1 lags 50, A.t/0 none
	tests := []struct {
		name         string
		status       *metrics.GroupStatus // nil: none yet
		partitions   []int32              // checkpointed partitions of A.t
		ready        bool
		blocker      string
		note         string
		lag, lagging int
	}{
		{"ready", &metrics.GroupStatus{CheckedAt: now, Interval: 5 * time.Second, Committed: 1, Sync: true, TargetState: "Empty"}, []int32{0}, true, "", "", 0, 0},
		{"checkpoint written, no status yet", nil, []int32{0}, true, "", "", 0, 0},
		{"no checkpoint yet", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second}, nil, false, "no translated offsets", "", 0, 0},
		{"untranslated", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 2, Untranslated: 1}, []int32{0}, false, "1 of 2 partitions not translated", "", 0, 0},
		{"stale", &metrics.GroupStatus{CheckedAt: now.Add(-time.Minute), Interval: time.Second, Committed: 1}, []int32{0}, false, "offsets last checked 1m0s ago", "", 0, 0},
		{"not stale within three intervals", &metrics.GroupStatus{CheckedAt: now.Add(-time.Minute), Interval: 30 * time.Second, Committed: 1}, []int32{0}, true, "", "consumers on the target start from the checkpoints", 0, 0},
		{"replication behind", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 2}, []int32{0, 1}, false, "replication 50 records behind on 1 partitions", "", 50, 1},
		// cutover switch commits what the sync did not: a note, not a blocker
		{"target group behind", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 1, Sync: true, SyncedAt: now, TargetState: "Empty", SyncBehind: 1}, []int32{0}, true, "", "1 partitions of the target group behind", 0, 0},
		// cutover switch refuses a group active on either cluster
		{"active on the target", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 1, Sync: true, SyncedAt: now, SyncBehind: -1, TargetState: "Stable"}, []int32{0}, false, "active member(s) on B (Stable): switch would be refused", "", 0, 0},
		{"active on the source", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 1, SourceState: "Stable"}, []int32{0}, false, "active member(s) on A (Stable): still consuming", "", 0, 0},
		{"idle on the source", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 1, SourceState: "Empty"}, []int32{0}, true, "", "", 0, 0},
		{"another worker's partition", &metrics.GroupStatus{CheckedAt: now, Interval: time.Second, Committed: 1, Sync: true}, []int32{9}, true, "", "lag of 1 partitions unknown", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			if tc.status != nil {
				s := *tc.status
				s.Source, s.Target, s.Group = "A", "B", "g"
				m.LastCheckpoints.UpdateGroup("A", "B", "g", func(g *metrics.GroupStatus) { *g = s })
			}
			for _, p := range tc.partitions {
				m.LastCheckpoints.Set(metrics.Checkpoint{Source: "A", Target: "B", Group: "g", Topic: "A.t", Partition: p, Upstream: 10, Downstream: 10, At: now})
			}
			d := New(Config{Source: fs, Metrics: m})
			gs := d.Overview(now, PartitionQuery{Sort: SortState, Size: 1}).Groups
			if len(gs) != 1 {
				t.Fatalf("groups %+v", gs)
			}
			g := gs[0]
			if g.Flow != "A->B" || g.Group != "g" || g.Ready != tc.ready || g.ReplicationLag != int64(tc.lag) || g.LaggingPartitions != tc.lagging {
				t.Errorf("%+v: want ready %v, lag %d on %d", g, tc.ready, tc.lag, tc.lagging)
			}
			if tc.blocker != "" && !strings.Contains(strings.Join(g.Blockers, "|"), tc.blocker) {
				t.Errorf("blockers %q, want %q", g.Blockers, tc.blocker)
			}
			if tc.note != "" && !strings.Contains(strings.Join(g.Notes, "|"), tc.note) {
				t.Errorf("notes %q, want %q", g.Notes, tc.note)
			}
			if len(tc.partitions) > 0 && (g.TopicCount != 1 || g.Topics[0] != "A.t" || g.Partitions != len(tc.partitions)) {
				t.Errorf("topics %v (%d), %d partitions", g.Topics, g.TopicCount, g.Partitions)
			}
		})
	}
}

// TestTopologyView joins the flows of this kmirror with a heartbeat scan:
// a flow seen in the heartbeats, one configured but not seen, one seen
// but not run here, and a cluster whose scan failed.
func TestTopologyView(t *testing.T) {
	now := time.Unix(9000, 0)
	beat := now.Add(-3 * time.Second)
	rep := topology.Report{
		Clusters: []topology.Cluster{{Alias: "A"}, {Alias: "B"}, {Alias: "C", Error: "unreachable"}},
		Edges: []topology.Edge{
			{Source: "A", Target: "B", Configured: true, Last: &beat},
			{Source: "C", Target: "A"},
		},
		ConfiguredNotSeen: []string{"B->A"},
	}
	fs := []runner.FlowStatus{
		{Name: "A->B", Kind: runner.Replication, State: "running", Partitions: []datapath.PartitionStatus{{Lag: 4}, {Lag: 1}}},
		{Name: "B->A", Kind: runner.Replication, State: "paused"},
	}
	for _, tc := range []struct {
		name  string
		rep   *topology.Report
		want  []string
		clust []string
	}{
		{"flows alone", nil, []string{"A->B A->B running lag=5 hb=false", "B->A B->A paused lag=0 hb=false"}, []string{"A", "B"}},
		{"with heartbeats", &rep, []string{"A->B A->B running lag=5 hb=true age=3", "B->A B->A paused lag=0 hb=false", "C->A lag=0 hb=true"}, []string{"A", "B", "C:unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := topologyOf(fs, tc.rep, now)
			var got, clust []string
			for _, e := range v.Edges {
				s := fmt.Sprintf("%s->%s %s %s lag=%d hb=%v", e.Source, e.Target, e.Flow, e.State, e.Lag, e.Heartbeats)
				s = strings.Join(strings.Fields(s), " ")
				if e.AgeSeconds != nil {
					s += fmt.Sprintf(" age=%g", *e.AgeSeconds)
				}
				got = append(got, s)
			}
			for _, c := range v.Clusters {
				clust = append(clust, strings.TrimSuffix(c.Alias+":"+c.Error, ":"))
			}
			want := tc.want
			if !slices.Equal(got, want) || !slices.Equal(clust, tc.clust) || (tc.rep != nil) != (v.ScannedAt != nil) {
				t.Errorf("edges %q, clusters %q; want %q, %q", got, clust, want, tc.clust)
			}
			if tc.rep != nil && !v.Edges[1].Configured {
				t.Error("B->A configured but not seen lost its configured mark")
			}
		})
	}
	// Many clusters in the heartbeats: only the replications run here or
	// configured are drawn, the others counted.
	many := rep
	many.Edges = slices.Clone(rep.Edges)
	for i := range 10 {
		many.Edges = append(many.Edges, topology.Edge{Source: fmt.Sprintf("X%d", i), Target: "B"})
	}
	v := topologyOf(fs, &many, now)
	var clusters []string
	for _, c := range v.Clusters {
		clusters = append(clusters, c.Alias)
	}
	if len(v.Edges) != 2 || v.HiddenEdges != 11 || v.HiddenClusters != 10 || !slices.Equal(clusters, []string{"A", "B", "C"}) {
		t.Errorf("with 13 clusters: %d edges, clusters %v, %d edges and %d clusters hidden; want 2, [A B C] (C failed its scan), 11, 10",
			len(v.Edges), clusters, v.HiddenEdges, v.HiddenClusters)
	}
}

// TestGroupsCapped: the overview lists at most maxGroups groups, the ones
// not ready first, and counts them all.
func TestGroupsCapped(t *testing.T) {
	now := time.Now()
	m := metrics.New()
	for i := range 150 {
		g := fmt.Sprintf("g%03d", i)
		untranslated := 0
		if i%50 == 7 {
			untranslated = 1 // 3 not ready
		}
		m.LastCheckpoints.UpdateGroup("A", "B", g, func(s *metrics.GroupStatus) {
			s.CheckedAt, s.Interval, s.Committed, s.Untranslated = now, time.Second, 1, untranslated
		})
		m.LastCheckpoints.Set(metrics.Checkpoint{Source: "A", Target: "B", Group: g, Topic: "A.t", Partition: 0, At: now})
	}
	ov := New(Config{Source: pagedFlows(), Metrics: m}).Overview(now, PartitionQuery{Sort: SortState, Size: 1})
	if len(ov.Groups) != maxGroups || ov.GroupsTotal != 150 || ov.GroupsReady != 147 {
		t.Fatalf("%d groups listed, %d in all, %d ready; want %d, 150, 147", len(ov.Groups), ov.GroupsTotal, ov.GroupsReady, maxGroups)
	}
	for i, want := range []string{"g007", "g057", "g107", "g000"} {
		if ov.Groups[i].Group != want {
			t.Errorf("group %d is %s, want %s", i, ov.Groups[i].Group, want)
		}
	}
}

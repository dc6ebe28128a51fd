package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/runner"
)

// Partition paging: the page size when none is asked, and the largest.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	maxGaps         = 50  // gaps the overview lists, newest first
	maxGroupTopics  = 5   // topics a group lists by name
	maxGroups       = 100 // groups the overview lists, not ready first
)

// Sort orders of a PartitionQuery.
const (
	SortState = "state" // the worst state first, then the most lag
	SortLag   = "lag"   // the most lag first
	SortTopic = "topic" // by flow, topic and partition
)

// NotRunning is the State of a PartitionQuery that selects every
// partition whose state is not running.
const NotRunning = "not-running"

// PartitionQuery selects and orders partitions for one page.
type PartitionQuery struct {
	Flow  string // one flow by name; "" every flow
	State string // one state, NotRunning, or "" every state
	Q     string // a substring of the topic or remote topic, any case
	Sort  string // SortState (the default), SortLag or SortTopic
	Page  int    // from 0
	Size  int    // 1 to MaxPageSize; 0 DefaultPageSize
}

// ParseQuery reads a PartitionQuery from the URL parameters flow, state,
// q, sort, page and size.
func ParseQuery(v url.Values) (PartitionQuery, error) {
	q := PartitionQuery{Flow: v.Get("flow"), State: v.Get("state"), Q: v.Get("q"), Sort: v.Get("sort")}
	switch q.Sort {
	case "":
		q.Sort = SortState
	case SortState, SortLag, SortTopic:
	default:
		return q, fmt.Errorf("sort %q: want state, lag or topic", q.Sort)
	}
	for _, p := range []struct {
		name     string
		to       *int
		min, max int
	}{{"page", &q.Page, 0, 1 << 30}, {"size", &q.Size, 1, MaxPageSize}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < p.min || n > p.max {
			return q, fmt.Errorf("%s %q: want a number from %d to %d", p.name, s, p.min, p.max)
		}
		*p.to = n
	}
	if q.Size == 0 {
		q.Size = DefaultPageSize
	}
	return q, nil
}

// PartitionPage is one page of the partitions a query selects.
type PartitionPage struct {
	Total      int       `json:"total"` // partitions selected, over all pages
	Page       int       `json:"page"`
	Pages      int       `json:"pages"`
	Size       int       `json:"size"`
	Sort       string    `json:"sort"`
	Partitions []partRow `json:"partitions"`
}

// partRow is a partition of a page, with its flow.
type partRow struct {
	Flow string `json:"flow"`
	partView
}

// stateRank orders partition states worst first for SortState.
var stateRank = map[string]int{
	datapath.Stalled: 0, datapath.Fencing: 1, datapath.Waiting: 2, datapath.Lagging: 3,
	datapath.Restarting: 4, datapath.Stopped: 5, datapath.Paused: 6, datapath.Running: 9,
}

func rankOf(state string) int {
	if r, ok := stateRank[state]; ok {
		return r
	}
	return 7 // a state named later: before running
}

// selected is a partition a query selected.
type selected struct {
	flow string
	p    *datapath.PartitionStatus
	rank int // of its state
}

// pageOf returns the page of flows' partitions that q selects, with the
// histories of those on it; d.mu is held. Only the page's partitions get
// a view: the others cost a comparison and a place in the sort.
func (d *Dashboard) pageOf(flows []runner.FlowStatus, q PartitionQuery) PartitionPage {
	sel := selectPartitions(flows, q)
	slices.SortFunc(sel, orderOf(q.Sort))

	pg := PartitionPage{Total: len(sel), Size: q.Size, Sort: q.Sort, Pages: max(1, (len(sel)+q.Size-1)/q.Size)}
	pg.Page = min(q.Page, pg.Pages-1)
	lo := min(pg.Page*q.Size, len(sel))
	sel = sel[lo:min(lo+q.Size, len(sel))]
	pg.Partitions = d.rowsOf(sel)
	return pg
}

// selectPartitions returns the partitions of flows that q's flow, state
// and substring select, in flow order.
func selectPartitions(flows []runner.FlowStatus, q PartitionQuery) []selected {
	sub := strings.ToLower(q.Q)
	n := 0
	for _, f := range flows {
		n += len(f.Partitions)
	}
	sel := make([]selected, 0, n)
	for fi := range flows {
		f := &flows[fi]
		if q.Flow != "" && f.Name != q.Flow {
			continue
		}
		for i := range f.Partitions {
			p := &f.Partitions[i]
			switch {
			case q.State == NotRunning && p.State == datapath.Running,
				q.State != "" && q.State != NotRunning && p.State != q.State,
				sub != "" && !strings.Contains(strings.ToLower(p.Topic), sub) && !strings.Contains(strings.ToLower(p.Remote), sub):
				continue
			}
			sel = append(sel, selected{f.Name, p, rankOf(p.State)})
		}
	}
	return sel
}

// orderOf returns the comparison of selected partitions for sort order
// by: SortLag, SortState, else by name.
func orderOf(by string) func(a, b selected) int {
	return func(a, b selected) int {
		switch by {
		case SortLag:
			if c := byLag(a, b); c != 0 {
				return c
			}
			if c := a.rank - b.rank; c != 0 {
				return c
			}
		case SortState:
			if c := a.rank - b.rank; c != 0 {
				return c
			}
			if c := byLag(a, b); c != 0 {
				return c
			}
		}
		return byName(a, b)
	}
}

// byName orders by flow, topic and partition.
func byName(a, b selected) int {
	if c := strings.Compare(a.flow, b.flow); c != 0 {
		return c
	}
	if c := strings.Compare(a.p.Topic, b.p.Topic); c != 0 {
		return c
	}
	return int(a.p.Partition) - int(b.p.Partition)
}

// byLag puts the most lag first: records, then seconds.
func byLag(a, b selected) int {
	switch {
	case a.p.Lag != b.p.Lag:
		if a.p.Lag > b.p.Lag {
			return -1
		}
		return 1
	case a.p.LagSeconds != b.p.LagSeconds:
		if a.p.LagSeconds > b.p.LagSeconds {
			return -1
		}
		return 1
	}
	return 0
}

// rowsOf returns the rows of sel with their histories; d.mu is held.
func (d *Dashboard) rowsOf(sel []selected) []partRow {
	rows := []partRow{}
	names := make([]string, 0, 2*len(sel))
	for _, s := range sel {
		pk := partSeries(s.flow, s.p.Remote, s.p.Partition)
		names = append(names, pk+seriesLag, pk+seriesRecs)
	}
	hist := d.parts.Get(sparkPoints, names)
	for i, s := range sel {
		row := partRow{Flow: s.flow, partView: d.partViewOf(s.flow, *s.p)}
		row.LagHistory, row.RateHistory = hist.Series[names[2*i]], hist.Series[names[2*i+1]]
		rows = append(rows, row)
	}
	return rows
}

// Partitions returns the page of partitions q selects.
func (d *Dashboard) Partitions(q PartitionQuery) PartitionPage {
	flows := d.cfg.Source.Status()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pageOf(flows, q)
}

// flowSummary is a flow without its partitions: their totals and how
// many are in each state.
type flowSummary struct {
	runner.FlowStatus
	flowTotals
	PartitionCount int            `json:"partition_count"`
	States         map[string]int `json:"states"`
}

// Overview is what /ui/api/overview returns, what the page polls: every
// flow's totals, their history, one page of partitions, the readiness of
// each consumer group for a cutover, the topology, and the newest gaps and
// warnings. Its size grows with the flows, groups and page, not with the
// partitions.
type Overview struct {
	Now             time.Time     `json:"now"`
	IntervalSeconds float64       `json:"interval_seconds"`
	Flows           []flowSummary `json:"flows"`
	History         Span          `json:"history"` // flow series, "flow|NAME|SERIES"
	Partitions      PartitionPage `json:"partitions"`
	Groups          []groupView   `json:"groups"` // the first maxGroups
	GroupsTotal     int           `json:"groups_total"`
	GroupsReady     int           `json:"groups_ready"`
	Topology        topoView      `json:"topology"`
	Gaps            []gapView     `json:"gaps"` // the newest maxGaps
	GapsTotal       int           `json:"gaps_total"`
	Errors          []LogRecord   `json:"errors"`
}

// Overview returns the flows as they are now with the page q selects.
func (d *Dashboard) Overview(now time.Time, q PartitionQuery) Overview {
	flows := d.cfg.Source.Status()
	out := Overview{Now: now, IntervalSeconds: d.cfg.Interval.Seconds(), Flows: make([]flowSummary, 0, len(flows)),
		History: d.hist.Last(0, flowPrefix), Gaps: []gapView{}, Errors: []LogRecord{}}
	listed := make(map[string]bool, len(flows))
	d.mu.Lock()
	for _, f := range flows {
		fs := flowSummary{FlowStatus: f, PartitionCount: len(f.Partitions), States: map[string]int{}}
		fs.FlowStatus.Partitions = nil
		fs.flowTotals = d.totalsOf(f, fs.States)
		out.Flows = append(out.Flows, fs)
		listed[f.Name] = true
	}
	for k, v := range d.last.lost {
		if listed[k.flow] {
			out.Gaps = append(out.Gaps, gapView{Flow: k.flow, Topic: k.topic, Partition: k.partition, RecordsLost: v, LastSeen: d.last.gaps[k]})
		}
	}
	out.Partitions = d.pageOf(flows, q)
	topo, scanned := d.topo, d.topoAt
	d.mu.Unlock()
	out.Groups = d.groups(flows, now)
	out.GroupsTotal = len(out.Groups)
	for _, g := range out.Groups {
		if g.Ready {
			out.GroupsReady++
		}
	}
	out.Groups = out.Groups[:min(len(out.Groups), maxGroups)]
	out.Topology = topologyOf(flows, topo, scanned)
	sort.Slice(out.Gaps, func(i, j int) bool {
		a, b := out.Gaps[i], out.Gaps[j]
		if !a.LastSeen.Equal(b.LastSeen) {
			return a.LastSeen.After(b.LastSeen)
		}
		return a.Flow < b.Flow || a.Flow == b.Flow && (a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition)
	})
	out.GapsTotal = len(out.Gaps)
	out.Gaps = out.Gaps[:min(len(out.Gaps), maxGaps)]
	if d.cfg.Logs != nil {
		out.Errors = d.cfg.Logs.Recent()
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// query reads the request's PartitionQuery, answering 400 when it is bad.
func query(w http.ResponseWriter, r *http.Request) (PartitionQuery, bool) {
	q, err := ParseQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return q, false
	}
	return q, true
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) {
	if q, ok := query(w, r); ok {
		writeJSON(w, http.StatusOK, d.Overview(time.Now(), q))
	}
}

func (d *Dashboard) partitions(w http.ResponseWriter, r *http.Request) {
	if q, ok := query(w, r); ok {
		writeJSON(w, http.StatusOK, d.Partitions(q))
	}
}

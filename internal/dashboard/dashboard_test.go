package dashboard

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/rest"
	"github.com/kmirror/kmirror/internal/runner"
)

// flows is a fixed runner state, as rest.Control and Source.
type flows []runner.FlowStatus

func (f flows) Status() []runner.FlowStatus { return f }
func (flows) Pause(string) error            { return nil }
func (flows) Resume(string) error           { return nil }
func (flows) Restart(string) error          { return nil }
func (flows) Reload() error                 { return nil }

func TestHistoryBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name       string
		points     int
		maxSeries  int
		samples    []map[string]float64
		wantTimes  int
		wantSeries []string
		wantA      []float64 // series "a", NaN for none
	}{
		{"fewer samples than points", 4, 10, []map[string]float64{{"a": 1}, {"a": 2}}, 2, []string{"a"}, []float64{1, 2}},
		{"ring wraps and keeps the newest", 3, 10, []map[string]float64{{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}, {"a": 5}}, 3, []string{"a"}, []float64{3, 4, 5}},
		{"series capped", 3, 2, []map[string]float64{{"a": 1, "b": 1}, {"a": 2, "b": 2, "c": 2}}, 2, []string{"a", "b"}, []float64{1, 2}},
		{"gap is NaN", 3, 10, []map[string]float64{{"a": 1}, {"b": 1}, {"a": 3}}, 3, []string{"a", "b"}, []float64{1, math.NaN(), 3}},
		{"series without values dropped", 2, 10, []map[string]float64{{"a": 1, "b": 1}, {"a": 2}, {"a": 3}}, 2, []string{"a"}, []float64{2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(tc.points, tc.maxSeries)
			for i, s := range tc.samples {
				h.Add(t0.Add(time.Duration(i)*time.Second), s)
			}
			sp := h.Last(0, "")
			if len(sp.Times) != tc.wantTimes {
				t.Fatalf("times %v, want %d", sp.Times, tc.wantTimes)
			}
			last := t0.Add(time.Duration(len(tc.samples)-1) * time.Second).UnixMilli()
			if sp.Times[len(sp.Times)-1] != last {
				t.Errorf("newest time %d, want %d", sp.Times[len(sp.Times)-1], last)
			}
			if len(sp.Series) != len(tc.wantSeries) {
				t.Errorf("series %v, want %v", keys(sp.Series), tc.wantSeries)
			}
			for _, name := range tc.wantSeries {
				if _, ok := sp.Series[name]; !ok {
					t.Errorf("series %q missing", name)
				}
			}
			for i, v := range sp.Series["a"] {
				w := tc.wantA[i]
				if (math.IsNaN(w) && !math.IsNaN(float64(v))) || (!math.IsNaN(w) && float64(v) != w) {
					t.Errorf("a = %v, want %v", sp.Series["a"], tc.wantA)
					break
				}
			}
			if n := len(h.Last(1, "").Times); n != 1 {
				t.Errorf("Last(1) has %d times", n)
			}
		})
	}
}

func keys(m map[string]Points) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPointsJSON(t *testing.T) {
	b, err := json.Marshal(Points{1, float32(math.NaN()), 2.5})
	if err != nil || string(b) != "[1,null,2.5]" {
		t.Errorf("got %s, %v", b, err)
	}
}

const token = "s3cret-token"

// served is a dashboard behind rest.Handler with token, over the state fs.
func served(t *testing.T, fs flows, m *metrics.Metrics, logs *LogRing) (*Dashboard, *httptest.Server) {
	d := New(Config{Source: fs, Metrics: m, Logs: logs, Interval: time.Second})
	srv := httptest.NewServer(rest.Handler(fs, token, slog.New(slog.NewTextHandler(io.Discard, nil)), rest.Mount{Patterns: []string{"/ui/"}, Build: d.Mount}))
	t.Cleanup(srv.Close)
	return d, srv
}

func get(t *testing.T, url, tok string) (*http.Response, string) {
	req, _ := http.NewRequest("GET", url, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAuthAndHeaders(t *testing.T) {
	_, srv := served(t, flows{}, metrics.New(), nil)
	tests := []struct {
		path, token string
		code        int
		typ, body   string
	}{
		{"/ui/", "", 200, "text/html", `<script src="app.js" defer></script>`},
		{"/ui/app.js", "", 200, "javascript", "api/overview"},
		{"/ui/api/overview", "", 401, "application/json", "bearer token"},
		{"/ui/api/overview", token, 200, "application/json", `"partitions":{"total":0`},
		{"/ui/api/partitions", token, 200, "application/json", `"partitions":[]`},
		{"/ui/app.css", "", 200, "text/css", "font"},
		{"/ui/api/snapshot", "", 401, "application/json", "bearer token"},
		{"/ui/api/snapshot", "wrong", 401, "application/json", "bearer token"},
		{"/ui/api/snapshot", token, 200, "application/json", `"flows":[]`},
		{"/ui/nothing", "", 404, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path+" "+tc.token, func(t *testing.T) {
			resp, body := get(t, srv.URL+tc.path, tc.token)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if !strings.Contains(resp.Header.Get("Content-Type"), tc.typ) {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tc.typ)
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("body lacks %q:\n%.300s", tc.body, body)
			}
			if strings.Contains(body, token) {
				t.Error("the token is in the response")
			}
		})
	}
	// The page itself holds no inline script or style, which the CSP forbids.
	_, page := get(t, srv.URL+"/ui/", "")
	for _, bad := range []string{"<script>", "<style", "style=", "onclick", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds %q", bad)
		}
	}
}

func TestSnapshot(t *testing.T) {
	m := metrics.New()
	fs := flows{
		{Name: "A->B", Kind: "replication", State: "paused", Partitions: []datapath.PartitionStatus{
			{Topic: "t", Partition: 0, Remote: "A.t", Done: 9, State: "paused", SourceEnd: 30, Lag: 20},
			{Topic: "t", Partition: 1, Remote: "A.t", Done: 4, State: "paused", SourceEnd: 10, Lag: 5},
		}},
		{Name: "B->A", Kind: "heartbeats", State: "running"},
	}
	m.ReplicationLatencyMs.WithLabelValues("A", "B", "A.t", "0").Set(40)
	m.ReplicationLatencyMs.WithLabelValues("A", "B", "A.t", "1").Set(75)
	m.CheckpointLatencyMs.WithLabelValues("A", "B", "g1", "A.t", "0").Set(12)
	m.LastCheckpoints.Set(metrics.Checkpoint{Source: "A", Target: "B", Group: "g1", Topic: "A.t", Partition: 0, Upstream: 100, Downstream: 98, At: time.Now()})
	m.RecordsLost.WithLabelValues("A", "B", "t", "1").Add(7)
	logs := NewLogRing(10)
	slog.New(logs.Wrap(slog.NewTextHandler(io.Discard, nil))).Error("gap", "password", "hunter2")
	d, srv := served(t, fs, m, logs)
	copied := m.RecordCount.WithLabelValues("A", "B", "A.t", "0")
	for i := range 3 {
		copied.Add(100)
		fs[0].Partitions[0].Done += 100 // copied records move the progress
		d.Sample(time.Unix(2000+int64(i)*5, 0))
	}

	_, body := get(t, srv.URL+"/ui/api/snapshot", token)
	var snap struct {
		Flows []struct {
			Name                 string   `json:"name"`
			State                string   `json:"state"`
			Lag                  int64    `json:"lag"`
			RecordsPerSecond     float64  `json:"records_per_second"`
			ReplicationLatencyMs *float64 `json:"replication_latency_ms"`
			CheckpointLatencyMs  *float64 `json:"checkpoint_latency_ms"`
			Partitions           []struct {
				Partition   int32     `json:"partition"`
				Lag         int64     `json:"lag"`
				RecordsLost *float64  `json:"records_lost"`
				LagHistory  []float64 `json:"lag_history"`
			} `json:"partitions"`
		} `json:"flows"`
		History struct {
			Times  []int64              `json:"times"`
			Series map[string][]float64 `json:"series"`
		} `json:"history"`
		Checkpoints []struct {
			Group      string   `json:"group"`
			Upstream   int64    `json:"upstream_offset"`
			Downstream int64    `json:"downstream_offset"`
			LatencyMs  *float64 `json:"latency_ms"`
		} `json:"checkpoints"`
		Gaps []struct {
			Topic       string  `json:"topic"`
			Partition   int32   `json:"partition"`
			RecordsLost float64 `json:"records_lost"`
		} `json:"gaps"`
		Errors []LogRecord `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(snap.Flows) != 2 || snap.Flows[0].Name != "A->B" || snap.Flows[0].State != "paused" || snap.Flows[1].Name != "B->A" {
		t.Fatalf("flows: %s", body)
	}
	f := snap.Flows[0]
	if f.Lag != 25 || f.ReplicationLatencyMs == nil || *f.ReplicationLatencyMs != 75 || f.CheckpointLatencyMs == nil || *f.CheckpointLatencyMs != 12 {
		t.Errorf("flow lag %d, replication latency %v, checkpoint latency %v; want 25, 75, 12", f.Lag, f.ReplicationLatencyMs, f.CheckpointLatencyMs)
	}
	if f.RecordsPerSecond <= 0 {
		t.Errorf("records per second %v, want the rate of the record count", f.RecordsPerSecond)
	}
	if rs := snap.History.Series["flow|A->B|records_per_second"]; len(rs) != 3 || rs[2] <= 0 {
		t.Errorf("records per second history %v", rs)
	}
	if len(f.Partitions) != 2 || f.Partitions[1].RecordsLost == nil || *f.Partitions[1].RecordsLost != 7 || f.Partitions[0].RecordsLost != nil {
		t.Errorf("partitions: %+v", f.Partitions)
	}
	if got := f.Partitions[0].LagHistory; len(got) != 3 || got[2] != 20 {
		t.Errorf("p0 lag history %v, want three samples of 20", got)
	}
	if len(snap.History.Times) != 3 || len(snap.History.Series["flow|A->B|lag"]) != 3 || snap.History.Series["flow|A->B|lag"][0] != 25 {
		t.Errorf("history: %+v", snap.History)
	}
	if _, ok := snap.History.Series["flow|B->A|lag"]; ok {
		t.Error("a heartbeats-only pair has a lag series")
	}
	if len(snap.Checkpoints) != 1 || snap.Checkpoints[0].Upstream != 100 || snap.Checkpoints[0].Downstream != 98 || snap.Checkpoints[0].LatencyMs == nil {
		t.Errorf("checkpoints: %+v", snap.Checkpoints)
	}
	if len(snap.Gaps) != 1 || snap.Gaps[0].Topic != "t" || snap.Gaps[0].Partition != 1 || snap.Gaps[0].RecordsLost != 7 {
		t.Errorf("gaps: %+v", snap.Gaps)
	}
	if len(snap.Errors) != 1 || snap.Errors[0].Attrs != "password=[redacted]" {
		t.Errorf("errors: %+v", snap.Errors)
	}
	if strings.Contains(body, "hunter2") {
		t.Error("a secret is in the snapshot")
	}
}

func TestLogRing(t *testing.T) {
	tests := []struct {
		name      string
		log       func(*slog.Logger)
		wantMsg   string
		wantAttrs string
		explain   func(string) string // LogRing.Explain
	}{
		{"info is not kept", func(l *slog.Logger) { l.Info("fine") }, "", "", nil},
		{"warn with attrs", func(l *slog.Logger) { l.Warn("slow", "topic", "t", "partition", 3) }, "slow", "topic=t partition=3", nil},
		{"secret attribute", func(l *slog.Logger) { l.Error("auth failed", "sasl.password", "pw") }, "auth failed", "sasl.password=[redacted]", nil},
		{"secret in message and value", func(l *slog.Logger) {
			l.Error(`login failed: password=abc user=u`, "err", `sasl.jaas.config: x password="p w" ssl.key.password: k2`)
		}, "login failed: password=[redacted] user=u", `err=sasl.jaas.config: x password=[redacted] ssl.key.password: [redacted]`, nil},
		{"with attrs and groups", func(l *slog.Logger) {
			l.With("flow", "A->B").WithGroup("g").With("token", "tk").Warn("w", "n", 1)
		}, "w", "flow=A->B g.token=[redacted] g.n=1", nil},
		{"explained (kmirror mm1)", func(l *slog.Logger) {
			l.Error("flow failed (key k)", "err", "replication factor 3 (key k): INVALID_REPLICATION_FACTOR")
		}, "flow failed (--flag)", "err=replication factor 3 (--flag): INVALID_REPLICATION_FACTOR",
			func(s string) string { return strings.ReplaceAll(s, "(key k)", "(--flag)") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ring := NewLogRing(4)
			ring.Explain = tc.explain
			var out bytes.Buffer
			tc.log(slog.New(ring.Wrap(slog.NewTextHandler(&out, nil))))
			got := ring.Recent()
			if tc.wantMsg == "" {
				if len(got) != 0 {
					t.Errorf("kept %+v", got)
				}
			} else if len(got) != 1 || got[0].Message != tc.wantMsg || got[0].Attrs != tc.wantAttrs {
				t.Errorf("got %+v, want %q %q", got, tc.wantMsg, tc.wantAttrs)
			}
			if out.Len() == 0 {
				t.Error("the wrapped handler got nothing")
			}
		})
	}

	ring := NewLogRing(3)
	l := slog.New(ring.Wrap(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})))
	for _, m := range []string{"1", "2", "3", "4", "5"} {
		l.Warn(m)
	}
	got := ring.Recent()
	if len(got) != 3 || got[0].Message != "5" || got[2].Message != "3" {
		t.Errorf("ring of 3 after 5 warnings: %+v", got)
	}
}

// TestSampleWhileServing samples and serves snapshots at once (run with
// -race), with a gap that grows between samples.
func TestSampleWhileServing(t *testing.T) {
	m := metrics.New()
	fs := flows{{Name: "A->B", Kind: "replication", State: "running", Partitions: []datapath.PartitionStatus{{Topic: "t", Remote: "A.t"}}}}
	d, srv := served(t, fs, m, nil)
	lost := m.RecordsLost.WithLabelValues("A", "B", "t", "0")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			lost.Add(1)
			d.Sample(time.Unix(3000+int64(i), 0))
		}
	}()
	for range 20 {
		if resp, _ := get(t, srv.URL+"/ui/api/snapshot", token); resp.StatusCode != 200 {
			t.Fatalf("snapshot: %d", resp.StatusCode)
		}
	}
	<-done
	g := d.Snapshot(time.Now()).Gaps
	if len(g) != 1 || g[0].RecordsLost != 50 || !g[0].LastSeen.Equal(time.Unix(3049, 0)) {
		t.Errorf("gaps %+v, want 50 lost, last seen at the last sample", g)
	}
}

// TestSampleTracks follows one partition through samples 5 s apart: its
// rate comes from its record count while its progress moves, falls to 0
// within the rate window once idle, and comes back over the window when
// it copies again; it has a partition history while it has lag or a rate
// and for a spark of samples after, and none once it leaves the flow.
func TestSampleTracks(t *testing.T) {
	m := metrics.New()
	fs := flows{{Name: "A->B", Kind: "replication", State: "running", Partitions: []datapath.PartitionStatus{
		{Topic: "t", Partition: 0, Remote: "A.t", Done: 9, State: "running"},
		{Topic: "t", Partition: 1, Remote: "A.t", Done: 9, State: "running"}, // idle throughout
	}}}
	copied := m.RecordCount.WithLabelValues("A", "B", "A.t", "0")
	d := New(Config{Source: fs, Metrics: m})
	now := time.Unix(5000, 0)
	steps := []struct {
		name       string
		samples    int
		perSample  int64 // records copied before each sample
		lag        int64
		wantRate   float64
		wantSeries int // partition series in history
	}{
		{"idle from the start", 3, 0, 0, 0, 0},
		{"copying 50 per sample", 8, 50, 0, 10, 2},
		{"idle for the rate window", 7, 0, 0, 0, 2},
		{"idle for a spark of samples", sparkPoints, 0, 0, 0, 0},
		{"behind but not copying", 2, 0, 40, 0, 2},
		{"copying again after long idle: rate over the window", 1, 300, 0, 10, 2},
	}
	for _, st := range steps {
		for range st.samples {
			if st.perSample > 0 {
				copied.Add(float64(st.perSample))
				fs[0].Partitions[0].Done += st.perSample
			}
			fs[0].Partitions[0].Lag = st.lag
			now = now.Add(5 * time.Second)
			d.Sample(now)
		}
		p := d.Snapshot(now).Flows[0].Partitions
		if p[0].RecordsPerSecond != st.wantRate || p[1].RecordsPerSecond != 0 {
			t.Errorf("%s: records per second %v and %v, want %v and 0", st.name, p[0].RecordsPerSecond, p[1].RecordsPerSecond, st.wantRate)
		}
		if _, n := d.parts.Len(); n != st.wantSeries {
			t.Errorf("%s: %d partition series, want %d", st.name, n, st.wantSeries)
		}
		if st.wantSeries > 0 && (len(p[0].LagHistory) == 0 || p[0].LagHistory[len(p[0].LagHistory)-1] != float32(st.lag)) {
			t.Errorf("%s: lag history %v, want it to end at %d", st.name, p[0].LagHistory, st.lag)
		}
		if p[1].LagHistory != nil {
			t.Errorf("%s: the idle partition has a history %v", st.name, p[1].LagHistory)
		}
	}
	fs[0].Partitions = fs[0].Partitions[1:]
	d.Sample(now.Add(5 * time.Second))
	if _, n := d.parts.Len(); n != 0 || len(d.tracks) != 1 {
		t.Errorf("after t:0 left: %d partition series, %d tracked; want 0 and 1", n, len(d.tracks))
	}
}

// TestSampleOrder: a flow's partitions found by position keep their own
// counts when the status lists them in another order, or with one more
// in between; a flow gone leaves nothing behind.
func TestSampleOrder(t *testing.T) {
	m := metrics.New()
	part := func(p int32) datapath.PartitionStatus {
		return datapath.PartitionStatus{Topic: "t", Partition: p, Remote: "A.t", Done: 9, State: "running"}
	}
	fs := flows{{Name: "A->B", Kind: "replication", State: "running", Partitions: []datapath.PartitionStatus{part(0), part(1)}}}
	copied := m.RecordCount.WithLabelValues("A", "B", "A.t", "0")
	d := New(Config{Source: fs, Metrics: m})
	now := time.Unix(5000, 0)
	for _, step := range []struct {
		name  string
		order []int32
	}{{"first", []int32{0, 1}}, {"swapped", []int32{1, 0}}, {"one more between", []int32{1, 2, 0}}} {
		ps := fs[0].Partitions
		fs[0].Partitions = nil
		for _, p := range step.order {
			s := part(p)
			for _, o := range ps {
				if o.Partition == p {
					s = o
				}
			}
			fs[0].Partitions = append(fs[0].Partitions, s)
		}
		for range 8 {
			copied.Add(50)
			for i := range fs[0].Partitions {
				if fs[0].Partitions[i].Partition == 0 {
					fs[0].Partitions[i].Done += 50
				}
			}
			now = now.Add(5 * time.Second)
			d.Sample(now)
		}
		for _, p := range d.Snapshot(now).Flows[0].Partitions {
			if want := map[int32]float64{0: 10}[p.Partition]; p.RecordsPerSecond != want {
				t.Errorf("%s: partition %d copies %v records/s, want %v", step.name, p.Partition, p.RecordsPerSecond, want)
			}
		}
		if n := len(d.order["A->B"]); n != len(step.order) || len(d.tracks) != len(step.order) {
			t.Errorf("%s: %d in order, %d tracked; want %d", step.name, n, len(d.tracks), len(step.order))
		}
	}
	fs[0].Partitions = nil
	d.cfg.Source = flows{}
	d.Sample(now.Add(5 * time.Second))
	if len(d.order) != 0 || len(d.tracks) != 0 {
		t.Errorf("after the flow left: %d flows in order, %d tracked", len(d.order), len(d.tracks))
	}
}

package health

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestLagOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tt := range []struct {
		name    string
		w       watch
		now     time.Time
		lag     int64
		seconds float64
	}{
		{"end unknown", watch{done: 5, end: -1}, at(0), 0, 0},
		{"caught up", watch{done: 9, end: 10, samples: []sample{{at(0), 10}}}, at(5), 0, 0},
		{"nothing copied, log starts at 0", watch{done: -1, end: 10, samples: []sample{{at(0), 10}}}, at(3), 10, 3},
		{"nothing copied, log starts later", watch{done: -1, start: 4, end: 10, samples: []sample{{at(0), 10}}}, at(3), 6, 3},
		// Records 6..9 were not there at t=0 (end 6): the oldest missing one
		// (6) was first seen at t=10.
		{"behind since second sample", watch{done: 5, end: 10, samples: []sample{{at(0), 6}, {at(10), 8}, {at(20), 10}}}, at(25), 4, 15},
		{"just behind", watch{done: 5, end: 7, samples: []sample{{at(0), 6}, {at(20), 7}}}, at(20), 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lag, sec := tt.w.lagOf(tt.now)
			if lag != tt.lag || sec != tt.seconds {
				t.Errorf("lag %d, %v s; want %d, %v s", lag, sec, tt.lag, tt.seconds)
			}
		})
	}
}

func TestHealthStateOf(t *testing.T) {
	h := New(Config{StallAfter: time.Minute, LagAfter: 30 * time.Second}, nil, nil)
	now := time.Unix(1000, 0)
	for _, tt := range []struct {
		name   string
		engine string
		lag    int64
		lagSec float64
		moved  time.Duration // ago
		want   string
	}{
		{"caught up", datapath.Running, 0, 0, time.Hour, datapath.Running},
		{"behind, moving", datapath.Running, 100, 5, time.Second, datapath.Running},
		{"behind long, moving", datapath.Running, 100, 31, time.Second, datapath.Lagging},
		{"behind, not moving", datapath.Running, 1, 0, time.Minute, datapath.Stalled},
		{"paused stays paused", datapath.Paused, 100, 100, time.Hour, datapath.Paused},
		{"stopped stays stopped", datapath.Stopped, 100, 100, time.Hour, datapath.Stopped},
		{"waiting stays waiting", datapath.Waiting, 100, 100, time.Hour, datapath.Waiting},
		{"fencing stays fencing", datapath.Fencing, 100, 100, time.Hour, datapath.Fencing},
		{"restarting, not moving", datapath.Restarting, 1, 0, time.Hour, datapath.Stalled},
		{"restarting, moving", datapath.Restarting, 1, 0, time.Second, datapath.Restarting},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &watch{lag: tt.lag, lagSec: tt.lagSec, movedAt: now.Add(-tt.moved)}
			if got := h.stateOf(datapath.PartitionStatus{State: tt.engine}, w, now); got != tt.want {
				t.Errorf("state %s, want %s", got, tt.want)
			}
		})
	}
}

// statusEngine reports a fixed status and counts restarts.
type statusEngine struct {
	datapath.Engine
	mu       sync.Mutex
	st       []datapath.PartitionStatus
	restarts []progress.TP
}

func (e *statusEngine) Status(dst []datapath.PartitionStatus) []datapath.PartitionStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append(dst, e.st...)
}

func (e *statusEngine) Restart(_ context.Context, tp progress.TP) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.restarts = append(e.restarts, tp)
	return true
}

func (e *statusEngine) set(i int, done int64, inflight int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st[i].Done, e.st[i].InFlight = done, inflight
}

// TestHealthCheck runs Check against a kfake source holding 10 records in
// t:0 and t:1: lag and state follow the engine's progress, a stalled
// partition with nothing in flight is restarted once per StallAfter, one
// with records in flight is not, the lag counts from the log start where
// retention took records not yet copied, and the metrics say the same.
func TestHealthCheck(t *testing.T) {
	_, cl := testkafka.Fake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 10; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := metrics.New()
	var logs bytes.Buffer
	eng := &statusEngine{st: []datapath.PartitionStatus{
		{Topic: "t", Partition: 0, Remote: "A.t", Done: 4, State: datapath.Running},
		{Topic: "t", Partition: 1, Remote: "A.t", Done: 4, State: datapath.Running, InFlight: 3},
	}}
	h := New(Config{SourceAlias: "A", TargetAlias: "B", Source: cl,
		StallAfter: time.Minute, LagAfter: 30 * time.Second, Metrics: m}, eng, slog.New(slog.NewTextHandler(&logs, nil)))
	t0 := time.Now()
	state := func(p int) string { return h.cfg.Table.Status(eng)[p].State }

	h.Check(ctx, t0)
	st := h.cfg.Table.Status(eng)
	if st[0].Lag != 5 || st[0].SourceEnd != 10 || st[0].State != datapath.Running || st[1].Lag != 5 {
		t.Fatalf("after first check: %+v", st)
	}
	if got := healthMetric(t, m, "kmirror_partition_lag_records", "A.t", "0", ""); got != 5 {
		t.Errorf("lag metric %v, want 5", got)
	}

	eng.set(0, 6, 0) // moved
	h.Check(ctx, t0.Add(40*time.Second))
	if got := state(0); got != datapath.Lagging {
		t.Errorf("p0 behind for 40 s, moving: %s, want lagging", got)
	}
	h.Check(ctx, t0.Add(90*time.Second)) // p0 still at 6 since 40 s: 50 s
	if got := state(0); got != datapath.Lagging {
		t.Errorf("p0 not moved for 50 s: %s, want lagging", got)
	}
	h.Check(ctx, t0.Add(101*time.Second)) // p0 61 s, p1 101 s without moving
	if len(eng.restarts) != 1 || eng.restarts[0] != (progress.TP{Topic: "t", Partition: 0}) {
		t.Fatalf("restarts %v, want t:0 only (t:1 has records in flight)", eng.restarts)
	}
	if got := state(1); got != datapath.Stalled {
		t.Errorf("p1: %s, want stalled", got)
	}
	if n := datapath.NotReady(h.cfg.Table.Status(eng)); n != 2 {
		t.Errorf("not ready %d, want 2", n)
	}
	if got := healthMetric(t, m, "kmirror_partition_state", "A.t", "1", datapath.Stalled); got != 1 {
		t.Errorf("state metric stalled %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.PartitionRestarts.WithLabelValues("A", "B", "A.t", "0", "stalled")); got != 1 {
		t.Errorf("restart metric %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "partition stalled") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	h.Check(ctx, t0.Add(110*time.Second)) // the restart gets a whole StallAfter
	if len(eng.restarts) != 1 {
		t.Errorf("restarted again within StallAfter: %v", eng.restarts)
	}
	// Restarted but still not moving (the target is down): stalled, not
	// ready, until it moves; /ready flapped to 200 here before.
	if got := state(0); got != datapath.Stalled {
		t.Errorf("p0 restarted, not moving: %s, want stalled", got)
	}

	eng.set(0, 9, 0)
	eng.set(1, 9, 0)
	h.Check(ctx, t0.Add(120*time.Second))
	for p := 0; p < 2; p++ {
		if got := state(p); got != datapath.Running {
			t.Errorf("p%d caught up: %s, want running", p, got)
		}
	}

	// Behind again where retention took the next records: the lag
	// counts from the log start (listed only for a partition behind).
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "t", Partition: 0, At: 12})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	h.Check(ctx, t0.Add(125*time.Second))
	if st := h.cfg.Table.Status(eng); st[0].Lag != 3 || st[0].SourceEnd != 15 || st[1].Lag != 0 {
		t.Errorf("after retention took 10..11 of t:0: %+v; want lag 3 of 15 on t:0, none on t:1", st)
	}
	if got := healthMetric(t, m, "kmirror_partition_lag_records", "A.t", "0", ""); got != 3 {
		t.Errorf("lag metric %v, want 3", got)
	}

	eng.mu.Lock()
	eng.st = eng.st[:1] // t:1 moved to another worker
	eng.mu.Unlock()
	h.Check(ctx, t0.Add(130*time.Second))
	if n := testutil.CollectAndCount(m.Partitions, "kmirror_partition_state"); n != len(States) {
		t.Errorf("%d state series, want %d (t:1's removed)", n, len(States))
	}
}

// healthMetric is the value of a health series of flow A->B gathered from
// m's registry, NaN when there is none; state "" for lag series.
func healthMetric(t *testing.T, m *metrics.Metrics, name, topic, partition, state string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"source": "A", "target": "B", "topic": topic, "partition": partition}
	if state != "" {
		want["state"] = state
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, mt := range mf.GetMetric() {
			if len(mt.GetLabel()) != len(want) {
				continue
			}
			for _, lp := range mt.GetLabel() {
				if want[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return mt.GetGauge().GetValue()
		}
	}
	return math.NaN()
}

// TestHealthFollowsPartitions: partitions join and leave the engine's
// status (in its order, between others) and a leader moves to another
// broker; each check still gives every partition its own source offsets,
// the leaders asked for again after the move.
func TestHealthFollowsPartitions(t *testing.T) {
	c, cl := testkafka.Fake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "a", "b"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(topic string, p int32, n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every partition holds a different number of records.
	want := map[string]int64{"a/0": 1, "a/1": 2, "b/0": 3, "b/1": 4}
	for k, n := range want {
		produce(k[:1], int32(k[2]-'0'), int(n))
	}
	part := func(k string) datapath.PartitionStatus {
		return datapath.PartitionStatus{Topic: k[:1], Partition: int32(k[2] - '0'), Remote: "A." + k[:1], Done: -1, State: datapath.Running}
	}
	eng := &statusEngine{}
	h := New(Config{SourceAlias: "A", TargetAlias: "B", Source: cl, Metrics: metrics.New()}, eng, slog.New(slog.DiscardHandler))
	now := time.Now()
	for _, step := range []struct {
		name  string
		parts []string
		move  string // the partition whose leader moves before the check
	}{
		{"first", []string{"a/0", "b/1"}, ""},
		{"one joins between", []string{"a/0", "a/1", "b/1"}, ""},
		{"one leaves, one joins", []string{"a/1", "b/0", "b/1"}, ""},
		{"leader moves", []string{"a/1", "b/0", "b/1"}, "b/0"},
	} {
		t.Run(step.name, func(t *testing.T) {
			eng.mu.Lock()
			eng.st = nil
			for _, k := range step.parts {
				eng.st = append(eng.st, part(k))
			}
			eng.mu.Unlock()
			if step.move != "" {
				p := part(step.move)
				to := 1 - c.LeaderFor(p.Topic, p.Partition)
				if err := c.MoveTopicPartition(p.Topic, p.Partition, to); err != nil {
					t.Fatal(err)
				}
				produce(p.Topic, p.Partition, 5)
				want[step.move] += 5
			}
			// After a move the first check learns of it; the next lists
			// the partition at its new leader.
			for range 2 {
				now = now.Add(5 * time.Second)
				h.Check(ctx, now)
			}
			for _, s := range h.cfg.Table.Status(eng) {
				k := s.Topic + "/" + strconv.Itoa(int(s.Partition))
				if s.SourceEnd != want[k] || s.Lag != want[k] {
					t.Errorf("%s: source end %d, lag %d; want %d", k, s.SourceEnd, s.Lag, want[k])
				}
			}
			h.mu.Lock()
			n := len(h.parts)
			h.mu.Unlock()
			if n != len(step.parts) {
				t.Errorf("%d partitions watched, want %d", n, len(step.parts))
			}
		})
	}
}

func TestRequests(t *testing.T) {
	w := func(topic string, p, leader int32) *watch {
		return &watch{tp: progress.TP{Topic: topic, Partition: p}, leader: leader}
	}
	ws := []*watch{w("a", 0, 1), w("a", 1, 2), w("a", 2, 1), w("b", 0, -1), w("b", 1, 1), w("c", 0, 2)}
	got := map[int32][]string{}
	for _, l := range requests(ws, -2, time.Second) {
		var listed []string
		for _, rt := range l.req.Topics {
			for _, rp := range rt.Partitions {
				if rp.Timestamp != -2 {
					t.Errorf("timestamp %d", rp.Timestamp)
				}
				listed = append(listed, rt.Topic+strconv.Itoa(int(rp.Partition)))
			}
		}
		for i, lw := range l.ws {
			if want := lw.tp.Topic + strconv.Itoa(int(lw.tp.Partition)); i >= len(listed) || listed[i] != want {
				t.Errorf("broker %d: watches out of step with the request: %v", l.broker, listed)
			}
		}
		got[l.broker] = listed
	}
	want := map[int32][]string{1: {"a0", "a2", "b1"}, 2: {"a1", "c0"}}
	if !maps.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("requests %v, want %v (b0 has no leader)", got, want)
	}
}

// TestListed: offsets land on their partitions whatever order the broker
// answers in; a partition error has the leaders asked for again.
func TestListed(t *testing.T) {
	h := New(Config{}, nil, nil)
	var ws []*watch
	for _, k := range []string{"a/0", "a/1", "b/0", "b/1"} {
		w := &watch{tp: progress.TP{Topic: k[:1], Partition: int32(k[2] - '0')}, leader: 1}
		h.parts[w.tp] = w
		ws = append(ws, w)
	}
	ls := requests(ws, -1, time.Second)
	h.ends = ls
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, tt := range []struct {
		topic string
		parts []int32
	}{{"b", []int32{0, 1}}, {"a", []int32{1, 0}}} {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = tt.topic
		for _, p := range tt.parts {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Offset = p, int64(10*(tt.topic[0]-'a')+byte(p))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	got := map[string]int64{}
	h.listed([]answer{{l: &ls[0], resp: resp}}, func(w *watch, off int64) {
		got[w.tp.Topic+"/"+strconv.Itoa(int(w.tp.Partition))] = off
	})
	if want := map[string]int64{"a/0": 0, "a/1": 1, "b/0": 10, "b/1": 11}; !maps.Equal(got, want) {
		t.Errorf("offsets %v, want %v", got, want)
	}
	if h.ends == nil {
		t.Error("leaders dropped without an error")
	}
	resp.Topics[0].Partitions[1].ErrorCode = kerr.NotLeaderForPartition.Code
	h.listed([]answer{{l: &ls[0], resp: resp}}, func(*watch, int64) {})
	if h.ends != nil {
		t.Error("leaders kept after NOT_LEADER_FOR_PARTITION")
	}
}

// TestHealthHeld: partitions the flow holds back (in its Table) are watched with
// the state they have, with their lag and a state series; once in the
// engine, their state is the engine's at once, not the last check's.
func TestHealthHeld(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	eng := &statusEngine{}
	tab := datapath.NewTable(nil)
	t0 := progress.TP{Topic: "t", Partition: 0}
	tab.Hold(datapath.Held{TP: t0, Remote: "A.t", State: datapath.Fencing, Why: "refused"})
	h := New(Config{SourceAlias: "A", TargetAlias: "B", Source: cl, Metrics: m, Table: tab}, eng, slog.New(slog.DiscardHandler))
	now := time.Now()
	h.Check(ctx, now)
	if st := tab.Status(eng); len(st) != 1 || st[0].State != datapath.Fencing || st[0].Lag != 1 || st[0].Error != "refused" {
		t.Errorf("held: %+v, want fencing with lag 1", st)
	}
	if got := healthMetric(t, m, "kmirror_partition_state", "A.t", "0", datapath.Fencing); got != 1 {
		t.Errorf("fencing series %v, want 1", got)
	}
	h.Check(ctx, now.Add(time.Hour)) // held partitions never stall
	if got := healthMetric(t, m, "kmirror_partition_state", "A.t", "0", datapath.Fencing); got != 1 || len(eng.restarts) != 0 {
		t.Errorf("an hour later: fencing series %v, restarts %v; want 1, none", got, eng.restarts)
	}

	eng.mu.Lock()
	eng.st = []datapath.PartitionStatus{{Topic: "t", Partition: 0, Remote: "A.t", Done: 0, State: datapath.Running}}
	eng.mu.Unlock()
	tab.Unhold([]progress.TP{t0})
	if st := h.cfg.Table.Status(eng); st[0].State != datapath.Running {
		t.Errorf("started, before a check: %s, want running", st[0].State)
	}
	h.Check(ctx, now.Add(time.Hour+time.Second))
	if f, r := healthMetric(t, m, "kmirror_partition_state", "A.t", "0", datapath.Fencing), healthMetric(t, m, "kmirror_partition_state", "A.t", "0", datapath.Running); f != 0 || r != 1 {
		t.Errorf("started: fencing series %v, running %v; want 0, 1", f, r)
	}
}

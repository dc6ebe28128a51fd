package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

// flowConfig is a file body for src->dst on the shared clusters with RF 1,
// copying topics; the pair dst->src only emits heartbeats.
func flowConfig(src, dst string, a, b *testkafka.Cluster, topics, extra string) string {
	return strings.Join([]string{
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + strings.Join(a.Bootstrap, ","),
		dst + ".bootstrap.servers = " + strings.Join(b.Bootstrap, ","),
		src + "->" + dst + ".enabled = true",
		src + "->" + dst + ".topics = " + topics,
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"refresh.topics.interval.seconds = 1",
		// Tests share clusters: other tests' heartbeat topics stay theirs.
		"heartbeats.replication.enabled = false",
		extra,
	}, "\n") + "\n"
}

// TestRunnerFlow runs one flow on real brokers on each data path: records
// are copied, Status reports the flow and its partitions, and Pause,
// Resume, Restart and Reload act on it.
func TestRunnerFlow(t *testing.T) {
	tests := []struct{ name, extra string }{
		{"passthrough", ""},
		{"re-encode every batch", "kmirror.passthrough.enabled = false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runnerFlow(t, tt.extra) })
	}
}

func runnerFlow(t *testing.T, extra string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	id := time.Now().UnixNano() % 1e6
	src, dst := fmt.Sprintf("rsrc%d", id), fmt.Sprintf("rdst%d", id)
	name, back := src+"->"+dst, dst+"->"+src
	t1, t2 := testkafka.Topic(t, "runner"), testkafka.Topic(t, "runner")
	a.CreateTopic(t, t1, 2, nil)
	a.CreateTopic(t, t2, 1, nil)
	// produce writes n records to topic.
	produce := func(topic string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
		}
		a.Produce(t, recs...)
	}
	// copied waits until the target has n records of topic's remote copy.
	copied := func(topic string, n int) {
		t.Helper()
		remote := src + "." + topic
		testwait.For(t, time.Minute, fmt.Sprintf("%d records in %s on %s", n, remote, dst), func() bool {
			td, err := b.Admin(t).ListTopics(context.Background(), remote)
			if err != nil || td[remote].Err != nil || len(td[remote].Partitions) == 0 {
				return false
			}
			return len(b.ReadAll(t, remote)) == n
		})
	}
	path := writeConfig(t, flowConfig(src, dst, a, b, t1, extra))
	cfg, err := Load(path, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	r := New(path, cfg, nil, metrics.New(), quiet)
	flowStatus := func(n string) (FlowStatus, bool) {
		for _, st := range r.Status() {
			if st.Name == n {
				return st, true
			}
		}
		return FlowStatus{}, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	stopped := false
	stop := func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run returned %v after its context ended, want nil", err)
			}
		case <-time.After(time.Minute):
			t.Error("Run did not return within a minute of its context ending")
		}
	}
	t.Cleanup(stop)

	produce(t1, 10)
	copied(t1, 10)
	running := func() FlowStatus {
		t.Helper()
		var st FlowStatus
		testwait.For(t, time.Minute, name+" running with 2 partitions", func() bool {
			var ok bool
			st, ok = flowStatus(name)
			return ok && st.State == "running" && len(st.Partitions) == 2
		})
		return st
	}
	// Done is the last source offset on the target: the new topic's
	// partitions start at 0, so the Done+1 add up to the records copied.
	testwait.For(t, time.Minute, "the progress of 10 records in Status", func() bool {
		st, ok := flowStatus(name)
		var n int64
		for _, p := range st.Partitions {
			n += p.Done + 1
		}
		return ok && n == 10
	})
	st := running()
	if st.Kind != "replication" || st.Error != "" || st.Since.IsZero() {
		t.Errorf("status %+v, want a replication flow without error", st)
	}
	for i, p := range st.Partitions {
		if p.Topic != t1 || p.Partition != int32(i) || p.Remote != src+"."+t1 {
			t.Errorf("partition status %+v, want %s-%d copied to %s.%s", p, t1, i, src, t1)
		}
	}
	hb, ok := flowStatus(back)
	if !ok || hb.Kind != "heartbeats" || len(hb.Partitions) != 0 {
		t.Errorf("status of %s = %+v (found %v), want a heartbeats flow", back, hb, ok)
	}
	if err := r.Pause(back); !errors.Is(err, ErrUnknownFlow) {
		t.Errorf("Pause(%s) = %v, want ErrUnknownFlow: a heartbeats pair cannot be paused", back, err)
	}

	// Pause, then Resume: the records produced meanwhile arrive.
	if err := r.Pause(name); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, name+" and its partitions paused", func() bool {
		st, ok := flowStatus(name)
		if !ok || st.State != "paused" || len(st.Partitions) != 2 {
			return false
		}
		for _, p := range st.Partitions {
			if p.State != "paused" {
				return false
			}
		}
		return true
	})
	produce(t1, 10)
	if err := r.Resume(name); err != nil {
		t.Fatal(err)
	}
	copied(t1, 20)
	running()

	// Restart: a new run of the flow goes on where the last one stopped.
	before := running().Since
	if err := r.Restart(name); err != nil {
		t.Fatal(err)
	}
	if st := running(); !st.Since.After(before) {
		t.Errorf("since %v after Restart, want later than %v", st.Since, before)
	}
	produce(t1, 4)
	copied(t1, 24)

	// An invalid file changes nothing.
	if err := os.WriteFile(path, []byte("clusters = "+src+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before = running().Since
	if err := r.Reload(); err == nil {
		t.Fatal("Reload of an invalid file succeeded")
	}
	if st, ok := flowStatus(name); !ok || !st.Since.Equal(before) || r.Config() != cfg {
		t.Errorf("after a failed Reload: status %+v (found %v), config replaced %v; want the flow untouched", st, ok, r.Config() != cfg)
	}

	// A changed file: the flow now copies t2 too.
	if err := os.WriteFile(path, []byte(flowConfig(src, dst, a, b, t1+","+t2, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if r.Config() == cfg || !strings.Contains(strings.Join(r.Config().Flows[0].Topics, ","), t2) {
		t.Errorf("Config after Reload has topics %q, want %s", r.Config().Flows[0].Topics, t2)
	}
	produce(t2, 3)
	copied(t2, 3)
	produce(t1, 2)
	copied(t1, 26)
	testwait.For(t, time.Minute, name+" running with 3 partitions", func() bool {
		st, ok := flowStatus(name)
		return ok && st.State == "running" && len(st.Partitions) == 3
	})

	stop()
	if st := r.Status(); len(st) != 0 {
		t.Errorf("Status after Run returned = %+v, want no flows", st)
	}
}

package heartbeat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/wire"
)

func fakeCluster(t *testing.T, brokers int) []kgo.Opt {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
}

func newClient(t *testing.T, opts []kgo.Opt, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runFor runs an emitter for d and returns what it wrote.
// runUntil runs an emitter at interval until it has sent n heartbeats
// (a minute at most), then reads the topic.
func runUntil(t *testing.T, conn []kgo.Opt, topic string, rf int16, interval time.Duration, n int64) (*Emitter, []*kgo.Record) {
	t.Helper()
	cl := newClient(t, conn, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e := New(cl, kadm.NewClient(cl), topic, "A", "B", rf, interval, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		for ctx.Err() == nil && e.Sent() < n {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	if err := e.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if e.Sent() < n {
		t.Fatalf("%d heartbeats sent in a minute at a %v interval, want %d", e.Sent(), interval, n)
	}
	var recs []*kgo.Record
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := readlog.ToEnd(rctx, conn, topic, func(r *kgo.Record) { recs = append(recs, r) }); err != nil {
		t.Fatal(err)
	}
	return e, recs
}

// checkSpacing asserts that heartbeats came no faster than one per
// interval on average (a busy machine may make them slower).
func checkSpacing(t *testing.T, recs []*kgo.Record, interval time.Duration) {
	t.Helper()
	if len(recs) < 2 {
		t.Fatalf("%d heartbeats, want at least 2", len(recs))
	}
	span := recs[len(recs)-1].Timestamp.Sub(recs[0].Timestamp)
	if avg := span / time.Duration(len(recs)-1); avg < interval*9/10 {
		t.Errorf("%d heartbeats %v apart on average, want about %v", len(recs), avg, interval)
	}
}

// checkCounts asserts that every heartbeat read was counted as sent and
// none as failed. One in flight when Run stopped is neither, and may still
// have landed.
func checkCounts(t *testing.T, e *Emitter, recs []*kgo.Record) {
	t.Helper()
	if n := int64(len(recs)); n < e.Sent() || n > e.Sent()+1 || e.Failed() != 0 {
		t.Errorf("Sent %d Failed %d, read %d", e.Sent(), e.Failed(), len(recs))
	}
}

// checkHeartbeats asserts the MM2 record shape of every heartbeat.
func checkHeartbeats(t *testing.T, recs []*kgo.Record, source, target string) {
	t.Helper()
	prev := int64(0)
	for _, r := range recs {
		h, err := wire.DecodeHeartbeat(r.Key, r.Value)
		if err != nil {
			t.Fatalf("offset %d: %v", r.Offset, err)
		}
		if h.SourceAlias != source || h.TargetAlias != target {
			t.Errorf("offset %d: heartbeat %s->%s, want %s->%s", r.Offset, h.SourceAlias, h.TargetAlias, source, target)
		}
		if r.Partition != 0 || len(r.Headers) != 0 {
			t.Errorf("offset %d: partition %d, %d headers; want partition 0, no headers", r.Offset, r.Partition, len(r.Headers))
		}
		if got := r.Timestamp.UnixMilli(); got != h.Timestamp {
			t.Errorf("offset %d: record timestamp %d, heartbeat timestamp %d", r.Offset, got, h.Timestamp)
		}
		if h.Timestamp < prev {
			t.Errorf("offset %d: timestamp went back from %d to %d", r.Offset, prev, h.Timestamp)
		}
		if v, _ := wire.ValueVersion(r.Value); v != 0 || len(r.Value) != 10 {
			t.Errorf("offset %d: value version %d, %d bytes; want version 0, 10 bytes", r.Offset, v, len(r.Value))
		}
		prev = h.Timestamp
	}
}

func TestRunEmitsEveryInterval(t *testing.T) {
	conn := fakeCluster(t, 1)
	e, recs := runUntil(t, conn, "heartbeats", 1, 50*time.Millisecond, 10)
	checkSpacing(t, recs, 50*time.Millisecond)
	checkCounts(t, e, recs)
	checkHeartbeats(t, recs, "A", "B")

	adm := kadm.NewClient(newClient(t, conn))
	ctx := context.Background()
	td, err := adm.ListTopics(ctx, "heartbeats")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["heartbeats"].Partitions); n != 1 {
		t.Errorf("heartbeats has %d partitions, want 1", n)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "heartbeats")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("heartbeats", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Configs {
		if kv.Key == "cleanup.policy" && kv.MaybeValue() != "compact" {
			t.Errorf("cleanup.policy = %q, want compact", kv.MaybeValue())
		}
	}
}

func TestRunKeepsExistingTopic(t *testing.T) {
	conn := fakeCluster(t, 1)
	adm := kadm.NewClient(newClient(t, conn))
	// A pre-existing topic with more partitions: heartbeats still go to 0.
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "hb"); err != nil {
		t.Fatal(err)
	}
	_, recs := runUntil(t, conn, "hb", 1, 20*time.Millisecond, 3)
	if len(recs) == 0 {
		t.Fatal("no heartbeats")
	}
	checkHeartbeats(t, recs, "A", "B")
}

func TestCreateTopicErrors(t *testing.T) {
	conn := fakeCluster(t, 1)
	cl := newClient(t, conn, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	e := New(cl, kadm.NewClient(cl), "heartbeats", "A", "B", 3, time.Second, nil)
	err := e.Run(ctx)
	if !errors.Is(err, kerr.InvalidReplicationFactor) || !strings.Contains(err.Error(), RFKey) {
		t.Fatalf("Run with RF 3 on one broker: %v; want InvalidReplicationFactor naming %s", err, RFKey)
	}

	e = New(cl, kadm.NewClient(cl), "heartbeats", "A", "B", 1, 0, nil)
	if err := e.Run(ctx); err == nil {
		t.Fatal("Run with a zero interval succeeded")
	}
}

func TestEmitRequiresManualPartitioner(t *testing.T) {
	conn := fakeCluster(t, 1)
	cl := newClient(t, conn, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "heartbeats"); err != nil {
		t.Fatal(err)
	}
	e := New(cl, adm, "heartbeats", "A", "B", 1, 10*time.Millisecond, nil)
	// Round-robin over 4 partitions leaves partition 0 within 2 records.
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		err = e.Emit(ctx)
	}
	if !errors.Is(err, errWrongPartition) {
		t.Fatalf("Emit with a round-robin producer: %v", err)
	}
	if err := e.Run(ctx); !errors.Is(err, errWrongPartition) {
		t.Fatalf("Run with a round-robin producer: %v", err)
	}
}

func TestEmitStopsWithContext(t *testing.T) {
	conn := fakeCluster(t, 1)
	cl := newClient(t, conn, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e := New(cl, kadm.NewClient(cl), "heartbeats", "A", "B", 1, time.Hour, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestEmitCounts: a write the cluster refuses counts as failed; one
// abandoned because the emitter stops does not.
func TestEmitCounts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		topic      string // "" creates the topic first
		stopped    bool
		wantFailed int64
	}{
		{name: "written"},
		{name: "refused: no such topic", topic: "missing", wantFailed: 1},
		{name: "stopping", stopped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := fakeCluster(t, 1)
			cl := newClient(t, conn, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.UnknownTopicRetries(0))
			topic := tc.topic
			e := New(cl, kadm.NewClient(cl), "heartbeats", "A", "B", 1, time.Hour, nil)
			if topic == "" {
				if err := e.CreateTopic(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else {
				e = New(cl, kadm.NewClient(cl), topic, "A", "B", 1, time.Hour, nil)
			}
			ctx, cancel := context.WithCancel(t.Context())
			if tc.stopped {
				cancel()
			}
			defer cancel()
			err := e.Emit(ctx)
			if (err == nil) != (tc.wantFailed == 0 && !tc.stopped) {
				t.Fatalf("Emit: %v", err)
			}
			if e.Failed() != tc.wantFailed {
				t.Fatalf("Failed() = %d, want %d (err %v)", e.Failed(), tc.wantFailed, err)
			}
		})
	}
}

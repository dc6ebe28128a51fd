package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

// TestAddRemove: flows added at run time (internal/connect's connectors)
// copy records, show in Status under their names, fail without stopping
// Run, and stop on Remove; a runner without a file refuses Reload.
func TestAddRemove(t *testing.T) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	id := time.Now().UnixNano() % 1e6
	src, dst := fmt.Sprintf("asrc%d", id), fmt.Sprintf("adst%d", id)
	topic := testkafka.Topic(t, "added")
	a.CreateTopic(t, topic, 1, nil)
	a.Produce(t, &kgo.Record{Topic: topic, Value: []byte("one")}, &kgo.Record{Topic: topic, Value: []byte("two")})
	good := parse(t, flowConfig(src, dst, a, b, topic, "")).Flows[0]
	// Replication factor 3 on a one-node target: the flow fails at start.
	bad := parse(t, flowConfig(src+"x", dst, a, b, topic, "replication.factor = 3\noffset.storage.replication.factor = 3")).Flows[0]

	r := New("", &config.Config{}, nil, metrics.New(), quiet)
	if err := r.Add("early", good, Replication); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Add before Run = %v, want ErrNotRunning", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	testwait.For(t, time.Minute, "Run to start", func() bool { return r.Add("conn-good", good, Replication) == nil })
	if err := r.Add("conn-bad", bad, Replication); err != nil {
		t.Fatal(err)
	}
	state := func(name string) string {
		for _, st := range r.Status() {
			if st.Name == name {
				return st.State
			}
		}
		return "absent"
	}
	remote := src + "." + topic
	testwait.For(t, time.Minute, "2 records on the target", func() bool {
		td, err := b.Admin(t).ListTopics(context.Background(), remote)
		return err == nil && td[remote].Err == nil && len(td[remote].Partitions) > 0 && len(b.ReadAll(t, remote)) == 2
	})
	testwait.For(t, time.Minute, "conn-bad to fail", func() bool { return state("conn-bad") == "failed" })
	select {
	case err := <-runErr:
		t.Fatalf("Run stopped on an added flow's failure: %v", err)
	default:
	}
	if st := state("conn-good"); st != "running" {
		t.Errorf("conn-good is %s", st)
	}
	for _, st := range r.Status() {
		if st.Name == "conn-good" && st.Pair != good.Name() {
			t.Errorf("conn-good's pair is %q, want %q", st.Pair, good.Name())
		}
	}
	if err := r.Reload(); err == nil {
		t.Error("Reload without a file succeeded")
	}
	if err := r.Restart("conn-bad"); err != nil {
		t.Errorf("Restart(conn-bad) = %v", err)
	}
	for _, name := range []string{"conn-good", "conn-bad"} {
		if err := r.Remove(name); err != nil {
			t.Errorf("Remove(%s) = %v", name, err)
		}
		if st := state(name); st != "absent" {
			t.Errorf("%s after Remove: %s", name, st)
		}
	}
	if err := r.Remove("conn-good"); !errors.Is(err, ErrUnknownFlow) {
		t.Errorf("second Remove = %v, want ErrUnknownFlow", err)
	}
}

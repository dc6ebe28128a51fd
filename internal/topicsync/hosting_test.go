package topicsync

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// fakeTarget is a kfake target cluster whose partitions in unhosted
// answer ListOffsets with NOT_LEADER_FOR_PARTITION, as a broker does for a
// partition its metadata names but it does not host yet, and which
// refuses to create the topics in refuse.
type fakeTarget struct {
	*kfake.Cluster
	mu       sync.Mutex
	unhosted map[string]map[int32]bool
	refuse   map[string]int16 // the error code CreateTopics answers for a topic
}

func newFakeTarget(t *testing.T) *fakeTarget {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fakeTarget{Cluster: c, unhosted: map[string]map[int32]bool{}, refuse: map[string]int16{}}
	c.ControlKey(int16(kmsg.ListOffsets), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		f.mu.Lock()
		defer f.mu.Unlock()
		return testkafka.ListOffsetsAnswer(r.(*kmsg.ListOffsetsRequest), func(topic string, p int32) (int16, int64) {
			if f.unhosted[topic][p] {
				return kerr.NotLeaderForPartition.Code, -1
			}
			return 0, 0
		}), nil, true
	})
	c.ControlKey(int16(kmsg.CreateTopics), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.CreateTopicsRequest)
		f.mu.Lock()
		defer f.mu.Unlock()
		code, ok := f.refuse[req.Topics[0].Topic]
		if len(req.Topics) != 1 || !ok {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic, st.ErrorCode = req.Topics[0].Topic, code
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	return f
}

// host sets which partitions of topic are not hosted yet.
func (f *fakeTarget) host(topic string, unhosted ...int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unhosted[topic] = map[int32]bool{}
	for _, p := range unhosted {
		f.unhosted[topic][p] = true
	}
}

// TestHostedPartitions: partitions of a new remote topic, and partitions
// added to one (by this Syncer or another worker), are not Hosted until
// the target answers ListOffsets for them; past hostTimeout they are
// anyway; a topic the target refuses to create has none Hosted and Err.
func TestHostedPartitions(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	tgt := newFakeTarget(t)
	client := func(c *kfake.Cluster) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MetadataMinAge(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	srcAdm, tgtCl := kadm.NewClient(client(src)), client(tgt.Cluster)
	tgtAdm := kadm.NewClient(tgtCl)
	pol, err := policy.New(policy.Config{Class: "DefaultReplicationPolicy", Separator: "."})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := policy.NewFilter([]string{"t", "bad"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s := &Syncer{Source: srcAdm, Target: tgtAdm, TargetClient: tgtCl, SourceAlias: "A", TargetAlias: "B",
		Policy: pol, Topics: filter, ReplicationFactor: -1, Log: slog.New(slog.NewTextHandler(&log, nil))}
	ctx := context.Background()
	// The client retries NOT_LEADER until the check's deadline.
	oldCheck := hostCheck
	hostCheck = 100 * time.Millisecond
	t.Cleanup(func() { hostCheck = oldCheck })
	partitions := func(adm *kadm.Client, topic string, n int) {
		t.Helper()
		r, err := adm.CreateTopic(ctx, int32(n), -1, nil, topic)
		if err == nil {
			err = r.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			var rs kadm.CreatePartitionsResponses
			if rs, err = adm.UpdatePartitions(ctx, n, topic); err == nil {
				err = rs.Error()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Sync until t is as wanted: metadata cached for up to 10 ms may
	// hide a change for a Sync or two, but never more may be Hosted.
	sync := func(step string, hosted int32, ready, pending bool) {
		t.Helper()
		var got Topic
		for deadline := time.Now().Add(5 * time.Second); ; {
			ts, err := s.Sync(ctx)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			for _, tp := range ts {
				if tp.Name == "t" {
					got = tp
				}
			}
			if got.Hosted > hosted {
				t.Fatalf("%s: Hosted %d, want at most %d", step, got.Hosted, hosted)
			}
			if got.Hosted == hosted && got.Ready == ready && got.Err == "" && s.Pending() == pending {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Hosted %d, Ready %v, Err %q, Pending %v; want %d, %v, none, %v", step, got.Hosted, got.Ready, got.Err, s.Pending(), hosted, ready, pending)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	partitions(srcAdm, "t", 2)
	tgt.host("A.t", 1)
	sync("created, partition 1 not hosted", 1, false, true)
	tgt.host("A.t")
	sync("every partition hosted", 2, true, false)

	partitions(srcAdm, "t", 5)
	tgt.host("A.t", 3, 4)
	sync("grown, 3 and 4 not hosted", 3, false, true)
	tgt.host("A.t", 4)
	sync("4 not hosted", 4, false, true)
	tgt.host("A.t")
	sync("grown partitions hosted", 5, true, false)

	// Another worker grows the remote topic first.
	partitions(srcAdm, "t", 7)
	partitions(tgtAdm, "A.t", 7)
	tgt.host("A.t", 5, 6)
	sync("grown by another worker, not hosted", 5, false, true)
	tgt.host("A.t")
	sync("grown by another worker, hosted", 7, true, false)

	// Past hostTimeout the partitions are handed on anyway.
	partitions(srcAdm, "t", 8)
	tgt.host("A.t", 7)
	sync("grown, not hosted", 7, false, true)
	old := hostTimeout
	hostTimeout = 0
	t.Cleanup(func() { hostTimeout = old })
	sync("grown, past the timeout", 8, true, false)
	if !strings.Contains(log.String(), "replicating them anyway") {
		t.Errorf("no warning about partitions copied before they are hosted:\n%s", &log)
	}
	hostTimeout = old

	// The target refuses to create a remote topic: none of its
	// partitions is Hosted, with the reason.
	tgt.mu.Lock()
	tgt.refuse["A.bad"] = kerr.PolicyViolation.Code
	tgt.mu.Unlock()
	partitions(srcAdm, "bad", 2)
	var bad Topic
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(bad.Err, "POLICY_VIOLATION"); time.Sleep(5 * time.Millisecond) {
		ts, err := s.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range ts {
			if tp.Name == "bad" {
				bad = tp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused topic: Err %q, want POLICY_VIOLATION", bad.Err)
		}
	}
	if bad.Hosted != 0 || bad.Ready {
		t.Errorf("refused topic: Hosted %d, Ready %v; want 0, false", bad.Hosted, bad.Ready)
	}

	// A replication factor the target has the brokers for, refused while
	// one is in controlled shutdown: the topic waits with the reason and
	// is made at a later round; Sync does not fail (it failed the flow's
	// start). One larger than the target fails Sync, naming the key.
	// (The fake refuses only requests of one topic: "bad" is left out.)
	if s.Topics, err = policy.NewFilter([]string{"t", "rf", "big"}, nil); err != nil {
		t.Fatal(err)
	}
	s.ReplicationFactor = 1
	tgt.mu.Lock()
	tgt.refuse["A.rf"] = kerr.InvalidReplicationFactor.Code
	tgt.mu.Unlock()
	partitions(srcAdm, "rf", 1)
	find := func(name string) (Topic, error) {
		ts, err := s.Sync(ctx)
		for _, tp := range ts {
			if tp.Name == name {
				return tp, err
			}
		}
		return Topic{}, err
	}
	var rf Topic
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(rf.Err, "INVALID_REPLICATION_FACTOR"); time.Sleep(5 * time.Millisecond) {
		if rf, err = find("rf"); err != nil {
			t.Fatalf("Sync with the replication factor refused for now: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic refused for now: Err %q, want INVALID_REPLICATION_FACTOR", rf.Err)
		}
	}
	tgt.mu.Lock()
	delete(tgt.refuse, "A.rf")
	tgt.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); rf.Err != "" || rf.Hosted != 1; time.Sleep(5 * time.Millisecond) {
		if rf, err = find("rf"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic after the refusal passed: Err %q, Hosted %d; want made", rf.Err, rf.Hosted)
		}
	}
	s.ReplicationFactor = 3
	tgt.mu.Lock()
	tgt.refuse["A.big"] = kerr.InvalidReplicationFactor.Code
	tgt.mu.Unlock()
	partitions(srcAdm, "big", 1)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := s.Sync(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "key replication.factor") {
				t.Fatalf("Sync with a factor larger than the target: %v; want the key named", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Sync with a factor larger than the target did not fail")
		}
	}
}

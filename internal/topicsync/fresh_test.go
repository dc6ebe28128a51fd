package topicsync

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/policy"
)

// TestDeletedRemoteSeenThroughCache: a Sync lists the remote topics on the
// target afresh, not from the client's metadata cache (kadm serves
// ListTopics from it for MetadataMinAge): a remote topic deleted a moment
// after the last Sync is made again at the next one. A loaded make test
// found TestSyncUnchangedBroker's deleted topic left unmade, the cache
// still listing it.
func TestDeletedRemoteSeenThroughCache(t *testing.T) {
	cluster := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	client := func(c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	src, tgt := cluster(), cluster()
	tgtCl := client(tgt, kgo.MetadataMinAge(3*time.Second)) // a cache that outlives the deletion below
	pol, err := policy.New(policy.Config{Class: "DefaultReplicationPolicy", Separator: "."})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := policy.NewFilter([]string{"t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s := &Syncer{Source: kadm.NewClient(client(src)), Target: kadm.NewClient(tgtCl), TargetClient: tgtCl, SourceAlias: "A", TargetAlias: "B",
		Policy: pol, Topics: filter, ReplicationFactor: -1, Log: slog.New(slog.NewTextHandler(&log, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(client(src)).CreateTopic(ctx, 2, -1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	syncReady := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			ts, err := s.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) == 1 && ts[0].Ready && !s.Pending() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("A.t not Ready in 30 s: %+v\n%s", ts, log.String())
			}
		}
	}
	syncReady()
	syncReady() // the target's listing of A.t is now in tgtCl's cache
	if _, err := kadm.NewClient(client(tgt)).DeleteTopics(ctx, "A.t"); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	syncReady()
	if !strings.Contains(log.String(), "created remote topic") {
		t.Errorf("A.t, deleted on the target, was not made again at the next Sync:\n%s", log.String())
	}
}

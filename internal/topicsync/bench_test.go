package topicsync

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSyncUnchanged is one topic refresh of 1,000 source topics × 5
// partitions (kfake) whose remote topics are all there and hosted, with
// nothing changed: "every time" as Sync did before (and does without a
// SourceClient), listing both clusters through kadm (whose target listing
// kgo may answer from its metadata cache); "unchanged" with one metadata
// request to the source and one for the remote topics to the target, both
// straight to a broker (the target check, made at every refresh).
func BenchmarkSyncUnchanged(b *testing.B) {
	topics := make([]string, 1000)
	remotes := make([]string, 1000)
	for i := range topics {
		topics[i] = "t" + strconv.Itoa(i)
		remotes[i] = "A." + topics[i]
	}
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(5, topics...))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(5, remotes...))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	client := func(c *kfake.Cluster) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		return cl
	}
	srcCl, dstCl := client(src), client(dst)
	p, f := defaultPolicy(b, "t.*")
	for _, direct := range []bool{false, true} {
		b.Run(map[bool]string{false: "every time", true: "unchanged"}[direct], func(b *testing.B) {
			s := &Syncer{Source: kadm.NewClient(srcCl), Target: kadm.NewClient(dstCl), TargetClient: dstCl,
				SourceAlias: "A", TargetAlias: "B", Policy: p, Topics: f, ReplicationFactor: -1, Log: slog.New(slog.DiscardHandler)}
			if direct {
				s.SourceClient = srcCl
			}
			ctx := context.Background()
			ts, err := s.Sync(ctx)
			if err != nil || len(ts) != len(topics) || !ts[0].Ready {
				b.Fatalf("first Sync: %d topics, err %v", len(ts), err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if ts, err := s.Sync(ctx); err != nil || len(ts) != len(topics) {
					b.Fatalf("%d topics, err %v", len(ts), err)
				}
			}
		})
	}
}

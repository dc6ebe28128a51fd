package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/offsetsync"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// copyPartition plays kmirror's record path for partition 0 of topic: it
// copies A's committed records to B's remote topic (value = upstream
// offset), writing a foreign record on B every foreignEvery copies, and
// hands every pair to the offset-sync writer.
func copyPartition(t *testing.T, a, b *testkafka.Cluster, topic, remote string, w *offsetsync.Writer, foreignEvery int) {
	t.Helper()
	src := a.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	dst := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	end, err := a.Admin(t).ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := end.Lookup(topic, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, seen := 0, int64(-1)
	for seen < last.Offset-2 { // the last offset is a transaction marker
		fs := src.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("copy: %v (at %d of %d)", ctx.Err(), seen, last.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen = r.Offset
			n++
			if foreignEvery > 0 && n%foreignEvery == 0 {
				if err := dst.ProduceSync(ctx, &kgo.Record{Topic: remote, Value: []byte("foreign")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			out := &kgo.Record{Topic: remote, Value: []byte(strconv.FormatInt(r.Offset, 10))}
			if err := dst.ProduceSync(ctx, out).FirstErr(); err != nil {
				t.Fatal(err)
			}
			w.Acked(topic, 0, r.Offset, out.Offset)
		})
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// readFrom returns the upstream offsets of B's copies from offset on.
func readFrom(t *testing.T, b *testkafka.Cluster, remote string, from int64) []int64 {
	t.Helper()
	var ups []int64
	for _, r := range b.ReadAll(t, remote) {
		if r.Offset < from {
			continue
		}
		if u, err := strconv.ParseInt(string(r.Value), 10, 64); err == nil {
			ups = append(ups, u)
		}
	}
	return ups
}

// TestBrokersFailover: a transactional topic on A, copied to B with
// foreign records interleaved, groups committed at various points on A.
// After the task runs, a consumer on B starting at each checkpoint misses
// nothing; in exact mode it re-reads nothing, in mm2 mode the re-reads are
// counted. A second task started afresh (a restart) translates the same.
func TestBrokersFailover(t *testing.T) {
	cl := testkafka.Shared(t, 2)
	a, b := cl[0], cl[1]
	topic := testkafka.Topic(t, "cp")
	a.CreateTopic(t, topic, 1, nil)

	// 30 transactions of 10 records: a marker after each.
	txn := a.Client(t, kgo.TransactionalID(topic+"-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 10; j++ {
			txn.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}, nil)
		}
		if err := txn.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	// Committed records sit at offsets 11k..11k+9; markers at 11k+10.
	committed := map[string]int64{
		topic + "-mid":    11*17 + 4, // mid-batch
		topic + "-after":  11 * 20,   // first record after a marker
		topic + "-atmark": 11*20 - 1, // the marker itself
		topic + "-head":   11 * 30,   // fully caught up
		topic + "-far":    3,         // far behind
	}
	sadm := a.Admin(t)
	for g, at := range committed {
		o := make(kadm.Offsets)
		o.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		if _, err := sadm.CommitOffsets(ctx, g, o); err != nil {
			t.Fatal(err)
		}
	}

	results := map[string]map[string]int{}
	for _, mode := range []string{"exact", "mm2"} {
		t.Run(mode, func(t *testing.T) {
			f := testFlow(a.Bootstrap, b.Bootstrap, mode)
			// A source alias per mode and run keeps their topics on B
			// (remote, offset syncs, checkpoints) apart from other runs'
			// on the same clusters.
			f.Source = testkafka.Topic(t, "src")
			f.Topics = []string{topic}
			f.Groups = []string{topic + "-.*"}
			f.SyncGroupOffsetsEnabled = false
			built(f)
			remote := f.Source + "." + topic
			syncsTopic := f.OffsetSyncsTopic()
			tadm := b.Admin(t)
			b.CreateTopic(t, remote, 1, nil)
			compact := "compact"
			b.CreateTopic(t, syncsTopic, 1, map[string]*string{"cleanup.policy": &compact})
			wcl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			w := offsetsync.New(wcl, syncsTopic, 100, log, nil)
			if err := SetupWriter(ctx, f, w, tadm, wcl); err != nil {
				t.Fatal(err)
			}
			copyPartition(t, a, b, topic, remote, w, 37)

			task, err := New(Config{Flow: f, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- task.Run(rctx) }()
			testwait.For(t, 15*time.Second, "checkpoints of every group", func() bool {
				for g := range committed {
					if len(task.Checkpoints(g)) == 0 {
						return false
					}
				}
				return true
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			res := map[string]int{}
			for g, at := range committed {
				cp := task.Checkpoints(g)[0]
				ups := readFrom(t, b, remote, cp.DownstreamOffset)
				seen := map[int64]bool{}
				reread := 0
				for _, u := range ups {
					seen[u] = true
					if u < at {
						reread++
					}
				}
				for u := int64(0); u < 330; u++ {
					if u%11 != 10 && u >= at && !seen[u] {
						t.Errorf("%s: group %s committed %d -> %d on B misses upstream %d", mode, g, at, cp.DownstreamOffset, u)
						break
					}
				}
				if mode == "exact" && reread > 0 {
					t.Errorf("exact: group %s committed %d -> %d re-reads %d records", g, at, cp.DownstreamOffset, reread)
				}
				res[g[len(topic)+1:]] = reread
				// A restart translates the same from the topics alone.
				again, err := Translate(ctx, f, g, log)
				if err != nil {
					t.Fatal(err)
				}
				if len(again) != 1 || again[0].DownstreamOffset != cp.DownstreamOffset {
					t.Errorf("%s: after restart group %s translates to %+v, want %d", mode, g, again, cp.DownstreamOffset)
				}
			}
			results[mode] = res
			t.Logf("%s: records re-read on B per group: %v", mode, res)
		})
	}
	fmt.Fprintf(os.Stderr, "re-read records: %v\n", results)
}

// TestBrokersGroupSync: an idle (missing) group is written, groups with an
// active member (classic and KIP-848) are not, and a group whose own
// members committed further is never moved back.
func TestBrokersGroupSync(t *testing.T) {
	cl := testkafka.Shared(t, 2)
	a, b := cl[0], cl[1]
	topic := testkafka.Topic(t, "gs")
	remote := "A." + topic
	b.CreateTopic(t, remote, 1, nil)
	ctx := context.Background()
	f := testFlow(a.Bootstrap, b.Bootstrap, "exact")
	task, err := New(Config{Flow: f})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	g := func(s string) string { return topic + "-" + s }
	for name, down := range map[string]int64{"idle": 10, "classic": 20, "kip848": 30, "ahead": 40} {
		task.last[g(name)] = map[cpKey]wire.Checkpoint{{remote, 0}: {Group: g(name), Topic: remote, DownstreamOffset: down, Metadata: "md"}}
	}
	tadm := b.Admin(t)
	o := make(kadm.Offsets)
	o.Add(kadm.Offset{Topic: remote, Partition: 0, At: 55, LeaderEpoch: -1})
	if _, err := tadm.CommitOffsets(ctx, g("ahead"), o); err != nil {
		t.Fatal(err)
	}
	member := func(group string, opts ...kgo.Opt) {
		c := b.Client(t, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(remote), kgo.DisableAutoCommit()}, opts...)...)
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		c.PollFetches(pctx) // joins the group
	}
	member(g("classic"))
	member(g("kip848"), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	testwait.For(t, 15*time.Second, "members on B", func() bool {
		d, err := task.describeTarget(ctx, []string{g("classic"), g("kip848")})
		return err == nil && d[g("classic")].active && d[g("kip848")].active
	})
	task.SyncGroupsOnce(ctx)
	want := map[string]int64{"idle": 10, "classic": -1, "kip848": -1, "ahead": 55}
	for name, w := range want {
		offs, err := tadm.FetchOffsets(ctx, g(name))
		if err != nil {
			t.Fatal(err)
		}
		got := int64(-1)
		if r, ok := offs.Lookup(remote, 0); ok {
			got = r.At
		}
		if got != w {
			t.Errorf("group %s on B at %d, want %d", name, got, w)
		}
	}
}

package cutover

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestStatusOnFakeClusters runs Status against two in-process clusters
// (fakePair) where A's orders holds 3 records a minute old on partition 1
// and B has a 30 s old checkpoint of billing: the lag, the verify verdict
// and the producers watch of each topic, each group's readiness, the
// notes, and the errors of bad client settings.
func TestStatusOnFakeClusters(t *testing.T) {
	const topics = `topic payments A.payments lag 0 0s verified %[1]s writing false ready true []
  0 end 0 copied -1 lag 0 0s verify false
  1 end 0 copied -1 lag 0 0s verify false
`
	const groups = `group billing source true/Empty target false/ age 30 checkpoints-only offsets 1 ready true [] notes []
group reader source true/Empty target false/ age - nothing-to-move offsets 0 ready true [] notes ["no committed offset on a topic that moves"]
group shipping source true/Stable target false/ age - none offsets 0 ready false ["active member(s) on A (Stable): still consuming" "no translated offsets"] ` +
		`notes ["no checkpoints for group \"shipping\" in A.checkpoints.internal on B yet: checkpoints are written every 1m0s for groups matching the flow's groups filter; try again, or use --use translate"]
`
	const noProgress = `note "progress of A->B not read from mm2-offsets.A.internal on B"
`
	const uncopied = `topic orders A.orders lag 3 60s verified %s writing false ready false ["3 records not copied yet (oldest 60 s)"%s]
  0 end 0 copied -1 lag 0 0s verify false
  1 end 3 copied -1 lag 3 60s verify false
`
	const partly = `topic orders A.orders lag 1 60s verified %s writing false ready false ["1 records not copied yet (oldest 60 s)"%s]
  0 end 0 copied -1 lag 0 0s verify false
  1 end 3 copied 2 lag 1 60s verify %v
`
	const differs = ` "the copy differs from the source (see verify)"`
	tests := []struct {
		name     string
		tail     int64
		window   time.Duration
		copied   []string // values copied to B's A.orders partition 1, with the progress saved past them
		writing  bool     // a producer writes to orders during the window
		bad      string   // "source" or "target": that consumer's settings are invalid
		want     string   // statusSummary of the report
		contains []string // when the report varies (writing): lines of statusSummary
		err      string
	}{
		{name: "nothing copied, no verify", tail: -1,
			want: "flow A->B ready false window 0 tail -1 writing [] checkpoints \"\"\n" + noProgress + fmt.Sprintf(uncopied, "skipped", "") + fmt.Sprintf(topics, "skipped") + groups},
		{name: "nothing copied, verify", tail: 0,
			want: "flow A->B ready false window 0 tail 0 writing [] checkpoints \"\"\n" + noProgress + "note \"verify\"\n" + fmt.Sprintf(uncopied, "differs", differs) + fmt.Sprintf(topics, "ok") + groups},
		{name: "partly copied, no verify", tail: -3, copied: []string{"x", "x"},
			want: "flow A->B ready false window 0 tail -1 writing [] checkpoints \"\"\n" + fmt.Sprintf(partly, "skipped", "", false) + fmt.Sprintf(topics, "skipped") + groups},
		{name: "partly copied, verified", tail: 0, copied: []string{"x", "x"},
			want: "flow A->B ready false window 0 tail 0 writing [] checkpoints \"\"\n" + fmt.Sprintf(partly, "ok", "", true) + fmt.Sprintf(topics, "ok") + groups},
		{name: "copy differs", tail: 0, copied: []string{"x", "z"},
			want: "flow A->B ready false window 0 tail 0 writing [] checkpoints \"\"\n" + fmt.Sprintf(partly, "differs", differs, true) + fmt.Sprintf(topics, "ok") + groups},
		{name: "window, no producer", tail: -1, window: 200 * time.Millisecond,
			want: "flow A->B ready false window 0.2 tail -1 writing [] checkpoints \"\"\n" + noProgress + fmt.Sprintf(uncopied, "skipped", "") + fmt.Sprintf(topics, "skipped") + groups},
		{name: "window, producer writing", tail: -1, window: 500 * time.Millisecond, writing: true,
			contains: []string{"flow A->B ready false window 0.5 tail -1 writing [\"orders\"] checkpoints \"\"\n",
				"verified skipped writing true ready false [\"", " \"producers still write to it on the source\"]\n", fmt.Sprintf(topics, "skipped") + groups}},
		{name: "bad source consumer", tail: -1, bad: "source",
			err: "cluster A: sasl.mechanism: \"BOGUS\" is not supported (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or OAUTHBEARER)"},
		{name: "bad target consumer", tail: -1, bad: "target",
			err: "cluster B: sasl.mechanism: \"BOGUS\" is not supported (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or OAUTHBEARER)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cfg, f := fakePair(t)
			now := time.Now().Truncate(time.Second)
			src := statusTestClient(t, f.SourceConsumer)
			tgt := statusTestClient(t, f.TargetConsumer)
			for i := 0; i < 3; i++ {
				if err := src.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("x"), Timestamp: now.Add(-time.Minute)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := kadm.NewClient(tgt).CreateTopic(ctx, 1, 1, nil, "A.checkpoints.internal"); err != nil {
				t.Fatal(err)
			}
			k, v, err := wire.Encode(wire.Checkpoint{Group: "billing", Topic: "orders", Partition: 0, UpstreamOffset: 4, DownstreamOffset: 4})
			if err != nil {
				t.Fatal(err)
			}
			if err := tgt.ProduceSync(ctx, &kgo.Record{Topic: "A.checkpoints.internal", Key: k, Value: v, Timestamp: now.Add(-30 * time.Second)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if len(tt.copied) > 0 {
				statusTestCopy(ctx, t, f, tgt, now, tt.copied)
			}
			switch tt.bad {
			case "source":
				f.SourceConsumer = statusTestBadSASL(f.SourceConsumer)
			case "target":
				f.TargetConsumer = statusTestBadSASL(f.TargetConsumer)
			}
			if tt.writing {
				// Writes one after the other until Status returns, so
				// some land inside the window however late it opens.
				wctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				defer func() { stop(); <-done }()
				go func() {
					defer close(done)
					for wctx.Err() == nil {
						src.ProduceSync(wctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("y")})
					}
				}()
			}
			rep, err := Status(ctx, &Options{Config: cfg, Flow: f, VerifyTail: tt.tail, Window: tt.window, Timeout: 5 * time.Second, Now: func() time.Time { return now }})
			if tt.err != "" || err != nil {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			got := statusSummary(rep)
			if tt.want != "" && got != tt.want {
				t.Errorf("report\n%s\nwant\n%s", got, tt.want)
			}
			for _, c := range tt.contains {
				if !strings.Contains(got, c) {
					t.Errorf("report\n%s\nlacks\n%s", got, c)
				}
			}
		})
	}
}

// statusTestClient is a client of the cluster of the settings m whose
// records go to the partition they name.
func statusTestClient(t *testing.T, m map[string]string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(m["bootstrap.servers"], ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// statusTestCopy writes values to B's A.orders partition 1 as copies of
// orders partition 1 and saves the flow's progress past them.
func statusTestCopy(ctx context.Context, t *testing.T, f *config.Flow, tgt *kgo.Client, now time.Time, values []string) {
	t.Helper()
	st, err := progress.Open(ctx, kadm.NewClient(tgt), []kgo.Opt{kgo.SeedBrokers(strings.Split(f.TargetConsumer["bootstrap.servers"], ",")...)}, tgt,
		progress.Options{Topic: f.OffsetStorageTopic, Source: "A", Partitions: 1, ReplicationFactor: 1}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := tgt.ProduceSync(ctx, &kgo.Record{Topic: "A.orders", Partition: 1, Value: []byte(v), Timestamp: now.Add(-time.Minute)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Save(ctx, map[progress.TP]int64{{Topic: "orders", Partition: 1}: int64(len(values) - 1)}); err != nil {
		t.Fatal(err)
	}
}

// statusTestBadSASL is the client settings m with a SASL mechanism
// clients.Build refuses.
func statusTestBadSASL(m map[string]string) map[string]string {
	out := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "BOGUS"}
	for k, v := range m {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// statusSummary is rep without what varies from run to run: the members'
// names, and the clusters' error text after the first colon.
func statusSummary(rep *StatusReport) string {
	var b strings.Builder
	first := func(s string) string { s, _, _ = strings.Cut(s, ":"); return s }
	fmt.Fprintf(&b, "flow %s ready %v window %g tail %d writing %q checkpoints %q\n", rep.Flow, rep.Ready, rep.WindowSeconds, rep.VerifyTail, rep.StillWriting, first(rep.CheckpointsErr))
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note %q\n", first(n))
	}
	for _, t := range rep.Topics {
		fmt.Fprintf(&b, "topic %s %s lag %d %gs verified %s writing %v ready %v %q\n", t.Topic, t.Remote, t.LagRecords, t.LagSeconds, t.Verified, t.Writing, t.Ready, t.Reasons)
		for _, p := range t.Partitions {
			fmt.Fprintf(&b, "  %d end %d copied %d lag %d %gs verify %v\n", p.Partition, p.SourceEnd, p.Copied, p.LagRecords, p.LagSeconds, p.Verify != nil)
		}
	}
	for _, g := range rep.Groups {
		age := "-"
		if g.CheckpointAgeSeconds != nil {
			age = fmt.Sprint(*g.CheckpointAgeSeconds)
		}
		fmt.Fprintf(&b, "group %s source %v/%s target %v/%s age %s %s offsets %d ready %v %q notes %q\n", g.Group, g.Source.Exists, g.Source.State,
			g.Target.Exists, g.Target.State, age, g.Translation, len(g.Offsets), g.Ready, g.Reasons, g.Notes)
	}
	return b.String()
}

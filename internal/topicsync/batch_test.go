package topicsync

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
)

func TestBatches(t *testing.T) {
	for _, tt := range []struct {
		name    string
		weights []int
		topics  int // batchTopics
		records int // batchRecords
		want    [][]int
	}{
		{"none", nil, 3, 10, nil},
		{"one batch", []int{1, 2, 3}, 3, 10, [][]int{{1, 2, 3}}},
		{"by count", []int{1, 1, 1, 1, 1, 1, 1}, 3, 100, [][]int{{1, 1, 1}, {1, 1, 1}, {1}}},
		{"by records", []int{4, 4, 4, 1, 1}, 10, 9, [][]int{{4, 4}, {4, 1, 1}}},
		{"heavy item alone", []int{1, 50, 1}, 10, 9, [][]int{{1}, {50}, {1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setBatch(t, tt.topics, tt.records)
			got := batches(tt.weights, func(w int) int { return w })
			if !slices.EqualFunc(got, tt.want, slices.Equal[[]int]) {
				t.Errorf("batches(%v) = %v, want %v", tt.weights, got, tt.want)
			}
		})
	}
}

// setBatch sets the batch limits for one test; tests that call it do not
// run in parallel.
func setBatch(t testing.TB, topics, records int) {
	oldT, oldR := batchTopics, batchRecords
	batchTopics, batchRecords = topics, records
	t.Cleanup(func() { batchTopics, batchRecords = oldT, oldR })
}

// requestCounter counts the requests a client has answered, by API key.
type requestCounter struct {
	mu sync.Mutex
	n  map[int16]int
}

// OnBrokerRead counts a request once its answer is read. kgo calls it
// before handing the answer to the caller, so a count taken after a call
// returns includes it; OnBrokerWrite runs on the writing goroutine and
// may come after the answer (a Sync's count came up one short under load).
func (c *requestCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		c.mu.Lock()
		c.n[key]++
		c.mu.Unlock()
	}
}

// take returns the count of requests with key and resets all counts.
func (c *requestCounter) take(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n[int16(key)]
	c.n = map[int16]int{}
	return n
}

func (c *requestCounter) reset() { c.take(0) }

// total returns the count of all requests.
func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.n {
		n += k
	}
	return n
}

// countingSyncer is patternSyncer with a target client whose requests are
// counted. Both its clients keep metadata for 100 ms only (kadm answers
// from metadata cached for MetadataMinAge, 5 s by default), so that a
// Sync right after another sees what changed.
func countingSyncer(t *testing.T, a, b *testkafka.Cluster, pattern string) (*Syncer, *requestCounter, *bytes.Buffer) {
	t.Helper()
	rc := &requestCounter{n: map[int16]int{}}
	fresh := kgo.MetadataMinAge(100 * time.Millisecond)
	s, log := patternSyncer(t, a, b, pattern, b.Client(t, kgo.WithHooks(rc), fresh))
	s.Source = kadm.NewClient(a.Client(t, fresh))
	return s, rc, log
}

// deleteAtEnd deletes topics of adm when the test ends.
func deleteAtEnd(t testing.TB, adm *kadm.Client, topics []string) {
	t.Cleanup(func() { deleteNow(t, adm, topics) })
}

// deleteNow deletes topics of adm, many to a request.
func deleteNow(t testing.TB, adm *kadm.Client, topics []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for c := range slices.Chunk(topics, 200) {
		if _, err := adm.DeleteTopics(ctx, c...); err != nil {
			t.Logf("deleting test topics: %v", err)
		}
	}
}

// waitListed waits until adm lists every topic of names with the partition
// count partitions(i) of its index.
func waitListed(t *testing.T, ctx context.Context, adm *kadm.Client, names []string, partitions func(int) int32) {
	t.Helper()
	listed := func() error {
		td, err := adm.ListTopics(ctx, names...)
		if err != nil {
			return err
		}
		for i, n := range names {
			if d, ok := td[n]; !ok || d.Err != nil || int32(len(d.Partitions)) != partitions(i) {
				return fmt.Errorf("topic %s: listed %v, err %v, %d partitions, want %d", n, ok, d.Err, len(d.Partitions), partitions(i))
			}
		}
		return nil
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := listed()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics not listed as wanted after 90 s: %v", err)
		}
	}
}

// TestSyncManyTopicsBroker syncs 300 topics on real brokers and counts the
// target's requests: creating, growing and re-configuring many topics
// takes one request per batch, not one per topic.
func TestSyncManyTopicsBroker(t *testing.T) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	src, tgt := a.Admin(t), b.Admin(t)

	const n = 300
	base := testkafka.Topic(t, "many")
	names, remotes := make([]string, n), make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", base, i)
		remotes[i] = "A." + names[i]
	}
	deleteAtEnd(t, src, names)
	deleteAtEnd(t, tgt, remotes)
	// Mostly one partition: a loaded single-node broker takes a while
	// to create the logs of hundreds of partitions.
	partitions := func(i int) int32 { return 1 + int32(i%7)/5 } // 1 or 2
	retained := func(i int) bool { return i%10 == 0 }           // retention.ms=3600000
	type shape struct {
		partitions int32
		retained   bool
	}
	shapes := map[shape][]string{}
	for i, name := range names {
		k := shape{partitions(i), retained(i)}
		shapes[k] = append(shapes[k], name)
	}
	for k, ns := range shapes {
		var configs map[string]*string
		if k.retained {
			configs = map[string]*string{"retention.ms": kadm.StringPtr("3600000")}
		}
		rs, err := src.CreateTopics(ctx, k.partitions, 1, configs, ns...)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			t.Fatalf("creating source topics: %v", err)
		}
	}
	waitListed(t, ctx, src, names, partitions)

	s, rc, log := countingSyncer(t, a, b, regexp.QuoteMeta(base)+`-\d{3}`)
	ts, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each topic weighs at most 4 records: batches are by count.
	want := (n + batchTopics - 1) / batchTopics
	if got := rc.take(kmsg.CreateTopics); got != want {
		t.Errorf("Sync sent %d CreateTopics requests for %d topics, want %d", got, n, want)
	}
	if c := strings.Count(log.String(), "created remote topic"); len(ts) != n || c != n {
		t.Fatalf("Sync returned %d topics and created %d, want %d each\n%s", len(ts), c, n, log)
	}
	// Ready means hosted: every partition of a Ready topic answers
	// ListOffsets; the rest are Ready after a later Sync. The check's
	// client keeps metadata as briefly as the Syncer's: a topic it had
	// cached as unknown would look unhosted.
	check := kadm.NewClient(b.Client(t, kgo.MetadataMinAge(100*time.Millisecond)))
	for ready := 0; ready < n; {
		offs, err := check.ListEndOffsets(ctx, remotes...)
		if err != nil {
			t.Fatal(err)
		}
		ready = 0
		for i, tp := range ts {
			switch {
			case tp.Ready && hostedFrom(offs, tp.Remote, 0, partitions(i)) != partitions(i):
				t.Fatalf("%s is Ready but not every partition is hosted: %v", tp.Remote, offs[tp.Remote])
			case tp.Ready:
				ready++
			}
		}
		if ready == n {
			break
		}
		if !s.Pending() {
			t.Fatalf("%d of %d topics Ready and none pending\n%s", ready, n, log)
		}
		time.Sleep(500 * time.Millisecond)
		if ts, err = s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s.Pending() {
		t.Errorf("every topic Ready, yet Pending")
	}
	waitListed(t, ctx, tgt, remotes, partitions)
	rcs, err := tgt.DescribeTopicConfigs(ctx, remotes...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range remotes {
		rc, err := rcs.On(r, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			t.Fatalf("describing %s: %v", r, err)
		}
		var got string
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				got = c.MaybeValue()
			}
		}
		if w := map[bool]string{true: "3600000"}[retained(i)]; got != w {
			t.Errorf("%s: retention.ms override %q, want %q", r, got, w)
		}
	}

	t.Run("partitions", func(t *testing.T) {
		// Five one-partition topics grow to four: one CreatePartitions.
		grown := []string{names[0], names[1], names[2], names[3], names[4]}
		rs, err := src.UpdatePartitions(ctx, 4, grown...)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		after := func(i int) int32 {
			if i < 5 {
				return 4
			}
			return partitions(i)
		}
		waitListed(t, ctx, src, names, after)
		log.Reset()
		rc.reset()
		if _, err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rc.take(kmsg.CreatePartitions); got != 1 {
			t.Errorf("Sync sent %d CreatePartitions requests for %d topics, want 1", got, len(grown))
		}
		if c := strings.Count(log.String(), "added partitions to remote topic"); c != len(grown) {
			t.Errorf("%d topics grown, want %d:\n%s", c, len(grown), log)
		}
		waitListed(t, ctx, tgt, remotes, after)
	})

	t.Run("configs", func(t *testing.T) {
		// Twenty topics get a new retention on the source; each config
		// sync sends at most one IncrementalAlterConfigs.
		changed := names[100:120]
		rs, err := src.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")}}, changed...)
		for _, r := range rs {
			if err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		log.Reset()
		// Altered configs reach the brokers' metadata a moment later.
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			rc.reset()
			if err := s.SyncConfigs(ctx); err != nil {
				t.Fatal(err)
			}
			if got := rc.take(kmsg.IncrementalAlterConfigs); got > 1 {
				t.Fatalf("SyncConfigs sent %d IncrementalAlterConfigs requests, want at most 1", got)
			}
			done := strings.Count(log.String(), "synced remote topic configs")
			if done == len(changed) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d remote topics synced, want %d:\n%s", done, len(changed), log)
			}
		}
		// The target applies an altered config a moment after it
		// answered the alter (a loaded run described the old value).
		for _, name := range changed {
			testwait.For(t, 15*time.Second, "A."+name+" retention.ms = 7200000 on the target", func() bool {
				return topicOverrides(t, ctx, tgt, "A."+name)["retention.ms"] == "7200000"
			})
		}
	})
}

// TestCreateBatchRefusedConfigBroker creates 60 remote topics in batches of
// 25 where the target refuses one config of one topic: only that topic is
// created again, alone and without the refused config, and the warning
// names it and the key.
func TestCreateBatchRefusedConfigBroker(t *testing.T) {
	setBatch(t, 25, batchRecords)
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	ctx := testCtx(t)
	base := testkafka.Topic(t, "refusedbatch")
	s, rc, log := countingSyncer(t, a, b, regexp.QuoteMeta(base)+`-\d+`)
	const n, bad = 60, 30
	ts := make([]*Topic, n)
	remotes := make([]string, n)
	configs := map[string]map[string]*string{}
	for i := range ts {
		name := fmt.Sprintf("%s-%02d", base, i)
		ts[i] = &Topic{Name: name, Remote: "A." + name, Partitions: 1}
		remotes[i] = ts[i].Remote
		configs[name] = map[string]*string{"retention.ms": kadm.StringPtr("3600000")}
	}
	deleteAtEnd(t, b.Admin(t), remotes)
	configs[ts[bad].Name] = map[string]*string{"retention.ms": kadm.StringPtr("1000"), "cleanup.policy": kadm.StringPtr("nonsense")}

	made, err := s.createAll(ctx, ts, configs)
	if err != nil {
		t.Fatal(err)
	}
	// Three batches; then for the refused topic one validation per key
	// and one creation.
	if got, want := rc.take(kmsg.CreateTopics), 3+2+1; got != want {
		t.Errorf("sent %d CreateTopics requests, want %d\n%s", got, want, log)
	}
	if len(made) != n {
		t.Errorf("created %d topics, want %d", len(made), n)
	}
	waitListed(t, ctx, s.Target, remotes, func(int) int32 { return 1 })
	if got := topicOverrides(t, ctx, s.Target, ts[bad].Remote); !maps.Equal(got, map[string]string{"retention.ms": "1000"}) {
		t.Errorf("refused topic's configs %v, want only retention.ms=1000", got)
	}
	if got := topicOverrides(t, ctx, s.Target, ts[bad+1].Remote); !maps.Equal(got, map[string]string{"retention.ms": "3600000"}) {
		t.Errorf("neighbour topic's configs %v, want retention.ms=3600000", got)
	}
	l := log.String()
	warn := "the target refuses this topic config; dropped\" topic=" + ts[bad].Name + " key=cleanup.policy"
	if strings.Count(l, "refuses this topic config") != 1 || !strings.Contains(l, warn) {
		t.Errorf("want one warning %q, log:\n%s", warn, l)
	}
}

// BenchmarkCreateTopics creates 1,000 remote topics of 5 partitions (the
// shape of kbench scale) on a real broker, one topic per request as before
// batching and in batches; s-to-host/op is the wait after that until the
// broker hosts every partition:
//
//	go test -run - -bench CreateTopics -benchtime 1x ./internal/topicsync/
func BenchmarkCreateTopics(b *testing.B) {
	cs := testkafka.Shared(b, 2)
	for _, bm := range []struct {
		name   string
		topics int
	}{
		{"one-per-request", 1},
		{"batched", batchTopics},
	} {
		b.Run(bm.name, func(b *testing.B) {
			setBatch(b, bm.topics, batchRecords)
			adm := cs[1].Admin(b)
			var hosting time.Duration // from created to hosted, not in ns/op
			defer func() { b.ReportMetric(hosting.Seconds()/float64(b.N), "s-to-host/op") }()
			for range b.N {
				b.StopTimer()
				base := testkafka.Topic(b, "bench")
				s, _ := patternSyncer(b, cs[0], cs[1], regexp.QuoteMeta(base)+`-\d+`, cs[1].Client(b))
				ts := make([]*Topic, 1000)
				remotes := make([]string, len(ts))
				for i := range ts {
					name := fmt.Sprintf("%s-%04d", base, i)
					ts[i] = &Topic{Name: name, Remote: "A." + name, Partitions: 5}
					remotes[i] = ts[i].Remote
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				b.StartTimer()
				made, err := s.createAll(ctx, ts, nil)
				b.StopTimer()
				if err != nil || len(made) != len(ts) {
					b.Fatalf("created %d of %d topics, err %v", len(made), len(ts), err)
				}
				start := time.Now()
				for {
					offs, err := adm.ListEndOffsets(ctx, remotes...)
					if err == nil && !slices.ContainsFunc(remotes, func(r string) bool { return hostedFrom(offs, r, 0, 5) != 5 }) {
						break
					}
					if ctx.Err() != nil {
						b.Fatal(ctx.Err())
					}
					time.Sleep(100 * time.Millisecond)
				}
				hosting += time.Since(start)
				cancel()
				deleteNow(b, adm, remotes)
			}
		})
	}
}

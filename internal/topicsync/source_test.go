package topicsync

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestSameListing(t *testing.T) {
	topic := func(name string, id byte, parts int, code int16, internal bool) kmsg.MetadataResponseTopic {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode, t.IsInternal = kmsg.StringPtr(name), [16]byte{id}, code, internal
		t.Partitions = make([]kmsg.MetadataResponseTopicPartition, parts)
		return t
	}
	listed := map[string]srcTopic{"a": {id: [16]byte{1}, parts: 2}, "b": {id: [16]byte{2}, parts: 1}, "c": {id: [16]byte{3}, parts: -1}}
	for _, tt := range []struct {
		name   string
		topics []kmsg.MetadataResponseTopic
		same   bool
	}{
		{"same", []kmsg.MetadataResponseTopic{topic("b", 2, 1, 0, false), topic("a", 1, 2, 0, false), topic("c", 3, 0, 5, false)}, true},
		{"internal topics left out", []kmsg.MetadataResponseTopic{topic("a", 1, 2, 0, false), topic("b", 2, 1, 0, false), topic("c", 3, 0, 5, false), topic("__consumer_offsets", 9, 50, 0, true)}, true},
		{"partitions added", []kmsg.MetadataResponseTopic{topic("a", 1, 3, 0, false), topic("b", 2, 1, 0, false), topic("c", 3, 0, 5, false)}, false},
		{"topic added", []kmsg.MetadataResponseTopic{topic("a", 1, 2, 0, false), topic("b", 2, 1, 0, false), topic("c", 3, 0, 5, false), topic("d", 4, 1, 0, false)}, false},
		{"topic gone", []kmsg.MetadataResponseTopic{topic("a", 1, 2, 0, false), topic("c", 3, 0, 5, false)}, false},
		{"topic re-created", []kmsg.MetadataResponseTopic{topic("a", 7, 2, 0, false), topic("b", 2, 1, 0, false), topic("c", 3, 0, 5, false)}, false},
		{"error cleared", []kmsg.MetadataResponseTopic{topic("a", 1, 2, 0, false), topic("b", 2, 1, 0, false), topic("c", 3, 1, 0, false)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := kmsg.NewPtrMetadataResponse()
			resp.Topics = tt.topics
			if got := sameListing(resp, listed); got != tt.same {
				t.Errorf("same %v, want %v", got, tt.same)
			}
		})
	}
}

// TestSyncUnchangedBroker: while the source lists the same topics, Sync
// asks the target one metadata request and returns what it did; a new
// topic, added partitions and, at the next Sync, a remote topic deleted on
// the target are still found, as is one Recheck asks for.
func TestSyncUnchangedBroker(t *testing.T) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	ctx := testCtx(t)
	base := testkafka.Topic(t, "unchanged")
	first, second := base+"-1", base+"-2"
	src, tgt := a.Admin(t), b.Admin(t)
	deleteAtEnd(t, src, []string{first, second})
	deleteAtEnd(t, tgt, []string{"A." + first, "A." + second})
	a.CreateTopic(t, first, 1, nil)
	s, rc, log := countingSyncer(t, a, b, regexp.QuoteMeta(base)+`-\d`)
	s.SourceClient = a.Client(t, kgo.MetadataMinAge(100*time.Millisecond))

	// sync returns the Ready topics of one Sync as name/partitions, and
	// whether every topic is Ready.
	sync := func() ([]string, bool) {
		t.Helper()
		ts, err := s.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tp := range ts {
			if tp.Ready {
				got = append(got, fmt.Sprintf("%s/%d", tp.Name, tp.Partitions))
			}
		}
		return got, len(got) == len(ts)
	}
	// settle syncs until every topic is Ready and returns their names
	// and partition counts.
	settle := func() []string {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got, all := sync()
			if all && !s.Pending() {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("topics not Ready after 90 s: %v\n%s", got, log)
			}
		}
	}
	unchanged := func(want []string) {
		t.Helper()
		rc.reset()
		for range 3 {
			if got, _ := sync(); !slices.Equal(got, want) {
				t.Errorf("unchanged Sync returned %v, want %v Ready", got, want)
			}
		}
		if n, meta := rc.total(), rc.take(kmsg.Metadata); n != 3 || meta != 3 {
			t.Errorf("3 Syncs with nothing changed sent %d requests to the target (%d metadata), want 3 metadata requests", n, meta)
		}
	}

	want := []string{first + "/1"}
	if got := settle(); !slices.Equal(got, want) {
		t.Fatalf("Ready %v, want %v", got, want)
	}
	unchanged(want)

	a.CreateTopic(t, second, 2, nil)
	want = []string{first + "/1", second + "/2"}
	if got := settle(); !slices.Equal(got, want) {
		t.Fatalf("after a new source topic: Ready %v, want %v", got, want)
	}
	unchanged(want)

	if _, err := src.UpdatePartitions(ctx, 3, first); err != nil {
		t.Fatal(err)
	}
	waitListed(t, ctx, src, []string{first}, func(int) int32 { return 3 })
	want = []string{first + "/3", second + "/2"}
	if got := settle(); !slices.Equal(got, want) {
		t.Fatalf("after partitions were added on the source: Ready %v, want %v", got, want)
	}
	waitListed(t, ctx, tgt, []string{"A." + first}, func(int) int32 { return 3 })
	unchanged(want)

	// A remote topic deleted on the target: found at the next Sync, and
	// reported as re-created.
	var recreated []string
	s.Recreated = func(rs []string) { recreated = append(recreated, rs...) }
	if _, err := tgt.DeleteTopics(ctx, "A."+second); err != nil {
		t.Fatal(err)
	}
	until(t, func() bool {
		td, err := tgt.ListTopics(ctx, "A."+second)
		return err == nil && !td.Has("A."+second)
	}, "A.%s still listed on the target after its deletion", second)
	log.Reset()
	settle()
	if !strings.Contains(log.String(), "created remote topic") || !strings.Contains(log.String(), "A."+second) {
		t.Errorf("the deleted remote topic was not created again at the next Sync:\n%s", log)
	}
	if !slices.Equal(recreated, []string{"A." + second}) {
		t.Errorf("Recreated called with %v, want [A.%s]", recreated, second)
	}
	waitListed(t, ctx, tgt, []string{"A." + second}, func(int) int32 { return 2 })
	unchanged(want)
}

// TestSameRemotes: the target check of an unchanged Sync passes only while
// every remote topic is listed without an error, with its ID and at least
// its source's partitions; Recheck fails it without asking.
func TestSameRemotes(t *testing.T) {
	topic := func(name string, id byte, parts int, code int16) kmsg.MetadataResponseTopic {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = kmsg.StringPtr(name), [16]byte{id}, code
		t.Partitions = make([]kmsg.MetadataResponseTopicPartition, parts)
		return t
	}
	ts := []Topic{{Name: "a", Remote: "A.a", Partitions: 2}, {Name: "b", Remote: "A.b", Partitions: 1}}
	ids := map[string]remote{"A.a": {id: [16]byte{1}, parts: 2}, "A.b": {id: [16]byte{2}, parts: 1}}
	for _, tt := range []struct {
		name   string
		topics []kmsg.MetadataResponseTopic
		same   bool
	}{
		{"same", []kmsg.MetadataResponseTopic{topic("A.b", 2, 1, 0), topic("A.a", 1, 2, 0)}, true},
		{"more partitions than the source", []kmsg.MetadataResponseTopic{topic("A.b", 2, 1, 0), topic("A.a", 1, 3, 0)}, true},
		{"deleted", []kmsg.MetadataResponseTopic{topic("A.a", 1, 2, 0), topic("A.b", 0, 0, 3)}, false},
		{"left out", []kmsg.MetadataResponseTopic{topic("A.a", 1, 2, 0)}, false},
		{"re-created", []kmsg.MetadataResponseTopic{topic("A.a", 7, 2, 0), topic("A.b", 2, 1, 0)}, false},
		{"shrunk", []kmsg.MetadataResponseTopic{topic("A.a", 1, 1, 0), topic("A.b", 2, 1, 0)}, false},
		{"error", []kmsg.MetadataResponseTopic{topic("A.a", 1, 2, 5), topic("A.b", 2, 1, 0)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := kmsg.NewPtrMetadataResponse()
			resp.Topics = tt.topics
			if got := sameRemotes(resp, ts, ids); got != tt.same {
				t.Errorf("same %v, want %v", got, tt.same)
			}
		})
	}
	s := &Syncer{}
	s.last = &settled{topics: ts, remotes: ids}
	s.Recheck()
	if s.targetUnchanged(context.Background()) {
		t.Error("targetUnchanged after Recheck: true, want false")
	}
}

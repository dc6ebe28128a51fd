package topicsync

import (
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
// asks the target nothing (until TargetCheckInterval is up) and returns
// what it did; a new topic, added partitions and, at the target check, a
// remote topic deleted on the target are still found.
func TestSyncUnchangedBroker(t *testing.T) {
	old := TargetCheckInterval
	TargetCheckInterval = time.Hour
	t.Cleanup(func() { TargetCheckInterval = old })
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
		if n := rc.total(); n != 0 {
			t.Errorf("Syncs with nothing changed sent %d requests to the target, want 0", n)
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

	// A remote topic deleted on the target: found at the next target check.
	if _, err := tgt.DeleteTopics(ctx, "A."+second); err != nil {
		t.Fatal(err)
	}
	until(t, func() bool {
		td, err := tgt.ListTopics(ctx, "A."+second)
		return err == nil && !td.Has("A."+second)
	}, "A.%s still listed on the target after its deletion", second)
	unchanged(want)
	log.Reset()
	TargetCheckInterval = 0
	settle()
	if !strings.Contains(log.String(), "created remote topic") || !strings.Contains(log.String(), "A."+second) {
		t.Errorf("the deleted remote topic was not created again at the target check:\n%s", log)
	}
	waitListed(t, ctx, tgt, []string{"A." + second}, func(int) int32 { return 2 })
}

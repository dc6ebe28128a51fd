package topicsync

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clients"
)

// TargetCheckInterval is how often Sync asks the target about the remote
// topics while nothing changed on the source since the last Sync and that
// Sync left every topic Ready. The target check finds a remote topic
// deleted, or re-created with fewer partitions, on the target behind the
// flow's back; it is made again at once whenever the source changes.
var TargetCheckInterval = time.Minute

// srcTopic is what a Sync compares of a source topic with the last one.
type srcTopic struct {
	id    [16]byte
	parts int32 // -1: listed with an error
}

// settled is what Sync keeps of its last run that left every topic Ready.
type settled struct {
	listed  map[string]srcTopic // every topic the source listed
	topics  []Topic             // what Sync returned
	checked time.Time           // when it asked the target
}

// sourceTopics lists the source's topics and returns those the flow
// replicates, sorted by name, and the whole listing, to compare with the
// next one. With SourceClient, one metadata request straight to a broker;
// when the listing is the same as at the last settled Sync (same names,
// IDs and partition counts), it returns no topics and same.
func (s *Syncer) sourceTopics(ctx context.Context) (want []Topic, listed map[string]srcTopic, same bool, err error) {
	if s.SourceClient == nil {
		src, err := s.Source.ListTopics(ctx)
		if err != nil {
			return nil, nil, false, fmt.Errorf("listing topics of source cluster %s: %w", s.SourceAlias, err)
		}
		for _, d := range src.Sorted() {
			if d.Err == nil && len(d.Partitions) > 0 {
				want = s.appendWanted(want, d.Topic, d.ID, len(d.Partitions))
			}
		}
		return want, nil, false, nil
	}
	resp, err := clients.Metadata(ctx, s.SourceClient, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, nil, false, fmt.Errorf("listing topics of source cluster %s: %w", s.SourceAlias, err)
	}
	if s.last != nil && sameListing(resp, s.last.listed) {
		return nil, nil, true, nil
	}
	listed = make(map[string]srcTopic, len(resp.Topics))
	for i := range resp.Topics {
		name, st, ok := entry(&resp.Topics[i])
		if !ok {
			continue
		}
		listed[name] = st
		if st.parts > 0 {
			want = s.appendWanted(want, name, kadm.TopicID(st.id), int(st.parts))
		}
	}
	slices.SortFunc(want, func(a, b Topic) int { return cmp.Compare(a.Name, b.Name) })
	return want, listed, false, nil
}

// appendWanted appends the source topic to want if the flow replicates it.
func (s *Syncer) appendWanted(want []Topic, name string, id kadm.TopicID, parts int) []Topic {
	if !s.ShouldReplicate(name) {
		return want
	}
	t := Topic{Name: name, Remote: s.Policy.FormatRemoteTopic(s.SourceAlias, name), Partitions: int32(parts)}
	if id != (kadm.TopicID{}) {
		t.ID = hex.EncodeToString(id[:])
	}
	return append(want, t)
}

// entry is what a listing keeps of topic t; not ok for a topic it leaves
// out (internal, or without a name), as kadm's ListTopics does.
func entry(t *kmsg.MetadataResponseTopic) (name string, st srcTopic, ok bool) {
	if t.Topic == nil || t.IsInternal {
		return "", st, false
	}
	st = srcTopic{id: t.TopicID, parts: int32(len(t.Partitions))}
	if t.ErrorCode != 0 {
		st.parts = -1
	}
	return *t.Topic, st, true
}

// sameListing reports whether resp lists exactly the topics of listed.
func sameListing(resp *kmsg.MetadataResponse, listed map[string]srcTopic) bool {
	n := 0
	for i := range resp.Topics {
		name, st, ok := entry(&resp.Topics[i])
		if !ok {
			continue
		}
		if l, in := listed[name]; !in || l != st {
			return false
		}
		n++
	}
	return n == len(listed)
}

// settle keeps the result of a Sync that left every topic Ready, with the
// listing it came from, for the next Syncs to compare with; any other
// result is forgotten, so that the next Sync does everything again.
func (s *Syncer) settle(listed map[string]srcTopic, ts []Topic, checked time.Time) {
	if listed == nil || slices.ContainsFunc(ts, func(t Topic) bool { return !t.Ready }) || s.Pending() {
		return
	}
	s.last = &settled{listed: listed, topics: slices.Clone(ts), checked: checked}
}

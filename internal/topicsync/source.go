package topicsync

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clients"
)

// srcTopic is what a Sync compares of a source topic with the last one.
type srcTopic struct {
	id    [16]byte
	parts int32 // -1: listed with an error
}

// settled is what Sync keeps of its last run that left every topic Ready.
type settled struct {
	listed  map[string]srcTopic // every topic the source listed
	topics  []Topic             // what Sync returned
	remotes map[string]remote   // the remote topics it found on the target
}

// remote is what the target check compares of a remote topic.
type remote struct {
	id    [16]byte
	parts int32
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
func (s *Syncer) settle(listed map[string]srcTopic, ts []Topic, remotes map[string]remote) {
	if listed == nil || slices.ContainsFunc(ts, func(t Topic) bool { return !t.Ready }) || s.Pending() {
		return
	}
	s.last = &settled{listed: listed, topics: slices.Clone(ts), remotes: remotes}
}

// targetUnchanged is the target check of a Sync while the source is
// unchanged: one metadata request for the remote topics of the last Sync,
// straight to a broker. It reports whether every one of them is still
// there with the same topic ID and at least its source's partitions; if
// not (deleted, re-created, shrunk, an error, or Recheck was called),
// Sync does everything again.
func (s *Syncer) targetUnchanged(ctx context.Context) bool {
	if s.recheck.Swap(false) {
		return false
	}
	last := s.last
	if len(last.topics) == 0 {
		return true
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range last.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t.Remote)
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.MetadataResponse
	var err error
	if cl, ok := s.TargetClient.(*kgo.Client); ok {
		resp, err = clients.Metadata(ctx, cl, req)
	} else {
		resp, err = req.RequestWith(ctx, s.TargetClient)
	}
	if err != nil {
		return false
	}
	return sameRemotes(resp, last.topics, last.remotes)
}

// sameRemotes reports whether resp lists every remote topic of ts without
// an error, with the ID in ids and at least the source's partitions.
func sameRemotes(resp *kmsg.MetadataResponse, ts []Topic, ids map[string]remote) bool {
	got := make(map[string]*kmsg.MetadataResponseTopic, len(resp.Topics))
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.Topic != nil {
			got[*t.Topic] = t
		}
	}
	for _, t := range ts {
		r, ok := got[t.Remote]
		if !ok || r.ErrorCode != 0 || int32(len(r.Partitions)) < t.Partitions {
			return false
		}
		if want, ok := ids[t.Remote]; ok && r.TopicID != want.id {
			return false
		}
	}
	return true
}

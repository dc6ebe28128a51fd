// Package slots splits a flow's source partitions into a fixed number of
// slots for exactly-once with several workers: each slot has its own
// transactional ID on the target, and a consumer group balancer gives all
// partitions of a slot to one worker. A worker that takes a slot over
// initialises that slot's transactional producer, which fences the slot's
// previous owner (Kafka bumps the producer epoch and aborts its open
// transaction), before it reads the slot's progress.
package slots

import (
	"hash/fnv"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Of returns the slot of a topic partition among n slots: a topic's
// partitions go round robin over the slots, from a start that depends on
// the topic's name.
func Of(topic string, partition int32, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((uint64(h.Sum32()) + uint64(partition)) % uint64(n))
}

// TransactionalID is the transactional ID of slot n of a flow whose
// single-worker transactional ID is base.
func TransactionalID(base string, n int) string {
	return base + "-slot-" + strconv.Itoa(n)
}

// Balancer returns an eager group balancer that gives every partition of a
// slot to one member, spreading the slots evenly over the members. Every
// member of the group must use it with the same n.
func Balancer(n int) kgo.GroupBalancer { return &balancer{n: max(n, 1)} }

type balancer struct{ n int }

// ProtocolName names the protocol with n: members configured with
// different slot counts cannot agree on a protocol, and the group refuses
// the newcomer instead of mixing two slot maps.
func (b *balancer) ProtocolName() string { return "kmirror-slots-" + strconv.Itoa(b.n) }
func (*balancer) IsCooperative() bool    { return false }

func (*balancer) JoinGroupMetadata(interests []string, _ map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	return meta.AppendTo(nil)
}

func (*balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (b *balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance gives slot s to the (s mod members)-th member, members sorted by
// ID. A partition whose topic its slot's member does not follow yet (its
// subscription is catching up) stays unassigned until the next rebalance:
// a slot is never split.
func (b *balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	plan := cb.NewPlan()
	type member struct {
		m      *kmsg.JoinGroupResponseMember
		topics map[string]bool
	}
	var ms []member
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		ts := make(map[string]bool, len(meta.Topics))
		for _, t := range meta.Topics {
			ts[t] = true
		}
		ms = append(ms, member{m, ts})
	})
	if len(ms) == 0 {
		return plan
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].m.MemberID < ms[j].m.MemberID })
	for topic := range cb.MemberTopics() {
		for p := int32(0); p < topics[topic]; p++ {
			m := ms[Of(topic, p, b.n)%len(ms)]
			if m.topics[topic] {
				plan.AddPartition(m.m, topic, p)
			}
		}
	}
	return plan
}

package slots

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func members(t *testing.T, topics []string, ids ...string) []kmsg.JoinGroupResponseMember {
	t.Helper()
	var ms []kmsg.JoinGroupResponseMember
	for _, id := range ids {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = new(balancer).JoinGroupMetadata(topics, nil, 1)
		ms = append(ms, m)
	}
	return ms
}

// TestBalance checks that every partition is assigned once, that all
// partitions of a slot go to one member, and that slots spread evenly.
func TestBalance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		slots   int
		members []string
		topics  map[string]int32
	}{
		{"one member", 4, []string{"a"}, map[string]int32{"t": 6}},
		{"three members, six slots", 6, []string{"c", "a", "b"}, map[string]int32{"t": 6, "u": 3}},
		{"more members than slots", 2, []string{"a", "b", "c"}, map[string]int32{"t": 8}},
		{"one slot", 1, []string{"a", "b"}, map[string]int32{"t": 5, "u": 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for n := range tc.topics {
				names = append(names, n)
			}
			b := Balancer(tc.slots)
			mb, _, err := b.MemberBalancer(members(t, names, tc.members...))
			if err != nil {
				t.Fatal(err)
			}
			into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(tc.topics)
			if err != nil {
				t.Fatal(err)
			}
			owner := map[int]string{} // slot -> member
			perMember := map[string]int{}
			assigned := 0
			for _, a := range into.IntoSyncAssignment() {
				got, err := b.ParseSyncAssignment(a.MemberAssignment)
				if err != nil {
					t.Fatal(err)
				}
				for topic, ps := range got {
					for _, p := range ps {
						assigned++
						s := Of(topic, p, tc.slots)
						if o, ok := owner[s]; ok && o != a.MemberID {
							t.Errorf("slot %d split between %s and %s", s, o, a.MemberID)
						}
						if _, ok := owner[s]; !ok {
							perMember[a.MemberID]++
						}
						owner[s] = a.MemberID
					}
				}
			}
			want := 0
			for _, n := range tc.topics {
				want += int(n)
			}
			if assigned != want {
				t.Errorf("%d partitions assigned, want %d", assigned, want)
			}
			lo, hi := len(owner), 0
			for _, m := range tc.members {
				lo, hi = min(lo, perMember[m]), max(hi, perMember[m])
			}
			if hi-lo > 1 {
				t.Errorf("slots per member from %d to %d: %v", lo, hi, perMember)
			}
		})
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want int // distinct slots used by partitions 0..7 of one topic
	}{{1, 1}, {4, 4}, {8, 8}, {16, 8}} {
		seen := map[int]bool{}
		for p := int32(0); p < 8; p++ {
			s := Of("orders", p, tc.n)
			if s < 0 || s >= max(tc.n, 1) {
				t.Fatalf("Of(orders, %d, %d) = %d, out of range", p, tc.n, s)
			}
			seen[s] = true
		}
		if len(seen) != tc.want {
			t.Errorf("n=%d: partitions 0-7 use %d slots, want %d", tc.n, len(seen), tc.want)
		}
	}
	if got := TransactionalID("kmirror-A->B", 3); got != "kmirror-A->B-slot-3" {
		t.Errorf("TransactionalID = %q", got)
	}
}

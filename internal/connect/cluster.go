package connect

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clients"
)

// The workers of a kmirror Connect cluster meet in a Kafka group named by
// the worker file's group.id, as Connect's workers do, but with a protocol
// of their own: a Java Connect worker joining the same group is refused
// (INCONSISTENT_GROUP_PROTOCOL) instead of sharing the config topic.
const (
	groupProtocolType = "kmirror-connect"
	groupProtocolName = "kmirror-v1"
)

// Member is a worker of the cluster: its worker ID (the host:port of
// rest.advertised.*) and the URL of its REST API.
type Member struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// View is the cluster as the group's last assignment says. Every worker
// of a generation gets the same Workers, sorted by worker ID: task i of
// every connector is worker i's share of that connector's flow, and
// Leader is the worker that takes connector creates and updates.
type View struct {
	Generation int32
	Leader     Member
	Workers    []Member
	Self       int // this worker's index in Workers
}

// Joined reports whether the worker has an assignment yet.
func (v View) Joined() bool { return len(v.Workers) > 0 && v.Self >= 0 }

// ConnectorOwner is the index of the worker that writes connector name's
// status and runs its connector-only restarts: the leader, which takes
// every create, so a connector's status is written before its create
// answers.
func (v View) ConnectorOwner(string) int {
	for i, w := range v.Workers {
		if w == v.Leader {
			return i
		}
	}
	return 0
}

// assignment is what the leader gives every member.
type assignment struct {
	Leader  Member   `json:"leader"`
	Workers []Member `json:"workers"`
	Index   int      `json:"index"`
}

// plan computes the assignment of every member (by member ID) from their
// join metadata; leader is the worker computing it.
func plan(leader Member, members []kmsg.JoinGroupResponseMember) (map[string][]byte, error) {
	type m struct {
		id string
		w  Member
	}
	all := make([]m, 0, len(members))
	for _, jm := range members {
		var w Member
		if err := json.Unmarshal(jm.ProtocolMetadata, &w); err != nil || w.ID == "" {
			return nil, fmt.Errorf("member %s of the connect workers' group has metadata kmirror does not read", jm.MemberID)
		}
		all = append(all, m{jm.MemberID, w})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].w.ID != all[j].w.ID {
			return all[i].w.ID < all[j].w.ID
		}
		return all[i].id < all[j].id
	})
	workers := make([]Member, len(all))
	for i, a := range all {
		workers[i] = a.w
	}
	out := make(map[string][]byte, len(all))
	for i, a := range all {
		b, err := json.Marshal(assignment{Leader: leader, Workers: workers, Index: i})
		if err != nil {
			return nil, err
		}
		out[a.id] = b
	}
	return out, nil
}

// Cluster is this worker's membership in the workers' group.
type Cluster struct {
	self Member
	// cl is set once kgo.NewClient returned; ready is closed then. The
	// group may assign before that (kgo joins in the background).
	cl      *kgo.Client
	ready   chan struct{}
	log     *slog.Logger
	changed func()

	mu   sync.Mutex
	view View
}

// JoinCluster joins the workers' group on the worker's cluster; changed
// is called after every new assignment.
func JoinCluster(w *Worker, url string, changed func(), log *slog.Logger) (*Cluster, error) {
	c := &Cluster{self: Member{ID: w.WorkerID, URL: url}, ready: make(chan struct{}), log: log, changed: changed, view: View{Self: -1}}
	opts, err := clients.Build(clients.ID("connect", "group"), clients.Consumer, w.Client)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.Path, err)
	}
	opts = append(opts,
		kgo.ConsumerGroup(w.GroupID),
		kgo.GroupProtocol(groupProtocolType),
		kgo.Balancers(balancer{c}),
		// The config topic is the subscription the group needs; the
		// assignment gives no partitions, so nothing is fetched.
		kgo.ConsumeTopics(w.ConfigTopic),
		kgo.DisableAutoCommit(),
		// Connect's defaults: a dead worker's share moves within 10 s.
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(3*time.Second),
		kgo.RebalanceTimeout(30*time.Second),
	)
	if c.cl, err = kgo.NewClient(opts...); err != nil {
		return nil, fmt.Errorf("%s: %w", w.Path, err)
	}
	close(c.ready)
	return c, nil
}

// Close leaves the group, so the other workers take this one's share at
// once.
func (c *Cluster) Close() { c.cl.Close() }

// View returns the last assignment.
func (c *Cluster) View() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.view
	v.Workers = append([]Member(nil), v.Workers...)
	return v
}

// assigned notes a new assignment. It runs in kgo's group goroutine,
// which can start before kgo.NewClient has returned the client: it waits
// for it (a loaded run found it nil).
func (c *Cluster) assigned(a assignment) {
	<-c.ready
	_, gen := c.cl.GroupMetadata()
	c.mu.Lock()
	c.view = View{Generation: gen, Leader: a.Leader, Workers: a.Workers, Self: a.Index}
	c.mu.Unlock()
	c.log.Info("connect workers' group assigned", "generation", gen, "workers", len(a.Workers), "task", a.Index, "leader", a.Leader.ID)
	if c.changed != nil {
		c.changed()
	}
}

// balancer is the group protocol: members send their Member, the leader
// sends every member the sorted list and its index in it.
type balancer struct{ c *Cluster }

func (balancer) ProtocolName() string { return groupProtocolName }
func (balancer) IsCooperative() bool  { return false }

func (b balancer) JoinGroupMetadata([]string, map[string][]int32, int32) []byte {
	out, _ := json.Marshal(b.c.self)
	return out
}

func (b balancer) ParseSyncAssignment(raw []byte) (map[string][]int32, error) {
	var a assignment
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("reading the connect workers' assignment: %w", err)
	}
	if a.Index < 0 || a.Index >= len(a.Workers) {
		return nil, errors.New("the connect workers' assignment does not list this worker")
	}
	b.c.assigned(a)
	return map[string][]int32{}, nil
}

func (b balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	p, err := plan(b.c.self, members)
	if err != nil {
		return nil, nil, err
	}
	return planned(p), map[string]struct{}{}, nil
}

// planned is a computed plan, the leader's answer in SyncGroup.
type planned map[string][]byte

func (p planned) Balance(map[string]int32) kgo.IntoSyncAssignment { return p }

func (p planned) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(p))
	for id, b := range p {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, b
		out = append(out, a)
	}
	return out
}

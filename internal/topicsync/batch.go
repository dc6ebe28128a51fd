package topicsync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics are created, grown and altered many to a request. kadm gives
// every topic of one request the same partitions and configs, so these
// requests are built here with kmsg and sent through TargetClient.
//
// A KRaft controller refuses a user operation that would write more than
// 10,000 metadata records (one per topic, per partition, per config and
// per ACL), so a request stays well below that.
var (
	batchTopics  = 200  // topics (or ACLs) per request
	batchRecords = 4000 // metadata records per request, about
)

// requestTimeoutMillis is how long the controller may take over one
// request, as kadm's default.
const requestTimeoutMillis = 15000

// batches splits items into runs of at most batchTopics items and, past
// the first item of a run, at most batchRecords by weight.
func batches[T any](items []T, weight func(T) int) [][]T {
	var out [][]T
	start, records := 0, 0
	for i, it := range items {
		w := weight(it)
		if i > start && (i-start >= batchTopics || records+w > batchRecords) {
			out = append(out, items[start:i])
			start, records = i, 0
		}
		records += w
	}
	if start < len(items) {
		out = append(out, items[start:])
	}
	return out
}

// withMessage adds the broker's error message to err, keeping err for
// errors.Is.
func withMessage(err error, msg *string) error {
	if err == nil || msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}

// results maps the name of each answer of rs to its error, nil for none.
func results[T any](rs []T, answer func(T) (name string, code int16, msg *string)) map[string]error {
	out := make(map[string]error, len(rs))
	for _, r := range rs {
		name, code, msg := answer(r)
		out[name] = withMessage(kerr.ErrorForCode(code), msg)
	}
	return out
}

// resultOf is name's outcome of a request that failed as a whole with err
// or else answered errs.
func resultOf(errs map[string]error, err error, name, request string) error {
	if err != nil {
		return err
	}
	if e, ok := errs[name]; ok {
		return e
	}
	return fmt.Errorf("%s missing from the %s response", name, request)
}

func sortedKeys(m map[string]*string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// createTopics creates the remote topics of ts in one request, each with
// its source's partition count and its entry of configs (by source name).
// It returns each remote topic's error, nil when created.
func (s *Syncer) createTopics(ctx context.Context, ts []*Topic, configs map[string]map[string]*string) (map[string]error, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = requestTimeoutMillis
	for _, t := range ts {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Remote
		rt.NumPartitions = t.Partitions
		rt.ReplicationFactor = s.ReplicationFactor
		cs := configs[t.Name]
		for _, k := range sortedKeys(cs) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, cs[k]
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.TargetClient)
	if err != nil {
		return nil, err
	}
	return results(resp.Topics, func(r kmsg.CreateTopicsResponseTopic) (string, int16, *string) {
		return r.Topic, r.ErrorCode, r.ErrorMessage
	}), nil
}

// grow is a remote topic with fewer partitions than its source.
type grow struct {
	t    *Topic
	have int32
}

// addPartitions gives each remote topic of gs its source's partition count,
// in one request, and returns each remote topic's error. A topic that has
// the count already (INVALID_PARTITIONS: grown meanwhile) is no error.
func (s *Syncer) addPartitions(ctx context.Context, gs []grow) (map[string]error, error) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = requestTimeoutMillis
	for _, g := range gs {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = g.t.Remote
		rt.Count = g.t.Partitions
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.TargetClient)
	if err != nil {
		return nil, err
	}
	out := results(resp.Topics, func(r kmsg.CreatePartitionsResponseTopic) (string, int16, *string) {
		return r.Topic, r.ErrorCode, r.ErrorMessage
	})
	for name, err := range out {
		if errors.Is(err, kerr.InvalidPartitions) {
			out[name] = nil
		}
	}
	return out, nil
}

// change is the config operations one remote topic needs.
type change struct {
	remote string
	ops    []kadm.AlterConfig
}

// alterConfigs sends the changes of cs in one IncrementalAlterConfigs
// request and returns each remote topic's error.
func (s *Syncer) alterConfigs(ctx context.Context, cs []change) (map[string]error, error) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, c := range cs {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = c.remote
		for _, op := range c.ops {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value = op.Name, op.Value
			rc.Op = kmsg.IncrementalAlterConfigOpSet
			if op.Op == kadm.DeleteConfig {
				rc.Op = kmsg.IncrementalAlterConfigOpDelete
			}
			rr.Configs = append(rr.Configs, rc)
		}
		req.Resources = append(req.Resources, rr)
	}
	resp, err := req.RequestWith(ctx, s.TargetClient)
	if err != nil {
		return nil, err
	}
	return results(resp.Resources, func(r kmsg.IncrementalAlterConfigsResponseResource) (string, int16, *string) {
		return r.ResourceName, r.ErrorCode, r.ErrorMessage
	}), nil
}

// createACLs creates the LITERAL topic ACLs bs on the target in one
// request and returns the error of each, in the order of bs.
func (s *Syncer) createACLs(ctx context.Context, bs []binding) ([]error, error) {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = kmsg.ACLResourceTypeTopic
		c.ResourceName = b.Topic
		c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host = b.Principal, b.Host
		c.Operation, c.PermissionType = b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, s.TargetClient)
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != len(bs) {
		return nil, fmt.Errorf("CreateACLs answered %d results for %d ACLs", len(resp.Results), len(bs))
	}
	out := make([]error, len(bs))
	for i, r := range resp.Results {
		out[i] = withMessage(kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	return out, nil
}

// hostTimeout is how long new remote partitions (a topic Sync created,
// partitions it added) may wait for the target to host them; past it
// they may be copied anyway and the data path retries until their
// leaders take writes. (kbench scale: a one-node target at load 25 took
// about 3 minutes to host 5,000 new partitions.)
var hostTimeout = 5 * time.Minute

// hostCheck bounds the ListEndOffsets that tells which partitions are
// hosted: the client retries a partition that answers NOT_LEADER until
// its deadline, and what answered by then is kept.
var hostCheck = 2 * time.Second

// hosting is what Sync knows of one remote topic's partitions: the first
// hosted of count are hosted by the target; the others have waited since.
type hosting struct {
	hosted, count int32
	since         time.Time
}

// Pending reports whether new remote partitions wait for the target to
// host them: a Sync soon after lets them be copied once it does.
func (s *Syncer) Pending() bool {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	for _, h := range s.hosts {
		if h.hosted < h.count {
			return true
		}
	}
	return false
}

// waiting reports whether remote has partitions that wait to be hosted:
// a topic Sync created may not be in the target's metadata yet.
func (s *Syncer) waiting(remote string) bool {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	h := s.hosts[remote]
	return h != nil && h.hosted < h.count
}

// seen notes that the target lists have partitions of remote. Those of a
// topic first seen are taken as hosted; more than known before (another
// worker added them) wait to be hosted like those added here.
func (s *Syncer) seen(remote string, have int32) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	h := s.hosts[remote]
	if h == nil {
		s.hostsLocked()[remote] = &hosting{hosted: have, count: have}
		return
	}
	h.hosted = min(h.hosted, have) // fewer: deleted and created again
	h.add(have)
}

// added notes that Sync gave remote count partitions; created: it made
// the topic, none of whose partitions is hosted yet.
func (s *Syncer) added(remote string, count int32, created bool) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	h := s.hosts[remote]
	if h == nil || created {
		h = &hosting{}
		s.hostsLocked()[remote] = h
	}
	h.add(count)
}

func (s *Syncer) hostsLocked() map[string]*hosting {
	if s.hosts == nil {
		s.hosts = make(map[string]*hosting)
	}
	return s.hosts
}

// add notes that the remote topic has count partitions.
func (h *hosting) add(count int32) {
	if h.hosted == h.count && count > h.count {
		h.since = time.Now()
	}
	h.count = max(h.count, count)
}

// checkHosted sets Hosted and Ready of the topics of want. New remote
// partitions are not copied until the target hosts them: a new partition
// shows a leader in the metadata before that leader hosts it, writes to
// it fail until then, and a busy broker can take a minute or more over
// thousands of new partitions. One ListEndOffsets of the topics with
// partitions waiting tells which are hosted.
func (s *Syncer) checkHosted(ctx context.Context, want []Topic) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	var names []string
	wanted := make(map[string]bool, len(want))
	for _, t := range want {
		wanted[t.Remote] = true
		if h := s.hosts[t.Remote]; h != nil && h.hosted < h.count {
			names = append(names, t.Remote)
		}
	}
	for r := range s.hosts {
		if !wanted[r] {
			delete(s.hosts, r) // its source topic is gone
		}
	}
	for r := range s.ids {
		if !wanted[r] {
			delete(s.ids, r)
		}
	}
	now := time.Now()
	var late []string
	if len(names) > 0 {
		lctx, cancel := context.WithTimeout(ctx, hostCheck)
		offs, _ := s.Target.ListEndOffsets(lctx, names...) // partial on errors
		cancel()
		for _, r := range names {
			h := s.hosts[r]
			h.hosted = hostedFrom(offs, r, h.hosted, h.count)
			if h.hosted < h.count && now.Sub(h.since) >= hostTimeout {
				h.hosted = h.count
				late = append(late, r)
			}
		}
	}
	waiting, topics := 0, 0
	for i := range want {
		t := &want[i]
		if h := s.hosts[t.Remote]; h != nil {
			t.Hosted = min(h.hosted, t.Partitions)
			if h.hosted < h.count {
				waiting += int(h.count - h.hosted)
				topics++
			}
		}
		t.Ready = t.Hosted == t.Partitions
	}
	if len(late) > 0 {
		s.Log.Warn("the target does not host every new remote partition yet; replicating them anyway", "cluster", s.TargetAlias, "topics", late, "waited", hostTimeout.String())
	}
	if waiting > 0 && now.After(s.hostReport) {
		s.Log.Info("waiting for the target to host new remote partitions; each is copied once it does", "cluster", s.TargetAlias, "partitions", waiting, "topics", topics)
		s.hostReport = now.Add(10 * time.Second)
	}
}

// hostedFrom returns how many partitions of topic the end offsets offs
// show hosted, from partition 0 on, knowing the first from are: the first
// partition at or past from that offs lists with an error or not at all,
// or n.
func hostedFrom(offs kadm.ListedOffsets, topic string, from, n int32) int32 {
	ps := offs[topic]
	for p := from; p < n; p++ {
		if o, ok := ps[p]; !ok || o.Err != nil {
			return p
		}
	}
	return n
}

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

// hostTimeout is how long a remote topic Sync created may wait for the
// target to host its partitions; past it the topic is Ready anyway and
// the data path retries until its leaders take writes.
// (kbench scale: a one-node target at load 25 took about 3 minutes to
// host 5,000 new partitions).
var hostTimeout = 5 * time.Minute

// Pending reports whether remote topics created by Sync wait for the
// target to host their partitions: a Sync soon after makes them Ready
// once it does.
func (s *Syncer) Pending() bool {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	return len(s.unhosted) > 0
}

func (s *Syncer) isUnhosted(remote string) bool {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	_, ok := s.unhosted[remote]
	return ok
}

// checkHosted keeps the topics of want that Sync created (fresh, or in an
// earlier Sync) from being Ready until the target hosts all their
// partitions: a new partition shows a leader in the metadata before that
// leader hosts it, writes to it fail until then, and a busy broker can
// take a minute or more over thousands of new partitions. One
// ListEndOffsets of those topics tells which are hosted.
func (s *Syncer) checkHosted(ctx context.Context, want []Topic, fresh []*Topic) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	now := time.Now()
	if s.unhosted == nil {
		s.unhosted = make(map[string]time.Time)
	}
	for _, t := range fresh {
		if _, ok := s.unhosted[t.Remote]; !ok {
			s.unhosted[t.Remote] = now
		}
	}
	var check []*Topic
	var names []string
	wanted := make(map[string]bool, len(want))
	for i := range want {
		t := &want[i]
		wanted[t.Remote] = true
		if _, ok := s.unhosted[t.Remote]; ok {
			check = append(check, t)
			names = append(names, t.Remote)
		}
	}
	for r := range s.unhosted {
		if !wanted[r] {
			delete(s.unhosted, r) // its source topic is gone
		}
	}
	if len(check) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	offs, _ := s.Target.ListEndOffsets(lctx, names...) // partial on errors
	cancel()
	var late []string
	for _, t := range check {
		since := s.unhosted[t.Remote]
		switch {
		case hosted(offs, t.Remote, t.Partitions):
			t.Ready = true
		case now.Sub(since) >= hostTimeout:
			t.Ready = true
			late = append(late, t.Remote)
		default:
			t.Ready = false
			continue
		}
		delete(s.unhosted, t.Remote)
	}
	if len(late) > 0 {
		s.Log.Warn("the target does not host every partition of new remote topics yet; replicating them anyway", "cluster", s.TargetAlias, "topics", late, "waited", hostTimeout.String())
	}
	if n := len(s.unhosted); n > 0 && now.After(s.hostReport) {
		s.Log.Info("waiting for the target to host new remote topics; each is copied once it does", "cluster", s.TargetAlias, "topics", n)
		s.hostReport = now.Add(10 * time.Second)
	}
}

// hosted reports whether the end offsets offs list every one of the n
// partitions of topic without error.
func hosted(offs kadm.ListedOffsets, topic string, n int32) bool {
	ps := offs[topic]
	for p := range n {
		if o, ok := ps[p]; !ok || o.Err != nil {
			return false
		}
	}
	return true
}

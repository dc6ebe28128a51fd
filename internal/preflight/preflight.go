// Package preflight reaches the clusters of a configuration before kmirror
// runs it (`kmirror check --connect`): broker versions, the permissions each
// flow needs (describe and read source topics, create and write topics on
// the target, internal topics, consumer groups) and the topics it would
// create. It changes nothing: topic creation is only validated.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/topicsync"
)

// ACL operation codes (org.apache.kafka.common.acl.AclOperation) as bits of
// KIP-430's authorized operations.
const (
	opRead            = 3
	opWrite           = 4
	opDescribeConfigs = 10
)

// Checker runs the checks and writes what it finds to Out.
type Checker struct {
	Out      io.Writer
	Problems int // problems found so far

	conns map[string]*conn // by alias and role
}

type conn struct {
	cl  *kgo.Client
	adm *kadm.Client
	err error
}

// Close closes the clients the checks made.
func (c *Checker) Close() {
	for _, cn := range c.conns {
		if cn.cl != nil {
			cn.cl.Close()
		}
	}
}

func (c *Checker) problem(format string, args ...any) {
	c.Problems++
	fmt.Fprintf(c.Out, "  PROBLEM: "+format+"\n", args...)
}

func (c *Checker) ok(format string, args ...any) {
	fmt.Fprintf(c.Out, "  ok: "+format+"\n", args...)
}

// connect returns the admin of alias built from props, reporting the
// cluster's brokers and versions the first time.
func (c *Checker) connect(ctx context.Context, alias, role string, props map[string]string) *conn {
	if c.conns == nil {
		c.conns = map[string]*conn{}
	}
	key := alias + "|" + role
	if cn, ok := c.conns[key]; ok {
		return cn
	}
	cn := &conn{}
	c.conns[key] = cn
	cl, _, err := clients.New(clients.ID("check", role), clients.Admin, props)
	if err != nil {
		cn.err = err
		c.problem("cluster %s (%s settings): %v", alias, role, err)
		return cn
	}
	cn.cl, cn.adm = cl, kadm.NewClient(cl)
	vs, err := cn.adm.ApiVersions(ctx)
	if err != nil {
		cn.err = err
		c.problem("cluster %s is unreachable or refuses kmirror (%s settings): %v", alias, role, err)
		return cn
	}
	var brokers []string
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			brokers = append(brokers, fmt.Sprintf("broker %d: %v", v.NodeID, v.Err))
			return
		}
		brokers = append(brokers, fmt.Sprintf("broker %d: %s", v.NodeID, v.VersionGuess()))
	})
	sort.Strings(brokers)
	c.ok("cluster %s (%s settings) reached: %s", alias, role, strings.Join(brokers, ", "))
	return cn
}

// topicState is one topic's metadata as the user sees it.
type topicState struct {
	exists     bool
	err        error
	partitions int32
	ops        int32 // authorized operations; -2^31 when unknown
}

func can(ops int32, op int) bool { return ops != -2147483648 && ops&(1<<op) != 0 }

// metadata describes topics (all when none) with their authorized operations.
func metadata(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]topicState, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	if len(topics) > 0 {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[string]topicState{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		st := topicState{ops: t.AuthorizedOperations, partitions: int32(len(t.Partitions)), err: kerr.ErrorForCode(t.ErrorCode)}
		st.exists = st.err == nil
		out[*t.Topic] = st
	}
	return out, nil
}

// Flow checks one enabled flow.
func (c *Checker) Flow(ctx context.Context, f *config.Flow) {
	fmt.Fprintf(c.Out, "flow %s (connect):\n", f.Name())
	src := c.connect(ctx, f.Source, "source admin", f.SourceAdmin)
	tgt := c.connect(ctx, f.Target, "target admin", f.TargetAdmin)
	if src.err != nil || tgt.err != nil {
		return
	}
	syncer := &topicsync.Syncer{Policy: f.Policy, Topics: f.TopicFilter, SourceAlias: f.Source, TargetAlias: f.Target,
		HeartbeatsReplication: f.HeartbeatsReplicationEnabled, ConfigExclude: f.ConfigExclude,
		DefaultsFromSource: f.Client.DefaultsFromSource}

	all, err := metadata(ctx, src.cl)
	if err != nil {
		c.problem("describing the topics of %s: %v", f.Source, err)
		return
	}
	var selected []string
	for name, st := range all {
		if st.exists && syncer.ShouldReplicate(name) {
			selected = append(selected, name)
		}
	}
	sort.Strings(selected)
	if len(selected) == 0 {
		fmt.Fprintf(c.Out, "  note: no topic of %s is selected: none matches topics = %s, or the user may not DESCRIBE them\n",
			f.Source, strings.Join(f.Topics, ","))
	}
	var configs map[string]map[string]*string
	if len(selected) > 0 {
		configs = c.sourceConfigs(ctx, src.adm, syncer, f, selected)
	}
	for _, name := range selected {
		st := all[name]
		if !can(st.ops, opRead) {
			c.problem("cannot read topic %s on %s: the user lacks READ on it", name, f.Source)
		} else {
			c.ok("describe and read %s on %s (%d partitions)", name, f.Source, st.partitions)
		}
		if f.SyncTopicConfigsEnabled && !can(st.ops, opDescribeConfigs) {
			c.problem("cannot describe the configs of %s on %s (sync.topic.configs.enabled): the user lacks DESCRIBE_CONFIGS", name, f.Source)
		}
		remote := f.Policy.FormatRemoteTopic(f.Source, name)
		c.topic(ctx, tgt, f.Target, remote, st.partitions, f.ReplicationFactor, configs[name], false)
	}

	// Internal topics, as the flow creates them.
	compact := map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}
	c.topic(ctx, tgt, f.Target, f.OffsetStorageTopic, f.OffsetStoragePartitions, f.OffsetStorageReplicationFactor, compact, true)
	if f.EmitHeartbeatsEnabled {
		c.topic(ctx, tgt, f.Target, f.Policy.HeartbeatsTopic(), 1, f.HeartbeatsTopicReplicationFactor, compact, false)
	}
	if f.EmitCheckpointsEnabled {
		c.topic(ctx, tgt, f.Target, f.Policy.CheckpointsTopic(f.Source), 1, f.CheckpointsTopicReplicationFactor, compact, true)
	}
	if f.EmitOffsetSyncsEnabled {
		on, alias := tgt, f.Target
		if f.OffsetSyncsTopicLocation == "source" {
			on, alias = src, f.Source
		}
		c.topic(ctx, on, alias, f.OffsetSyncsTopic(), 1, f.OffsetSyncsTopicReplicationFactor, compact, true)
	}
	if f.EmitCheckpointsEnabled {
		c.groups(ctx, src, tgt, f)
	}
}

// Heartbeats checks a heartbeat-only pair: its target's heartbeats topic.
func (c *Checker) Heartbeats(ctx context.Context, f *config.Flow) {
	fmt.Fprintf(c.Out, "heartbeats %s (connect):\n", f.Name())
	tgt := c.connect(ctx, f.Target, "target admin", f.TargetAdmin)
	if tgt.err != nil {
		return
	}
	c.topic(ctx, tgt, f.Target, f.Policy.HeartbeatsTopic(), 1, f.HeartbeatsTopicReplicationFactor,
		map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, false)
}

// sourceConfigs returns the configs each new remote topic would get.
func (c *Checker) sourceConfigs(ctx context.Context, adm *kadm.Client, s *topicsync.Syncer, f *config.Flow, topics []string) map[string]map[string]*string {
	out := map[string]map[string]*string{}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		c.problem("describing topic configs on %s: %v", f.Source, err)
		return out
	}
	for _, rc := range rcs {
		if rc.Err == nil {
			out[rc.Name] = s.TargetConfigs(rc.Configs)
		}
	}
	return out
}

// topic checks a topic kmirror writes on alias (and reads, when read is
// set): writable if it exists, else creatable as described.
func (c *Checker) topic(ctx context.Context, cn *conn, alias, name string, partitions int32, rf int16, configs map[string]*string, read bool) {
	sts, err := metadata(ctx, cn.cl, name)
	if err != nil {
		c.problem("describing %s on %s: %v", name, alias, err)
		return
	}
	st := sts[name]
	if st.exists {
		switch {
		case !can(st.ops, opWrite):
			c.problem("cannot write topic %s on %s: the user lacks WRITE on it", name, alias)
		case read && !can(st.ops, opRead):
			c.problem("cannot read topic %s on %s: the user lacks READ on it", name, alias)
		case st.partitions < partitions && partitions > 0 && !strings.HasPrefix(name, "mm2-offsets"):
			c.ok("write %s on %s; would add partitions: %d -> %d", name, alias, st.partitions, partitions)
		default:
			c.ok("write %s on %s (exists, %d partitions)", name, alias, st.partitions)
		}
		return
	}
	resp, err := cn.adm.ValidateCreateTopics(ctx, partitions, rf, configs, name)
	if err == nil {
		err = resp[name].Err
	}
	switch {
	case err == nil:
		c.ok("would create %s on %s: %d partitions, replication factor %s%s", name, alias, partitions, rfString(rf), configString(configs))
	case isAuth(err):
		c.problem("cannot create topic %s on %s: the user lacks CREATE on the cluster or the topic (%v)", name, alias, err)
	default:
		c.problem("creating topic %s on %s would fail: %v %s", name, alias, err, resp[name].ErrMessage)
	}
}

// groups checks that the source's consumer groups can be listed and their
// offsets read, and, with group offset sync, that the target's groups can be
// described.
func (c *Checker) groups(ctx context.Context, src, tgt *conn, f *config.Flow) {
	listed, err := src.adm.ListGroups(ctx)
	if err != nil {
		c.problem("listing consumer groups on %s: %v", f.Source, err)
		return
	}
	var groups []string
	for _, g := range listed.Groups() {
		if f.GroupFilter.Match(g) {
			groups = append(groups, g)
		}
	}
	sort.Strings(groups)
	c.ok("%d consumer groups of %s are selected for checkpoints", len(groups), f.Source)
	if len(groups) == 0 {
		fmt.Fprintf(c.Out, "  note: no group is checked: none matches groups = %s, or the user may not DESCRIBE them (checkpoints need DESCRIBE on the groups of %s)\n",
			strings.Join(f.Groups, ","), f.Source)
		return
	}
	offs := src.adm.FetchManyOffsets(ctx, groups...)
	for _, g := range groups {
		if r, ok := offs[g]; ok && r.Err != nil {
			c.problem("reading the offsets of group %s on %s: %v", g, f.Source, r.Err)
		}
	}
	if !f.SyncGroupOffsetsEnabled {
		return
	}
	described, err := tgt.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		c.problem("describing consumer groups on %s (sync.group.offsets.enabled): %v", f.Target, err)
		return
	}
	for _, g := range groups {
		if d, ok := described[g]; ok && d.Err != nil {
			c.problem("cannot sync the offsets of group %s on %s: %v (needs DESCRIBE and READ on the group)", g, f.Target, d.Err)
		}
	}
}

func isAuth(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

func rfString(rf int16) string {
	if rf < 0 {
		return "broker default"
	}
	return fmt.Sprint(rf)
}

func configString(m map[string]*string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != nil {
			keys = append(keys, k+"="+*v)
		}
	}
	sort.Strings(keys)
	return ", configs " + strings.Join(keys, " ")
}

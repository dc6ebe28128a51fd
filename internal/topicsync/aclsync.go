package topicsync

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// binding is one topic ACL: LITERAL pattern, on the named topic.
type binding struct {
	Topic      string
	Principal  string
	Host       string
	Operation  kadm.ACLOperation
	Permission kmsg.ACLPermissionType
}

func (b binding) String() string {
	return fmt.Sprintf("%s %s %s on topic %s from host %s", b.Permission, b.Principal, b.Operation, b.Topic, b.Host)
}

// SyncACLs gives remote topics the ACLs of their source topics, as MM2's
// topic ACL sync does: LITERAL topic ACLs of replicated topics, without
// ALLOW WRITE (only the replicator writes remote topics), with ALLOW ALL
// narrowed to ALLOW READ, and every DENY kept. ACLs are only added, never
// deleted, and only those the target lacks are sent. A source without an
// authorizer is logged once and not asked again; so is a target without
// one.
func (s *Syncer) SyncACLs(ctx context.Context) error {
	if s.aclsOff.Load() {
		return nil
	}
	want, missing, side, err := s.aclDiff(ctx)
	if errors.Is(err, kerr.SecurityDisabled) {
		s.aclsOff.Store(true)
		if side == "source" {
			s.Log.Info("source cluster has no authorizer; topic ACLs are not synced", "cluster", s.SourceAlias)
		} else {
			s.Log.Warn("target cluster has no authorizer; topic ACLs are not synced", "cluster", s.TargetAlias, "source_acls", len(want))
		}
		return nil
	}
	if err != nil {
		return err
	}
	for _, batch := range batches(missing, func(binding) int { return 1 }) {
		errs, err := s.createACLs(ctx, batch)
		for i, b := range batch {
			e := err
			if e == nil {
				e = errs[i]
			}
			if e != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.logs.Warn(s.Log, "create acl|"+e.Error(), "cannot create ACL on remote topic", "acl", b.String(), "cluster", s.TargetAlias, "err", e)
				continue
			}
			s.Log.Info("created ACL on remote topic", "acl", b.String(), "cluster", s.TargetAlias)
		}
	}
	return nil
}

// remoteACLs maps the source's topic ACLs to those of the remote topics,
// sorted and without duplicates.
func (s *Syncer) remoteACLs(src []kadm.DescribedACL) []binding {
	seen := make(map[binding]bool)
	var out []binding
	for _, a := range src {
		// "*" is the wildcard topic: it names no topic to replicate.
		if a.Type != kmsg.ACLResourceTypeTopic || a.Pattern != kadm.ACLPatternLiteral ||
			a.Name == "*" || !s.ShouldReplicate(a.Name) {
			continue
		}
		b := toBinding(a)
		if b.Permission == kmsg.ACLPermissionTypeAllow {
			switch b.Operation {
			case kadm.OpWrite:
				continue
			case kadm.OpAll:
				b.Operation = kadm.OpRead
			}
		}
		b.Topic = s.Policy.FormatRemoteTopic(s.SourceAlias, b.Topic)
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func toBinding(a kadm.DescribedACL) binding {
	return binding{Topic: a.Name, Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.Permission}
}

// describeTopicACLs returns every LITERAL topic ACL of a cluster.
func describeTopicACLs(ctx context.Context, adm *kadm.Client) ([]kadm.DescribedACL, error) {
	f := kadm.NewACLs().Topics().ResourcePatternType(kadm.ACLPatternLiteral).Operations().
		Allow().AllowHosts().Deny().DenyHosts()
	rs, err := adm.DescribeACLs(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []kadm.DescribedACL
	for _, r := range rs {
		if r.Err != nil {
			return nil, r.Err
		}
		out = append(out, r.Described...)
	}
	return out, nil
}

// aclDiff describes the topic ACLs of both clusters: want is what the
// source's map to on the remote topics, missing what the target lacks of
// them. On an error, side names the cluster ("source" or "target").
func (s *Syncer) aclDiff(ctx context.Context) (want, missing []binding, side string, err error) {
	src, err := describeTopicACLs(ctx, s.Source)
	if err != nil {
		return nil, nil, "source", fmt.Errorf("describing topic ACLs of source cluster %s: %w", s.SourceAlias, err)
	}
	want = s.remoteACLs(src)
	if len(want) == 0 {
		return nil, nil, "", nil
	}
	tgt, err := describeTopicACLs(ctx, s.Target)
	if err != nil {
		return nil, nil, "target", fmt.Errorf("describing topic ACLs of target cluster %s: %w", s.TargetAlias, err)
	}
	have := make(map[binding]bool, len(tgt))
	for _, a := range tgt {
		have[toBinding(a)] = true
	}
	for _, b := range want {
		if !have[b] {
			missing = append(missing, b)
		}
	}
	return want, missing, "", nil
}

// ACLPlan reports what SyncACLs would give the remote topics: every ACL
// the source's topic ACLs map to (want) and those the target lacks
// (missing), as text. An error wrapping kerr.SecurityDisabled means a
// cluster has no authorizer.
func (s *Syncer) ACLPlan(ctx context.Context) (want, missing []string, err error) {
	ws, ms, _, err := s.aclDiff(ctx)
	for _, b := range ws {
		want = append(want, b.String())
	}
	for _, b := range ms {
		missing = append(missing, b.String())
	}
	return want, missing, err
}

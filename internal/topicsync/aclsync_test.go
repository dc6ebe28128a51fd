package topicsync

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRemoteACLs(t *testing.T) {
	p, f := defaultPolicy(t, ".*")
	s := &Syncer{SourceAlias: "A", TargetAlias: "B", Policy: p, Topics: f}

	const (
		allow = kmsg.ACLPermissionTypeAllow
		deny  = kmsg.ACLPermissionTypeDeny
	)
	acl := func(topic, principal string, op kadm.ACLOperation, perm kmsg.ACLPermissionType) kadm.DescribedACL {
		return kadm.DescribedACL{Type: kmsg.ACLResourceTypeTopic, Pattern: kadm.ACLPatternLiteral, Name: topic, Principal: principal, Host: "*", Operation: op, Permission: perm}
	}
	prefixed := acl("orders", "User:alice", kadm.OpRead, allow)
	prefixed.Pattern = kadm.ACLPatternPrefixed
	group := acl("orders", "User:alice", kadm.OpRead, allow)
	group.Type = kmsg.ACLResourceTypeGroup
	fromHost := acl("orders", "User:alice", kadm.OpRead, allow)
	fromHost.Host = "10.0.0.1"

	tests := []struct {
		name string
		in   []kadm.DescribedACL
		want []string // binding.String() of the remote ACLs
	}{
		{"allow read kept", []kadm.DescribedACL{acl("orders", "User:alice", kadm.OpRead, allow)},
			[]string{"ALLOW User:alice READ on topic A.orders from host *"}},
		{"allow describe kept", []kadm.DescribedACL{acl("orders", "User:alice", kadm.OpDescribe, allow)},
			[]string{"ALLOW User:alice DESCRIBE on topic A.orders from host *"}},
		{"allow write dropped", []kadm.DescribedACL{acl("orders", "User:bob", kadm.OpWrite, allow)}, nil},
		{"allow all becomes read", []kadm.DescribedACL{acl("orders", "User:bob", kadm.OpAll, allow)},
			[]string{"ALLOW User:bob READ on topic A.orders from host *"}},
		{"deny write kept", []kadm.DescribedACL{acl("orders", "User:mallory", kadm.OpWrite, deny)},
			[]string{"DENY User:mallory WRITE on topic A.orders from host *"}},
		{"deny all kept", []kadm.DescribedACL{acl("orders", "User:mallory", kadm.OpAll, deny)},
			[]string{"DENY User:mallory ALL on topic A.orders from host *"}},
		{"host kept", []kadm.DescribedACL{fromHost},
			[]string{"ALLOW User:alice READ on topic A.orders from host 10.0.0.1"}},
		{"prefixed ignored", []kadm.DescribedACL{prefixed}, nil},
		{"wildcard topic ignored", []kadm.DescribedACL{acl("*", "User:alice", kadm.OpRead, allow)}, nil},
		{"group ACL ignored", []kadm.DescribedACL{group}, nil},
		{"cycle topic ignored", []kadm.DescribedACL{acl("B.orders", "User:alice", kadm.OpRead, allow)}, nil},
		{"internal topic ignored", []kadm.DescribedACL{acl("__consumer_offsets", "User:alice", kadm.OpRead, allow)}, nil},
		{"ALL and READ collapse", []kadm.DescribedACL{
			acl("orders", "User:alice", kadm.OpAll, allow),
			acl("orders", "User:alice", kadm.OpRead, allow),
		}, []string{"ALLOW User:alice READ on topic A.orders from host *"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, b := range s.remoteACLs(tt.in) {
				got = append(got, b.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

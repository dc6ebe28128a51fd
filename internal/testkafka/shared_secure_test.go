package testkafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestSharedSecure: SharedSecure gives the same two secure clusters to
// every caller; a user made by AddUser logs in with SCRAM-SHA-512, may do
// nothing without ACLs, and an ACL granted to it is not granted to
// another test's user.
func TestSharedSecure(t *testing.T) {
	t.Parallel()
	cs := testkafka.SharedSecure(t)
	if len(cs) != 2 {
		t.Fatalf("SharedSecure gave %d clusters, want 2", len(cs))
	}
	if again := testkafka.SharedSecure(t); again[0] != cs[0] || again[1] != cs[1] {
		t.Fatal("a second SharedSecure call started other clusters")
	}
	for _, c := range cs {
		if len(c.SecureBootstrap) == 0 || c.CAFile == "" || c.Users[c.SuperUser] == "" {
			t.Fatalf("cluster %s: secure info missing: %+v", c.Name, c)
		}
	}
	c := cs[1]
	topic := testkafka.Topic(t, "shsec")
	c.CreateTopic(t, topic, 1, nil)
	mine, other := testkafka.Topic(t, "mine"), testkafka.Topic(t, "other")
	minePw, otherPw := c.AddUser(t, mine), c.AddUser(t, other)
	produce := func(user, pw string) error {
		cl := c.Client(t, append(c.SASL(t, "SCRAM-SHA-512", user, pw), kgo.RecordDeliveryTimeout(10*time.Second))...)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(user)}).FirstErr()
	}
	if err := produce(mine, "wrong"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := produce(mine, minePw); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("new user without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	acl := kadm.NewACLs().Allow("User:"+mine).Topics(topic).Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	c.Grant(t, acl)
	// Grant returned: the broker applies the ACL already.
	if err := produce(mine, minePw); err != nil {
		t.Fatalf("produce as %s with a write ACL granted: %v", mine, err)
	}
	if err := produce(other, otherPw); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("another user with %s's ACL granted: %v, want TOPIC_AUTHORIZATION_FAILED", mine, err)
	}
}

package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// topicACLs returns topic's LITERAL ACLs on c as "PERMISSION principal OPERATION".
func topicACLs(t *testing.T, c *testkafka.Cluster, topic string) []string {
	t.Helper()
	f := kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Operations().
		Allow().AllowHosts().Deny().DenyHosts()
	rs, err := c.Admin(t).DescribeACLs(ctx(t), f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, d := range r.Described {
			out = append(out, d.Permission.String()+" "+d.Principal+" "+d.Operation.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestTopicACLSync gives a source topic ACLs while kmirror runs, on
// clusters with an authorizer: the remote topic gets alice's READ and
// mallory's DENY, never bob's WRITE, so bob cannot write the remote topic;
// carol's READ, granted later, is synced without bob's WRITE.
// The clusters are the shared secure pair, so alice, bob and mallory are
// principals of this test's own (named by testkafka.Topic); bob is a
// SCRAM user on both clusters.
func TestTopicACLSync(t *testing.T) {
	t.Parallel()
	cs := testkafka.SharedSecure(t)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "aclsync")
	a.CreateTopic(t, topic, 1, nil)
	alice, bobName, mallory := "User:"+testkafka.Topic(t, "alice"), testkafka.Topic(t, "bob"), "User:"+testkafka.Topic(t, "mallory")
	bobPw := map[*testkafka.Cluster]string{a: a.AddUser(t, bobName), b: b.AddUser(t, bobName)}

	// kmirror uses the PLAINTEXT listeners, where it is a super user.
	src, dst := alias(t, "A"), alias(t, "B")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		src+"->"+dst+".topics = "+topic,
		"sync.topic.acls.interval.seconds = 2"))
	p := startKmirror(t, cfg)
	remote := src + "." + topic
	waitFor(t, 30*time.Second, remote, func() bool { return hasTopic(t, b, remote) })

	for _, acl := range []*kadm.ACLBuilder{
		kadm.NewACLs().Topics(topic).Operations(kadm.OpRead).Allow(alice),
		kadm.NewACLs().Topics(topic).Operations(kadm.OpWrite).Allow("User:" + bobName),
		kadm.NewACLs().Topics(topic).Operations(kadm.OpRead).Deny(mallory),
	} {
		a.Grant(t, acl.ResourcePatternType(kadm.ACLPatternLiteral))
	}
	want := []string{"ALLOW " + alice + " READ", "DENY " + mallory + " READ"}
	var got []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last remote ACLs seen: %q", got)
		}
	})
	waitFor(t, 15*time.Second, "remote ACLs "+remote, func() bool {
		got = topicACLs(t, b, remote)
		return slices.Equal(got, want)
	})

	// bob may write the source topic, not its remote topic. The
	// refusal comes at once; a write can take its time on a loaded
	// machine (a loaded run timed out at 10 s).
	bob := func(c *testkafka.Cluster, topic string) error {
		cl := c.Client(t, append(c.SASL(t, "SCRAM-SHA-512", bobName, bobPw[c]),
			kgo.RecordDeliveryTimeout(45*time.Second))...)
		ctx, cancel := context.WithTimeout(ctx(t), time.Minute)
		defer cancel()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("bob")}).FirstErr()
	}
	if err := bob(a, topic); err != nil {
		t.Fatalf("bob writing the source topic: %v", err)
	}
	if err := bob(b, remote); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("bob writing the remote topic: got %v, want %v", err, kerr.TopicAuthorizationFailed)
	}
	// A later sync still leaves bob's WRITE out: carol's READ, granted
	// now, arrives alone (every sync that sees it also sees bob's WRITE).
	carol := "User:" + testkafka.Topic(t, "carol")
	a.Grant(t, kadm.NewACLs().Topics(topic).Operations(kadm.OpRead).Allow(carol).
		ResourcePatternType(kadm.ACLPatternLiteral))
	want = append(want, "ALLOW "+carol+" READ")
	slices.Sort(want)
	waitFor(t, 15*time.Second, "carol's READ alone to join the remote ACLs "+remote, func() bool {
		got = topicACLs(t, b, remote)
		return slices.Contains(got, "ALLOW "+carol+" READ")
	})
	if !slices.Equal(got, want) {
		t.Errorf("remote ACLs %q, want %q", got, want)
	}
	p.stop()
}

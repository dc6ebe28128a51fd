package topicsync

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/policy"
	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// brokerSyncer returns a Syncer of flow A->B that replicates only topic,
// logging into the returned buffer.
func brokerSyncer(t testing.TB, a, b *testkafka.Cluster, topic string) (*Syncer, *bytes.Buffer) {
	t.Helper()
	return patternSyncer(t, a, b, regexp.QuoteMeta(topic), b.Client(t))
}

// patternSyncer returns a Syncer of flow A->B that replicates the topics
// matching pattern and reaches B through tgt.
func patternSyncer(t testing.TB, a, b *testkafka.Cluster, pattern string, tgt *kgo.Client) (*Syncer, *bytes.Buffer) {
	t.Helper()
	p, err := policy.New(policy.Config{Class: "DefaultReplicationPolicy", Separator: "."})
	if err != nil {
		t.Fatal(err)
	}
	f, err := policy.NewFilter([]string{pattern}, policy.DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	exclude, err := policy.CompilePattern(policy.DefaultConfigPropertiesExclude)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	return &Syncer{
		Source: a.Admin(t), Target: kadm.NewClient(tgt), TargetClient: tgt, SourceAlias: "A", TargetAlias: "B",
		Policy: p, Topics: f, ReplicationFactor: -1, ConfigExclude: exclude,
		Log: slog.New(slog.NewTextHandler(&log, nil)),
	}, &log
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// topicOverrides returns the dynamic topic configs of topic.
func topicOverrides(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[string]string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			out[c.Key] = c.MaybeValue()
		}
	}
	return out
}

func alter(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, ops ...kadm.AlterConfig) {
	t.Helper()
	rs, err := adm.AlterTopicConfigs(ctx, ops, topic)
	if err == nil {
		_, err = rs.On(topic, func(r *kadm.AlterConfigsResponse) error { return r.Err })
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestSyncConfigsBroker(t *testing.T) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	ctx := testCtx(t)
	topic := testkafka.Topic(t, "cfg")
	remote := "A." + topic
	a.CreateTopic(t, topic, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})
	s, log := brokerSyncer(t, a, b, topic)
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	tgt := b.Admin(t)
	src := a.Admin(t)

	// Created with the override; a sync then has nothing to send.
	waitListed(t, ctx, tgt, []string{remote}, func(int) int32 { return 1 })
	if got := topicOverrides(t, ctx, tgt, remote)["retention.ms"]; got != "3600000" {
		t.Fatalf("remote retention.ms = %q after create, want 3600000", got)
	}
	sync := func() {
		t.Helper()
		log.Reset()
		if err := s.SyncConfigs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	if log.Len() != 0 {
		t.Errorf("sync with nothing to change logged:\n%s", log)
	}

	// Source changes: SET. A target-only override of a source default:
	// DELETE. An excluded override on the target stays.
	alter(t, ctx, src, topic,
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")})
	alter(t, ctx, tgt, remote,
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("60000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("1")})
	// Altered configs reach the brokers' metadata a moment later.
	want := map[string]string{"retention.ms": "7200000", "cleanup.policy": "compact", "min.insync.replicas": "1"}
	var got map[string]string
	var logged strings.Builder
	until(t, func() bool {
		sync()
		logged.WriteString(log.String())
		got = topicOverrides(t, ctx, tgt, remote)
		return maps.Equal(got, want)
	}, "remote overrides %v, want %v", &got, want)
	for _, s := range []string{"synced remote topic configs", "retention.ms=7200000", "cleanup.policy=compact", "-segment.ms"} {
		if !strings.Contains(logged.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, &logged)
		}
	}

	// The source override removed: the remote override goes too.
	alter(t, ctx, src, topic, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"})
	delete(want, "retention.ms")
	until(t, func() bool {
		sync()
		got = topicOverrides(t, ctx, tgt, remote)
		return maps.Equal(got, want)
	}, "remote overrides %v after the source's retention.ms was deleted, want %v", &got, want)
	time.Sleep(time.Second) // let metadata settle, then nothing is left to do
	sync()
	if log.Len() != 0 {
		t.Errorf("second sync logged:\n%s", log)
	}

	// No authorizer on these clusters: ACL sync says so once.
	log.Reset()
	for range 2 {
		if err := s.SyncACLs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(log.String(), "no authorizer"); n != 1 {
		t.Errorf("no-authorizer notice logged %d times, want 1:\n%s", n, log)
	}
}

func TestSyncACLsBroker(t *testing.T) {
	cs := testkafka.Start(t, testkafka.Options{Clusters: 2, Nodes: 1, Secure: true})
	a, b := cs[0], cs[1]
	ctx := testCtx(t)
	topic := testkafka.Topic(t, "acl")
	other := testkafka.Topic(t, "other") // not replicated
	remote := "A." + topic
	a.CreateTopic(t, topic, 1, nil)
	src, tgt := a.Admin(t), b.Admin(t)

	create := func(adm *kadm.Client, acl *kadm.ACLBuilder) {
		t.Helper()
		rs, err := adm.CreateACLs(ctx, acl)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("create ACL: %v %s", r.Err, r.ErrMessage)
			}
		}
	}
	lit := func(topics ...string) *kadm.ACLBuilder {
		return kadm.NewACLs().Topics(topics...).ResourcePatternType(kadm.ACLPatternLiteral)
	}
	create(src, lit(topic).Operations(kadm.OpRead).Allow("User:alice"))
	create(src, lit(topic).Operations(kadm.OpWrite).Allow("User:bob"))
	create(src, lit(topic).Operations(kadm.OpAll).Allow("User:carol"))
	create(src, lit(topic).Operations(kadm.OpRead).Deny("User:mallory"))
	create(src, lit(other).Operations(kadm.OpRead).Allow("User:alice"))
	create(src, kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead).Allow("User:bob"))
	// Already on the target: not sent again. Unrelated: not deleted.
	create(tgt, lit(remote).Operations(kadm.OpRead).Allow("User:carol"))
	create(tgt, lit(remote).Operations(kadm.OpDescribe).Allow("User:bob"))

	// Each broker shows new ACLs once it has applied the controller's
	// metadata: wait for all of them before the first sync.
	shown := func(adm *kadm.Client, n int) {
		t.Helper()
		var got int
		until(t, func() bool {
			rs, err := describeTopicACLs(ctx, adm)
			if err != nil {
				t.Fatal(err)
			}
			got = len(rs)
			return got == n
		}, "%v literal topic ACLs shown, want %d", now[int]{&got}, n)
	}
	shown(src, 5)
	shown(tgt, 2)

	s, rc, log := countingSyncer(t, a, b, regexp.QuoteMeta(topic))
	if err := s.SyncACLs(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rc.take(kmsg.CreateACLs); n != 1 {
		t.Errorf("sent %d CreateACLs requests for the two missing ACLs, want 1", n)
	}
	want := strings.Join([]string{
		"ALLOW User:alice READ on topic " + remote + " from host *",
		"ALLOW User:bob DESCRIBE on topic " + remote + " from host *",
		"ALLOW User:carol READ on topic " + remote + " from host *",
		"DENY User:mallory READ on topic " + remote + " from host *",
	}, "\n")
	// The controller answers CreateACLs once the ACLs are committed; the
	// broker's authorizer shows them when it has applied that metadata,
	// a moment later. Wait for that, or the second sync sees them missing.
	var got string
	until(t, func() bool {
		rs, err := describeTopicACLs(ctx, tgt)
		if err != nil {
			t.Fatal(err)
		}
		var bs []string
		for _, r := range rs {
			bs = append(bs, toBinding(r).String())
		}
		got = strings.Join(sorted(bs), "\n")
		return got == want
	}, "target ACLs:\n%s\nwant:\n%s", now[string]{&got}, want)
	if n := strings.Count(log.String(), "created ACL"); n != 2 {
		t.Errorf("created %d ACLs, want 2 (alice, mallory):\n%s", n, log)
	}
	log.Reset()
	if err := s.SyncACLs(ctx); err != nil {
		t.Fatal(err)
	}
	if log.Len() != 0 {
		t.Errorf("second sync logged:\n%s", log)
	}
}

// until retries cond for up to 15 s, then fails with format and args.
func until(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
	}
}

// now prints the value p points to when the message is formatted, not
// when it is passed.
type now[T any] struct{ p *T }

func (n now[T]) String() string { return fmt.Sprint(*n.p) }

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}

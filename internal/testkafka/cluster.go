package testkafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// Cluster is a running Kafka cluster.
type Cluster struct {
	Name string // A, B, ...
	// Bootstrap lists the PLAINTEXT listeners. On a secure cluster these
	// still accept unauthenticated clients, as super users.
	Bootstrap []string

	// Set on secure clusters only.
	SecureBootstrap []string          // SASL_SSL listeners: SCRAM-SHA-512 and PLAIN
	CAFile          string            // PEM CA certificate that signed the brokers' certificates
	Users           map[string]string // user -> password: admin (super user), alice, bob
	SuperUser       string            // "admin"

	// Set with Options.Proxied only: the addresses the brokers' PROXIED
	// listeners advertise. Nothing listens there until the test starts a
	// proxy per node (see ProxyTargets).
	ProxyBootstrap []string

	run    *kafkalocal.Run
	info   *kafkalocal.Cluster
	shared bool
}

func newCluster(run *kafkalocal.Run, c *kafkalocal.Cluster, shared bool) *Cluster {
	tc := &Cluster{Name: c.Name, Bootstrap: c.Bootstrap, ProxyBootstrap: c.ProxyBootstrap, run: run, info: c, shared: shared}
	if c.Secure {
		tc.SecureBootstrap = c.SecureBootstrap
		tc.CAFile = c.CAFile
		tc.Users = map[string]string{}
		for _, u := range c.Users {
			tc.Users[u.Name] = u.Password
			if u.Super {
				tc.SuperUser = u.Name
			}
		}
	}
	return tc
}

// Secure reports whether the cluster has the SASL_SSL listener.
func (c *Cluster) Secure() bool { return c.info.Secure }

// Nodes returns the node ids, which are also the broker ids (1, 2, ...).
func (c *Cluster) Nodes() []int32 {
	var ids []int32
	for _, n := range c.info.Nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

// Info returns everything kafkalocal knows about the cluster: ports, pids,
// node folders and logs.
func (c *Cluster) Info() *kafkalocal.Cluster { return c.info }

// Client returns a client of the PLAINTEXT listeners, closed at cleanup.
// opts come after the seed brokers, so they may replace them.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap...)}, opts...)...)
	if err != nil {
		t.Fatalf("testkafka: new client for cluster %s: %v", c.Name, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of the PLAINTEXT listeners.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// TLSConfig trusts the cluster's CA; it fails the test on a cluster that
// is not secure.
func (c *Cluster) TLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	if !c.Secure() {
		t.Fatalf("testkafka: cluster %s is not secure", c.Name)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatalf("testkafka: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("testkafka: no certificate in %s", c.CAFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// SASL returns client options for the SASL_SSL listeners with mechanism
// "SCRAM-SHA-512" or "PLAIN"; pass them to Client:
//
//	c.Client(t, c.SASL(t, "SCRAM-SHA-512", "alice", c.Users["alice"])...)
func (c *Cluster) SASL(t testing.TB, mechanism, user, password string) []kgo.Opt {
	t.Helper()
	var m sasl.Mechanism
	switch strings.ToUpper(mechanism) {
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	case "PLAIN":
		m = plain.Auth{User: user, Pass: password}.AsMechanism()
	default:
		t.Fatalf("testkafka: SASL mechanism %q: want SCRAM-SHA-512 or PLAIN", mechanism)
	}
	return []kgo.Opt{
		kgo.SeedBrokers(c.SecureBootstrap...),
		kgo.DialTLSConfig(c.TLSConfig(t)),
		kgo.SASL(m),
	}
}

// ReplicationFactor is the replication factor CreateTopic uses: the number
// of nodes, at most 3.
func (c *Cluster) ReplicationFactor() int16 { return int16(min(3, len(c.info.Nodes))) }

// CreateTopic creates a topic with ReplicationFactor replicas and waits
// until all its partitions have a leader.
func (c *Cluster) CreateTopic(t testing.TB, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.Client(t)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, c.ReplicationFactor(), configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("testkafka: create topic %s on cluster %s: %v", name, c.Name, err)
	}
	for {
		md, err := directMetadata(ctx, cl, name)
		if err == nil && len(md.Topics) == 1 && md.Topics[0].ErrorCode == 0 && int32(len(md.Topics[0].Partitions)) == partitions {
			ready := true
			for _, p := range md.Topics[0].Partitions {
				ready = ready && p.Leader >= 0 && p.ErrorCode == 0
			}
			if ready {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testkafka: topic %s on cluster %s has no leaders after a minute", name, c.Name)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// directMetadata asks a broker for the topics' metadata, bypassing the
// client's metadata cache.
func directMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl)
}

// Produce writes the records (each with its Topic set) with acks=all and
// fails the test on any error.
func (c *Cluster) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A topic created a moment ago may be unknown to its leader for a
	// while on a loaded machine: retried until ctx ends.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap...), kgo.UnknownTopicRetries(-1))
	if err != nil {
		t.Fatalf("testkafka: %v", err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("testkafka: produce %d records to cluster %s: %v", len(recs), c.Name, err)
	}
}

// ReadAll returns the records of every partition of topic, from the log
// start up to the end offsets at call time, as a read_committed consumer
// sees them (no aborted or control records), sorted by partition then
// offset. If a transaction is open, it reads up to where it starts. It
// gives up after 3 minutes (a cluster that has just restarted recovers its
// logs first).
func (c *Cluster) ReadAll(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	from, end := c.readRange(ctx, t, topic)
	if len(from) == 0 {
		return nil
	}
	recs := c.readPartitions(ctx, t, topic, from, end)
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	return recs
}

// readRange returns, for each partition of topic that has records to
// read, the offset to read from and the end offset to read up to.
func (c *Cluster) readRange(ctx context.Context, t testing.TB, topic string) (map[int32]kgo.Offset, map[int32]int64) {
	t.Helper()
	adm := c.Admin(t)
	// While a node is down or restarting its partitions may have no
	// reachable leader for a few seconds, and a topic just created may not
	// be known to every node yet: listing is retried, an unknown topic for
	// 10 s only.
	unknownUntil := time.Now().Add(10 * time.Second)
	starts := c.listOffsets(ctx, t, topic, "start", unknownUntil, adm.ListStartOffsets)
	// For read_committed, ListOffsets(latest) is the last stable offset.
	ends := c.listOffsets(ctx, t, topic, "end", unknownUntil, adm.ListCommittedOffsets)
	from := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
			end[o.Partition] = o.Offset
		}
	})
	return from, end
}

// listOffsets lists the what ("start" or "end") offsets of topic with fn,
// retrying until ctx ends, or on an unknown topic until unknownUntil.
func (c *Cluster) listOffsets(ctx context.Context, t testing.TB, topic, what string, unknownUntil time.Time,
	fn func(context.Context, ...string) (kadm.ListedOffsets, error)) kadm.ListedOffsets {
	t.Helper()
	for {
		offs, err := fn(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			return offs
		}
		if ctx.Err() != nil || errors.Is(err, kerr.UnknownTopicOrPartition) && time.Now().After(unknownUntil) {
			t.Fatalf("testkafka: list %s offsets of %s on cluster %s: %v", what, topic, c.Name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readPartitions reads the partitions of topic from the offsets in from
// up to the offsets in end, as a read_committed consumer, and returns
// the records that are not control records. It deletes each partition
// from end once read.
func (c *Cluster) readPartitions(ctx context.Context, t testing.TB, topic string, from map[int32]kgo.Offset, end map[int32]int64) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records tell us that a partition ending with a
		// transaction marker has been read to its end.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		t.Fatalf("testkafka: %v", err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	pending := len(end)
	for pending > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("testkafka: ReadAll(%s) on cluster %s: timed out with %d partitions unread (want end offsets %v)", topic, c.Name, pending, end)
		}
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("testkafka: ReadAll(%s) partition %d on cluster %s: %v", tp, p, c.Name, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !ok || r.Offset >= e {
				return
			}
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
			if r.Offset == e-1 {
				delete(end, r.Partition)
				pending--
			}
		})
	}
	return recs
}

// StopNode stops a node with a controlled shutdown (SIGTERM).
func (c *Cluster) StopNode(t testing.TB, id int32) { t.Helper(); c.stop(t, id, false) }

// KillNode kills a node with SIGKILL.
func (c *Cluster) KillNode(t testing.TB, id int32) { t.Helper(); c.stop(t, id, true) }

func (c *Cluster) stop(t testing.TB, id int32, kill bool) {
	t.Helper()
	if c.shared {
		t.Fatalf("testkafka: cluster %s is shared; start a dedicated one with testkafka.Start to stop nodes", c.Name)
	}
	if err := c.run.StopNode(c.Name, id, kill, kafkalocal.DefaultStopTimeout); err != nil {
		t.Fatalf("testkafka: stop node %d of cluster %s: %v", id, c.Name, err)
	}
}

// StartNode starts stopped nodes again, all at once (a controller quorum
// needs a majority of them), and waits until each is a live broker of the
// cluster.
func (c *Cluster) StartNode(t testing.TB, ids ...int32) {
	t.Helper()
	if c.shared {
		t.Fatalf("testkafka: cluster %s is shared; start a dedicated one with testkafka.Start", c.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.run.StartNodes(ctx, c.Name, ids, true); err != nil {
		t.Fatalf("testkafka: start nodes %v of cluster %s: %v", ids, c.Name, err)
	}
}

// Kcat runs kcat against the cluster's PLAINTEXT listeners (-b is added).
func (c *Cluster) Kcat(t testing.TB, args ...string) []byte {
	t.Helper()
	return Kcat(t, append([]string{"-b", strings.Join(c.Bootstrap, ",")}, args...)...)
}

// Kcat runs kcat with args and returns its standard output. It fails the
// test if kcat is missing, fails, or runs longer than two minutes.
func Kcat(t testing.TB, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		if bin, err = exec.LookPath("kafkacat"); err != nil {
			t.Fatalf("testkafka: kcat is not installed; install it with `apt-get install -y kcat` (.ci/run does)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testkafka: kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// String returns the cluster name and bootstrap servers.
func (c *Cluster) String() string {
	return fmt.Sprintf("%s(%s)", c.Name, strings.Join(c.Bootstrap, ","))
}

// AddUser creates the SCRAM-SHA-512 user name with a random password on a
// secure cluster and returns the password once the SASL_SSL listener
// accepts it. Tests on shared secure clusters name their users with Topic
// (unique per test) and grant ACLs only to them (principal "User:"+name),
// so that parallel tests cannot see each other's grants. PLAIN knows only
// the built-in users.
func (c *Cluster) AddUser(t testing.TB, name string) (password string) {
	t.Helper()
	if !c.Secure() {
		t.Fatalf("testkafka: cluster %s is not secure", c.Name)
	}
	password = randomHex(16)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := c.Admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: name, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password,
	}})
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatalf("testkafka: add user %s on cluster %s: %v", name, c.Name, err)
	}
	cl, err := kgo.NewClient(c.SASL(t, "SCRAM-SHA-512", name, password)...)
	if err != nil {
		t.Fatalf("testkafka: %v", err)
	}
	defer cl.Close()
	for {
		err := cl.Ping(ctx)
		if err == nil {
			return password
		}
		if ctx.Err() != nil {
			t.Fatalf("testkafka: user %s on cluster %s cannot log in a minute after it was made: %v", name, c.Name, err)
		}
		select { // the credentials are still on their way to the broker
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Grant creates the ACLs acl builds on the cluster (as its super user) and
// returns once the broker's authorizer lists them (acl is then changed to
// describe them): CreateACLs answers when
// the controller has committed them, and the broker applies them a moment
// later, so a client that logs in at once may still be refused.
func (c *Cluster) Grant(t testing.TB, acl *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := c.Admin(t)
	rs, err := adm.CreateACLs(ctx, acl)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("testkafka: create ACLs on cluster %s: %v", c.Name, err)
	}
	if !acl.HasHosts() {
		// Created for every host; described with any host.
		acl.AllowHosts().DenyHosts()
	}
	for {
		listed := 0
		ds, err := adm.DescribeACLs(ctx, acl)
		if err == nil {
			for _, d := range ds {
				if d.Err != nil {
					err = d.Err
					break
				}
				listed += len(d.Described)
			}
		}
		if err == nil && listed >= len(rs) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testkafka: ACLs on cluster %s not listed by the broker a minute after they were created (%d of %d listed): %v", c.Name, listed, len(rs), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

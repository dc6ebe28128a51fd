// Package testkafka gives kmirror's integration tests real Apache Kafka
// clusters on 127.0.0.1, started from the Maven-resolved Kafka jars by
// internal/kafkalocal.
//
// Tests share single-node clusters through Shared, and a pair of secure
// ones (SASL_SSL, ACLs) through SharedSecure, or start their own with Start
// when they need several nodes, a special broker configuration, or to stop
// nodes. Every
// package that uses it has
//
//	func TestMain(m *testing.M) { testkafka.Main(m) }
//
// When KMIRROR_TEST_CLUSTERS names the clusters.json of a run folder
// (make test sets it), Shared uses those clusters instead of starting any.
// Tests are skipped only when KMIRROR_SKIP_INTEGRATION=1; any failure to
// get brokers fails the test.
package testkafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// Environment variables the harness reads.
const (
	// EnvClusters is the path of a run folder's clusters.json (or the
	// folder) whose clusters Shared returns instead of starting its own.
	EnvClusters = "KMIRROR_TEST_CLUSTERS"
	// EnvSkip, set to 1, skips every test that needs brokers.
	EnvSkip = "KMIRROR_SKIP_INTEGRATION"
)

// startTimeout bounds how long clusters may take to become ready.
const startTimeout = 4 * time.Minute

// Options says which dedicated clusters Start runs.
type Options struct {
	Clusters int               // default 1
	Nodes    int               // per cluster; default 1
	Secure   bool              // add the SASL_SSL listener, users and ACLs
	Config   map[string]string // extra broker settings
	JVMFlags []string          // extra JVM flags for the nodes, e.g. -Dname=value
	// Version is an older Kafka release to run (kafkalocal.KRaftVersions,
	// kafkalocal.ZooKeeperVersions); "" runs KafkaVersion.
	Version string
	// Proxied gives every node a listener advertised at a proxy's address
	// (kafkalocal.Options.Proxied); see Cluster.ProxyBootstrap.
	Proxied bool
}

// KafkaVersion is the Apache Kafka release the harness runs.
func KafkaVersion() string { return kafkalocal.KafkaVersion }

var shared struct {
	mu       sync.Mutex
	clusters []*Cluster
	dirs     []string // run folders this process started
	err      error
}

// Main runs the tests, then stops the shared clusters (plain and secure)
// this test binary started, and exits. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	for _, dir := range shared.dirs {
		if _, err := kafkalocal.Down(dir, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "testkafka:", err)
		}
		if code == 0 {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintln(os.Stderr, "testkafka: shared cluster logs kept in", dir)
		}
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// Shared returns n single-node clusters shared by all tests of the test
// binary; tests must use unique topic and group names (see Topic). They are
// the clusters of $KMIRROR_TEST_CLUSTERS if set, else started on first use
// and stopped by Main. Their nodes cannot be stopped.
func Shared(t testing.TB, n int) []*Cluster {
	t.Helper()
	skipIfDisabled(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.err != nil {
		t.Fatalf("testkafka: shared clusters failed to start earlier: %v", shared.err)
	}
	if path := os.Getenv(EnvClusters); path != "" {
		if shared.clusters == nil {
			run, err := kafkalocal.Load(path)
			if err != nil {
				t.Fatalf("testkafka: %s=%s: %v", EnvClusters, path, err)
			}
			for _, c := range run.Clusters {
				shared.clusters = append(shared.clusters, newCluster(run, c, true))
			}
		}
		if len(shared.clusters) < n {
			t.Fatalf("testkafka: %s describes %d clusters; this test needs %d", EnvClusters, len(shared.clusters), n)
		}
		return shared.clusters[:n]
	}
	if missing := n - len(shared.clusters); missing > 0 {
		var names []string
		for i := range missing {
			names = append(names, string(rune('A'+len(shared.clusters)+i)))
		}
		run, err := startShared(t, names)
		if err != nil {
			shared.err = err
			t.Fatalf("testkafka: start shared clusters: %v", err)
		}
		for _, c := range run.Clusters {
			shared.clusters = append(shared.clusters, newCluster(run, c, true))
		}
	}
	return shared.clusters[:n]
}

// OAuthModule is the JAAS login module of SASL/OAUTHBEARER; the brokers of
// SharedSecure accept its unsecured test mode (unsecuredLoginStringClaim_sub
// names the principal, no token is checked).
const OAuthModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

var sharedSecure struct {
	mu       sync.Mutex
	clusters []*Cluster
	err      error
}

// SharedSecure returns two secure single-node clusters (Options.Secure:
// SASL_SSL with SCRAM-SHA-512, PLAIN and OAUTHBEARER in its unsecured test
// mode, TLS from the run's CA, the StandardAuthorizer with
// allow.everyone.if.no.acl.found=false) shared by all tests of the test
// binary. They are started on first use, also when $KMIRROR_TEST_CLUSTERS
// is set, and stopped by Main; their nodes cannot be stopped.
//
// Tests on them use unique topic and group names (Topic) and, to grant
// ACLs, principals of their own (AddUser), never the built-in alice and
// bob, so that parallel tests never see each other's grants. The super
// user admin may be used as is.
func SharedSecure(t testing.TB) []*Cluster {
	t.Helper()
	skipIfDisabled(t)
	sharedSecure.mu.Lock()
	defer sharedSecure.mu.Unlock()
	if sharedSecure.err != nil {
		t.Fatalf("testkafka: shared secure clusters failed to start earlier: %v", sharedSecure.err)
	}
	if sharedSecure.clusters != nil {
		return sharedSecure.clusters
	}
	dir, err := runDir("shared-secure")
	if err == nil {
		shared.mu.Lock()
		shared.dirs = append(shared.dirs, dir) // stopped by Main, even after a failed start
		shared.mu.Unlock()
		var run *kafkalocal.Run
		run, err = up(t, kafkalocal.Options{Clusters: 2, Nodes: 1, Secure: true, Dir: dir, Config: map[string]string{
			"listener.name.sasl_ssl.sasl.enabled.mechanisms":      "SCRAM-SHA-512,PLAIN,OAUTHBEARER",
			"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": OAuthModule + ` required unsecuredLoginStringClaim_sub="broker";`,
		}})
		if err == nil {
			for _, c := range run.Clusters {
				sharedSecure.clusters = append(sharedSecure.clusters, newCluster(run, c, true))
			}
		}
	}
	if err != nil {
		sharedSecure.err = err
		t.Fatalf("testkafka: start shared secure clusters: %v", err)
	}
	return sharedSecure.clusters
}

func startShared(t testing.TB, names []string) (*kafkalocal.Run, error) {
	dir, err := runDir("shared")
	if err != nil {
		return nil, err
	}
	shared.dirs = append(shared.dirs, dir)
	return up(t, kafkalocal.Options{Names: names, Nodes: 1, Dir: dir})
}

// Start starts dedicated clusters for this test and stops them at cleanup.
// Their logs are kept when the test fails.
func Start(t testing.TB, opts Options) []*Cluster {
	t.Helper()
	skipIfDisabled(t)
	dir, err := runDir(sanitize(t.Name(), 40))
	if err != nil {
		t.Fatalf("testkafka: %v", err)
	}
	t.Cleanup(func() {
		if _, err := kafkalocal.Down(dir, 10*time.Second); err != nil {
			t.Errorf("testkafka: stop clusters: %v", err)
		}
		if t.Failed() {
			t.Logf("testkafka: cluster logs kept in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	})
	run, err := up(t, kafkalocal.Options{
		Clusters: opts.Clusters, Nodes: opts.Nodes, Secure: opts.Secure, Config: opts.Config, Dir: dir,
		JVMOpts: jvmOpts(opts.JVMFlags),
		Version: opts.Version, Proxied: opts.Proxied,
	})
	if err != nil {
		t.Fatalf("testkafka: start clusters: %v", err)
	}
	var cs []*Cluster
	for _, c := range run.Clusters {
		cs = append(cs, newCluster(run, c, false))
	}
	return cs
}

// jvmOpts is kafkalocal's default JVM options followed by flags; nil keeps
// the default.
func jvmOpts(flags []string) []string {
	if len(flags) == 0 {
		return nil
	}
	return append(slices.Clone(kafkalocal.DefaultJVMOpts), flags...)
}

// up starts clusters that die with this process.
func up(t testing.TB, opts kafkalocal.Options) (*kafkalocal.Run, error) {
	libs, err := resolveLibs()
	if opts.Version != "" && opts.Version != kafkalocal.KafkaVersion {
		libs, err = resolveVersionLibs(opts.Version)
	}
	if err != nil {
		return nil, err
	}
	opts.Libs = libs
	opts.DieWithParent = true
	opts.Timeout = startTimeout
	opts.Log = logWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+time.Minute)
	defer cancel()
	start := time.Now()
	run, err := kafkalocal.Up(ctx, opts)
	if err == nil {
		t.Logf("testkafka: %d Kafka %s cluster(s) of %d node(s) up in %s (%s)",
			len(run.Clusters), run.KafkaVersion, max(opts.Nodes, 1), time.Since(start).Round(time.Millisecond), run.Dir)
	}
	return run, err
}

// runDir makes a fresh run folder: beside $KMIRROR_TEST_CLUSTERS when set,
// so that "kafka-local down" on that folder also stops clusters a crashed
// test binary left behind; else under .run/testkafka in the repository.
func runDir(prefix string) (string, error) {
	var base string
	if path := os.Getenv(EnvClusters); path != "" {
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			path = filepath.Dir(path)
		}
		base = filepath.Join(path, "tests")
	} else {
		root, err := kafkalocal.FindRoot()
		if err != nil {
			return "", err
		}
		base = filepath.Join(root, ".run", "testkafka")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(base, prefix+"-")
}

var libs struct {
	mu  sync.Mutex
	dir string
}

// resolveLibs returns the jar folder: the one of $KMIRROR_TEST_CLUSTERS if
// set, else the Maven cache, resolving it if needed.
func resolveLibs() (string, error) {
	libs.mu.Lock()
	defer libs.mu.Unlock()
	if libs.dir != "" {
		return libs.dir, nil
	}
	if path := os.Getenv(EnvClusters); path != "" {
		if run, err := kafkalocal.Load(path); err == nil && run.Libs != "" {
			libs.dir = run.Libs
			return libs.dir, nil
		}
	}
	root, err := kafkalocal.FindRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := kafkalocal.ResolveLibs(ctx, root, os.Stderr)
	if err != nil {
		return "", err
	}
	libs.dir = dir
	return dir, nil
}

// resolveVersionLibs returns the jar folder of an older Kafka release,
// resolving it with Maven on first use.
func resolveVersionLibs(version string) (string, error) {
	root, err := kafkalocal.FindRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return kafkalocal.ResolveVersionLibs(ctx, root, version, os.Stderr)
}

// MM2FastStart returns the lines the tests add to an Apache MM2
// configuration (props): Connect finds its plugins by their ServiceLoader
// manifests instead of scanning every class of the classpath. Every
// plugin of the Kafka jars has one (Connect's own warning says so). MM2
// makes a worker per cluster it writes to, from that cluster's keys, so
// the key is set for every alias of the clusters line and at top level.
// Measured side by side at load 40: MM2 started in 12 s with it, 104 s
// without (each worker's scan took 25-41 s; loaded run 3 timed out
// waiting 3 minutes for MM2's first checkpoint).
func MM2FastStart(props string) string {
	const line = "plugin.discovery = service_load\n"
	out := "\n" + line
	for _, l := range strings.Split(props, "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(k) != "clusters" {
			continue
		}
		for _, alias := range strings.Split(v, ",") {
			if alias = strings.TrimSpace(alias); alias != "" {
				out += alias + "." + line
			}
		}
	}
	return out
}

// Libs returns the folder of the Apache Kafka jars (broker, tools,
// MirrorMaker 2, Log4j2); the classpath is Libs(t)+"/*".
func Libs(t testing.TB) string {
	t.Helper()
	skipIfDisabled(t)
	dir, err := resolveLibs()
	if err != nil {
		t.Fatalf("testkafka: resolve Kafka jars: %v", err)
	}
	return dir
}

var topicSeq atomic.Int64

// Topic returns a topic name unique across tests and runs, made of prefix,
// the test name and a random suffix. It has no dots, so replication
// policies never mistake part of it for a cluster alias.
func Topic(t testing.TB, prefix string) string {
	if prefix == "" {
		prefix = "t"
	}
	return fmt.Sprintf("%s-%s-%d%s", prefix, sanitize(t.Name(), 60), topicSeq.Add(1), randomHex(3))
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

func sanitize(s string, n int) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if len(s) > n {
		s = s[:n]
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

var skipNotice sync.Once

func skipIfDisabled(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvSkip) != "1" {
		return
	}
	skipNotice.Do(func() {
		fmt.Fprintf(os.Stderr, "\n!!! testkafka: %s=1 - SKIPPING every test that needs real Kafka brokers !!!\n\n", EnvSkip)
	})
	t.Skipf("SKIPPED: needs real Kafka brokers and %s=1", EnvSkip)
}

// logWriter sends progress lines to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

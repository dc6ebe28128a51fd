package kafkalocal

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Old Kafka releases for compatibility tests. Each has its own Maven
// project, scripts/kafka/<version>/pom.xml, resolved into
// .cache/kafka-<version>/libs only when that version is asked for. Versions
// before KRaft run on ZooKeeper: one ZooKeeper process per cluster, started
// from the same jar folder.

// ZooKeeperVersions lists the releases Up starts on ZooKeeper, with what a
// broker of that version needs on Java 17 besides the jars (nothing so far).
var ZooKeeperVersions = []string{"0.11.0.3", "1.1.1", "2.8.2"}

// KRaftVersions lists the old KRaft releases Up starts like the pinned one.
var KRaftVersions = []string{"3.9.1"}

// isZooKeeper reports whether version runs on ZooKeeper.
func isZooKeeper(version string) bool {
	for _, v := range ZooKeeperVersions {
		if v == version {
			return true
		}
	}
	return false
}

// legacyVersion reports whether version is an old release Up knows.
func legacyVersion(version string) bool {
	if isZooKeeper(version) {
		return true
	}
	for _, v := range KRaftVersions {
		if v == version {
			return true
		}
	}
	return false
}

// VersionPomPath is the Maven project of an old Kafka version, relative to
// the repository root.
func VersionPomPath(version string) string {
	return filepath.Join("scripts", "kafka", version, "pom.xml")
}

// ResolveVersionLibs is ResolveLibs for any version Up knows: the pinned
// one ("" too), or an old one from its own pom into .cache/kafka-<version>/libs.
// $KMIRROR_KAFKA_LIBS applies to the pinned version only.
func ResolveVersionLibs(ctx context.Context, root, version string, log io.Writer) (string, error) {
	if version == "" || version == KafkaVersion {
		return ResolveLibs(ctx, root, log)
	}
	if !legacyVersion(version) {
		return "", fmt.Errorf("kafkalocal: unknown Kafka version %q (known: %s, %s, %s)", version,
			KafkaVersion, strings.Join(KRaftVersions, ", "), strings.Join(ZooKeeperVersions, ", "))
	}
	if log == nil {
		log = io.Discard
	}
	pomFile := filepath.Join(root, VersionPomPath(version))
	pom, err := os.ReadFile(pomFile)
	if err != nil {
		return "", err
	}
	if v := pomVersion(pom); v != version {
		return "", fmt.Errorf("kafkalocal: %s pins Kafka %q, not %q", VersionPomPath(version), v, version)
	}
	libs := filepath.Join(root, ".cache", "kafka-"+version, "libs")
	return resolvePom(ctx, pomFile, pom, libs, version, checkBrokerLibs, log)
}

// checkBrokerLibs makes sure dir holds an old broker's jars.
func checkBrokerLibs(dir string) error {
	m, _ := filepath.Glob(filepath.Join(dir, "kafka_2.1*.jar"))
	if len(m) == 0 {
		return fmt.Errorf("kafkalocal: no kafka_2.1x-*.jar in %s", dir)
	}
	return nil
}

// log4j 1 configuration for releases before Kafka 4 (which ignore the
// log4j2 file).
const log4j1Config = `# Written by kafka-local: INFO to stdout, which goes to the node's server.log.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.controller=WARN
log4j.logger.state.change.logger=WARN
`

// legacyJVMOpts writes the log4j 1 file into dir and returns the options
// that use it.
func legacyJVMOpts(dir string) ([]string, error) {
	p := filepath.Join(dir, "log4j.properties")
	if err := os.WriteFile(p, []byte(log4j1Config), 0o644); err != nil {
		return nil, err
	}
	return []string{"-Dlog4j.configuration=file:" + p}, nil
}

// upZooKeeper is Up for a release on ZooKeeper: per cluster one ZooKeeper
// (its folder RUNDIR/<cluster>/zookeeper holds a config named
// server.properties, so Down finds and stops it like a node) and the
// brokers, node ids 1..M.
func upZooKeeper(ctx context.Context, opts Options, log io.Writer) (*Run, error) {
	if opts.Secure {
		return nil, fmt.Errorf("kafkalocal: --secure is not supported for Kafka %s", opts.Version)
	}
	dir, err := prepareDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	libs, err := filepath.Abs(opts.Libs)
	if err != nil {
		return nil, err
	}
	run := &Run{KafkaVersion: opts.Version, Libs: libs, Dir: dir}
	ports, err := FreePorts(opts.Clusters * (opts.Nodes + 1))
	if err != nil {
		return nil, err
	}
	extraOpts, err := legacyJVMOpts(dir)
	if err != nil {
		return nil, err
	}
	jvm := append(append([]string{javaPath()}, opts.JVMOpts...), extraOpts...)
	jvm = append(jvm, "-cp", filepath.Join(libs, "*"))
	for i := range opts.Clusters {
		var c *Cluster
		if c, ports, err = newZooKeeperCluster(clusterName(opts, i), opts, ports, dir, jvm); err != nil {
			return nil, err
		}
		run.Clusters = append(run.Clusters, c)
	}

	start := time.Now()
	if err := startZooKeeperRun(ctx, run, opts); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "kafka-local: %d Kafka %s cluster(s) of %d node(s) on ZooKeeper ready in %s\n",
		opts.Clusters, opts.Version, opts.Nodes, time.Since(start).Round(time.Millisecond))
	return run, nil
}

// newZooKeeperCluster describes and configures a cluster's ZooKeeper and brokers, returning the ports it did not take.
func newZooKeeperCluster(name string, opts Options, ports []int, dir string, jvm []string) (*Cluster, []int, error) {
	c := &Cluster{Name: name}
	zk := &Node{Port: ports[0], Dir: filepath.Join(dir, name, "zookeeper")}
	ports = ports[1:]
	zk.Command = append(append([]string{}, jvm...), "org.apache.zookeeper.server.ZooKeeperServerMain", propsPath(zk.Dir))
	zkProps := map[string]string{
		"dataDir": filepath.Join(zk.Dir, "data"), "clientPort": strconv.Itoa(zk.Port),
		"clientPortAddress": "127.0.0.1", "tickTime": "2000", "maxClientCnxns": "0",
		"admin.enableServer": "false", "4lw.commands.whitelist": "*",
	}
	if err := writeProps(zk, zkProps, nil, "ZooKeeper of cluster "+name); err != nil {
		return nil, nil, err
	}
	c.ZooKeeper = zk
	rf := min(3, opts.Nodes)
	for j := range opts.Nodes {
		n := &Node{ID: int32(j + 1), Port: ports[0]}
		ports = ports[1:]
		n.Dir = filepath.Join(dir, name, "node-"+strconv.Itoa(int(n.ID)))
		n.Command = append(append([]string{}, jvm...), "kafka.Kafka", propsPath(n.Dir))
		if err := writeProps(n, zooKeeperBrokerProps(n, zk, rf), opts.Config, fmt.Sprintf("cluster %s node %d", name, n.ID)); err != nil {
			return nil, nil, err
		}
		c.Nodes = append(c.Nodes, n)
		c.Bootstrap = append(c.Bootstrap, hostPort(n.Port))
	}
	return c, ports, nil
}

// zooKeeperBrokerProps returns the config of broker n on ZooKeeper zk.
func zooKeeperBrokerProps(n, zk *Node, rf int) map[string]string {
	p := map[string]string{
		"broker.id":                       strconv.Itoa(int(n.ID)),
		"zookeeper.connect":               hostPort(zk.Port),
		"zookeeper.connection.timeout.ms": "30000",
		"listeners":                       fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port),
	}
	maps.Copy(p, brokerBase(n, rf))
	return p
}

// startZooKeeperRun starts the ZooKeepers, then the brokers, and waits for them; on error it stops them again.
func startZooKeeperRun(ctx context.Context, run *Run, opts Options) error {
	ok := false
	defer func() {
		if !ok {
			Down(run.Dir, 5*time.Second)
		}
	}()
	for _, c := range run.Clusters {
		if err := launch(c.ZooKeeper, opts.DieWithParent); err != nil {
			return err
		}
	}
	if err := run.Save(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	for _, c := range run.Clusters {
		if err := waitListening(wctx, c.ZooKeeper); err != nil {
			return err
		}
		for _, n := range c.Nodes {
			if err := launch(n, opts.DieWithParent); err != nil {
				return err
			}
		}
	}
	if err := run.Save(); err != nil {
		return err
	}
	if err := waitClusters(wctx, run); err != nil {
		return err
	}
	ok = true
	return nil
}

// writeProps writes base overridden by extra as n's server.properties and
// makes its data folder.
func writeProps(n *Node, base, extra map[string]string, what string) error {
	if err := os.MkdirAll(filepath.Join(n.Dir, "data"), 0o755); err != nil {
		return err
	}
	for k, v := range extra {
		base[k] = v
	}
	keys := make([]string, 0, len(base))
	for k := range base {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by kafka-local for %s.\n", what)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, escapeProp(base[k]))
	}
	return os.WriteFile(propsPath(n.Dir), []byte(b.String()), 0o644)
}

// waitListening waits until n accepts TCP connections on its port.
func waitListening(ctx context.Context, n *Node) error {
	for {
		if !n.Alive() {
			return fmt.Errorf("kafkalocal: %s (pid %d) exited; tail of its server.log:\n%s", n.Dir, n.PID, logTail(n.Dir, 40))
		}
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dctx, "tcp", hostPort(n.Port))
		cancel()
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkalocal: %s not listening on %d: %w", n.Dir, n.Port, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

package kafkalocal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultJVMOpts keep a node small and quick to start, so that two 3-node
// clusters fit on two cores. C1-only compilation trades peak speed for
// startup time; benchmarks should pass their own Options.JVMOpts.
var DefaultJVMOpts = []string{
	"-Xms128m", "-Xmx512m",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-XX:+ExitOnOutOfMemoryError",
	"-XX:-UsePerfData",
	"-Djava.awt.headless=true",
}

// Options says which clusters Up starts.
type Options struct {
	Clusters int // number of independent clusters, named A, B, C...; default 1
	// Names overrides the cluster names; when set, Clusters may be zero.
	Names   []string
	Nodes   int  // nodes per cluster, each broker and controller; default 1
	Secure  bool // add a SASL_SSL listener with SCRAM-SHA-512, PLAIN and ACLs
	Dir     string
	Libs    string            // folder of jars (ResolveLibs)
	Config  map[string]string // extra server.properties entries, override the defaults
	JVMOpts []string          // default DefaultJVMOpts
	// NoCDS turns off the class data sharing archive that speeds up JVM
	// starts (see cds.go).
	NoCDS bool
	// DieWithParent makes the kernel kill the nodes when the calling
	// process exits (test binaries); otherwise they outlive it.
	DieWithParent bool
	Timeout       time.Duration // for the clusters to become ready; default 3m
	Log           io.Writer     // progress messages; nil discards
	// Version is the Kafka release the jars in Libs are: "" for the
	// pinned KafkaVersion, else one of KRaftVersions or ZooKeeperVersions
	// (see legacy.go).
	Version string
	// Proxied gives every node one more listener, PROXIED, bound on
	// Node.ProxiedPort but advertised at Node.ProxyPort, where nothing
	// listens: the caller runs a TCP proxy there that forwards to
	// ProxiedPort. Clients that bootstrap from Cluster.ProxyBootstrap thus
	// reach every broker through the proxies (network faults in tests).
	Proxied bool
}

// Users that a secure cluster knows. admin is a super user; the others have
// no ACLs until a test grants some.
var secureUsers = []struct {
	name  string
	super bool
}{{"admin", true}, {"alice", false}, {"bob", false}}

// Up formats and starts the clusters in the run folder opts.Dir, waits
// until every cluster lists all its brokers, and saves clusters.json and
// clusters.env there. The folder must be empty, missing, or a previous run
// folder with nothing running; it is wiped. On error, the nodes it started
// are stopped again.
func Up(ctx context.Context, opts Options) (*Run, error) {
	if err := opts.fillDefaults(); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	if isZooKeeper(opts.Version) {
		return upZooKeeper(ctx, opts, log)
	}
	run, err := prepareRun(&opts)
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(opts.Clusters * opts.Nodes * portsPerNode(opts))
	if err != nil {
		return nil, err
	}
	java, log4j, keystore, err := writeRunFiles(ctx, run, &opts, log)
	if err != nil {
		return nil, err
	}
	for i := range opts.Clusters {
		var c *Cluster
		c, ports = newCluster(clusterName(opts, i), opts, ports, run, java, log4j)
		if err := writeServerProperties(c, opts.Config, keystore); err != nil {
			return nil, err
		}
		run.Clusters = append(run.Clusters, c)
	}

	start := time.Now()
	if err := formatAll(ctx, run, java, opts.JVMOpts, log4j); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "kafka-local: formatted %d node(s) in %s\n", opts.Clusters*opts.Nodes, time.Since(start).Round(time.Millisecond))
	if err := startNodes(ctx, run, opts); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "kafka-local: %d cluster(s) of %d node(s) ready in %s\n", opts.Clusters, opts.Nodes, time.Since(start).Round(time.Millisecond))
	return run, nil
}

// fillDefaults sets the options left unset to their defaults and checks
// the cluster count, the jar folder and the version.
func (o *Options) fillDefaults() error {
	if len(o.Names) > 0 {
		o.Clusters = len(o.Names)
	}
	if o.Clusters <= 0 {
		o.Clusters = 1
	}
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.Clusters > 26 && len(o.Names) == 0 {
		return errors.New("kafkalocal: at most 26 clusters")
	}
	if o.JVMOpts == nil {
		o.JVMOpts = DefaultJVMOpts
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Libs == "" {
		return errors.New("kafkalocal: Options.Libs is empty")
	}
	if o.oldVersion() && !legacyVersion(o.Version) {
		return fmt.Errorf("kafkalocal: unknown Kafka version %q", o.Version)
	}
	return nil
}

// oldVersion reports whether o.Version asks for a release other than the
// pinned one.
func (o *Options) oldVersion() bool {
	return o.Version != "" && o.Version != KafkaVersion
}

// prepareRun makes the run folder and the Run of a KRaft release; for an
// older release it adds the log4j 1 options and turns CDS off.
func prepareRun(opts *Options) (*Run, error) {
	dir, err := prepareDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	libs, err := filepath.Abs(opts.Libs)
	if err != nil {
		return nil, err
	}
	run := &Run{KafkaVersion: KafkaVersion, Libs: libs, Dir: dir}
	if opts.oldVersion() { // an older KRaft release: log4j 1, no CDS archive
		extra, err := legacyJVMOpts(dir)
		if err != nil {
			return nil, err
		}
		opts.JVMOpts, opts.NoCDS, run.KafkaVersion = append(extra, opts.JVMOpts...), true, opts.Version
	}
	return run, nil
}

// portsPerNode is how many ports a KRaft node of opts listens on.
func portsPerNode(opts Options) int {
	n := 2
	if opts.Secure {
		n++
	}
	if opts.Proxied {
		n += 2
	}
	return n
}

// writeRunFiles writes the log4j config and TLS files all nodes share and adds the CDS options to opts.JVMOpts.
func writeRunFiles(ctx context.Context, run *Run, opts *Options, log io.Writer) (java, log4j, keystore string, err error) {
	log4j = filepath.Join(run.Dir, "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(log4jConfig), 0o644); err != nil {
		return "", "", "", err
	}
	keystore = filepath.Join(run.Dir, "tls", "server.pem")
	if opts.Secure {
		if err := writeTLS(filepath.Join(run.Dir, CAFile), keystore); err != nil {
			return "", "", "", err
		}
	}
	java = javaPath()
	if !opts.NoCDS {
		opts.JVMOpts = append(ensureCDS(ctx, java, run.Libs, opts.JVMOpts, log), opts.JVMOpts...)
	}
	return java, log4j, keystore, nil
}

// clusterName is the name of the i-th cluster: opts.Names[i], else A, B...
func clusterName(opts Options, i int) string {
	if len(opts.Names) > 0 {
		return opts.Names[i]
	}
	return string(rune('A' + i))
}

// newCluster describes a KRaft cluster and its nodes, taking their ports
// from the front of ports; it returns the ports left.
func newCluster(name string, opts Options, ports []int, run *Run, java, log4j string) (*Cluster, []int) {
	c := &Cluster{Name: name, ClusterID: newClusterID(), Secure: opts.Secure}
	for j := range opts.Nodes {
		n := &Node{ID: int32(j + 1), Port: ports[0], ControllerPort: ports[1]}
		ports = ports[2:]
		if opts.Secure {
			n.SecurePort, ports = ports[0], ports[1:]
		}
		if opts.Proxied {
			n.ProxiedPort, n.ProxyPort, ports = ports[0], ports[1], ports[2:]
			c.ProxyBootstrap = append(c.ProxyBootstrap, hostPort(n.ProxyPort))
		}
		n.Dir = filepath.Join(run.Dir, c.Name, "node-"+strconv.Itoa(int(n.ID)))
		n.Command = append(append([]string{java}, opts.JVMOpts...), javaProps(run.Libs, log4j, n.Dir)...)
		n.Command = append(n.Command, "kafka.Kafka", propsPath(n.Dir))
		c.Nodes = append(c.Nodes, n)
		c.Bootstrap = append(c.Bootstrap, hostPort(n.Port))
		if opts.Secure {
			c.SecureBootstrap = append(c.SecureBootstrap, hostPort(n.SecurePort))
		}
	}
	if opts.Secure {
		c.CAFile = filepath.Join(run.Dir, CAFile)
		for _, u := range secureUsers {
			c.Users = append(c.Users, User{Name: u.name, Password: u.name + "-" + randomHex(6), Super: u.super})
		}
	}
	return c, ports
}

// writeServerProperties makes each node's data folder and writes its
// server.properties.
func writeServerProperties(c *Cluster, extra map[string]string, keystore string) error {
	for _, n := range c.Nodes {
		if err := os.MkdirAll(filepath.Join(n.Dir, "data"), 0o755); err != nil {
			return err
		}
		props := serverProperties(c, n, extra, keystore)
		if err := os.WriteFile(propsPath(n.Dir), []byte(props), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startNodes launches every node, saves the run and waits until each
// cluster lists all its brokers. On error it stops the nodes again.
func startNodes(ctx context.Context, run *Run, opts Options) error {
	ok := false
	defer func() {
		if !ok {
			Down(run.Dir, 5*time.Second)
		}
	}()
	for _, c := range run.Clusters {
		for _, n := range c.Nodes {
			if err := launch(n, opts.DieWithParent); err != nil {
				return err
			}
		}
	}
	if err := run.Save(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := waitClusters(wctx, run); err != nil {
		return err
	}
	ok = true
	return nil
}

// waitClusters waits, for all clusters at once, until each lists all its
// brokers.
func waitClusters(ctx context.Context, run *Run) error {
	errs := make([]error, len(run.Clusters))
	var wg sync.WaitGroup
	for i, c := range run.Clusters {
		wg.Go(func() { errs[i] = waitBrokers(ctx, c, c.Nodes) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareDir makes dir an empty run folder. It refuses a folder with live
// nodes, or a non-empty folder that is not a run folder.
func prepareDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("kafkalocal: no run folder")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, markFile)); err != nil {
			return "", fmt.Errorf("kafkalocal: %s is not empty and not a kafka-local run folder", dir)
		}
		live, err := livePIDs(dir)
		if err != nil {
			return "", err
		}
		if len(live) > 0 {
			return "", fmt.Errorf("kafkalocal: %d nodes still run in %s; run down first", len(live), dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, markFile), nil, 0o644)
}

// formatAll runs kafka.tools.StorageTool format for every node, two at a
// time; SCRAM credentials are written into the bootstrap metadata there.
func formatAll(ctx context.Context, run *Run, java string, jvmOpts []string, log4j string) error {
	type job struct {
		c *Cluster
		n *Node
	}
	var jobs []job
	for _, c := range run.Clusters {
		for _, n := range c.Nodes {
			jobs = append(jobs, job{c, n})
		}
	}
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			args := append(append([]string{}, jvmOpts...), javaProps(run.Libs, log4j, j.n.Dir)...)
			args = append(args, "kafka.tools.StorageTool", "format",
				"--cluster-id", j.c.ClusterID, "--config", propsPath(j.n.Dir))
			for _, u := range j.c.Users {
				args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u.Name, u.Password))
			}
			out, err := exec.CommandContext(ctx, java, args...).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("kafkalocal: format %s/node-%d: %w\n%s", j.c.Name, j.n.ID, err, out)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitBrokers waits until each node in nodes answers a Metadata request on
// its own PLAINTEXT port listing every node of the cluster as a live
// broker. Asking the node itself matters after a restart: the others keep
// listing a killed broker until its session times out. It fails early when
// one of the processes exits.
func waitBrokers(ctx context.Context, c *Cluster, nodes []*Node) error {
	var last error
	for _, n := range nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(hostPort(n.Port)), kgo.DialTimeout(2*time.Second), kgo.RequestRetries(0))
		if err != nil {
			return err
		}
		defer cl.Close()
		seed := cl.SeedBrokers()[0]
		for {
			if !n.Alive() && !aliveAfter(n, time.Second) {
				return fmt.Errorf("kafkalocal: cluster %s node %d (pid %d) exited; tail of %s:\n%s",
					c.Name, n.ID, n.PID, filepath.Join(n.Dir, "server.log"), logTail(n.Dir, 40))
			}
			if last = brokersListed(ctx, seed, c); last == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafkalocal: cluster %s node %d not ready: %v (last: %v); tail of %s:\n%s",
					c.Name, n.ID, ctx.Err(), last, filepath.Join(n.Dir, "server.log"), logTail(n.Dir, 40))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// brokersListed asks one broker for metadata and checks that it lists all
// nodes of c.
func brokersListed(ctx context.Context, b *kgo.Broker, c *Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return err
	}
	have := map[int32]bool{}
	for _, br := range resp.(*kmsg.MetadataResponse).Brokers {
		have[br.NodeID] = true
	}
	var missing []string
	for _, n := range c.Nodes {
		if !have[n.ID] {
			missing = append(missing, strconv.Itoa(int(n.ID)))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("brokers %s not live yet", strings.Join(missing, ","))
	}
	return nil
}

// serverProperties renders a node's config: combined KRaft roles, static
// quorum, replication factors that fit the node count, small thread pools.
func serverProperties(c *Cluster, n *Node, extra map[string]string, keystore string) string {
	rf := min(3, len(c.Nodes))
	minISR := min(2, rf)
	var voters []string
	for _, v := range c.Nodes {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", v.ID, v.ControllerPort))
	}
	p := map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        strconv.Itoa(int(n.ID)),
		"controller.quorum.voters":       strings.Join(voters, ","),
		"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.Port, n.ControllerPort),
		"controller.listener.names":      "CONTROLLER",
		"inter.broker.listener.name":     "PLAINTEXT",
		"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"share.coordinator.state.topic.replication.factor": strconv.Itoa(rf),
		"share.coordinator.state.topic.min.isr":            strconv.Itoa(minISR),
	}
	maps.Copy(p, brokerBase(n, rf))
	if c.Secure {
		p["listeners"] += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", n.SecurePort)
		p["advertised.listeners"] += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", n.SecurePort)
		p["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
		p["sasl.enabled.mechanisms"] = "SCRAM-SHA-512,PLAIN"
		p["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = "SCRAM-SHA-512,PLAIN"
		p["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		plain := "org.apache.kafka.common.security.plain.PlainLoginModule required"
		supers := []string{"User:ANONYMOUS"} // PLAINTEXT and CONTROLLER clients
		for _, u := range c.Users {
			plain += fmt.Sprintf(" user_%s=%q", u.Name, u.Password)
			if u.Super {
				supers = append(supers, "User:"+u.Name)
			}
		}
		p["listener.name.sasl_ssl.plain.sasl.jaas.config"] = plain + ";"
		p["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
		p["listener.name.sasl_ssl.ssl.keystore.location"] = keystore
		p["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		p["super.users"] = strings.Join(supers, ";")
		p["allow.everyone.if.no.acl.found"] = "false"
	}
	if n.ProxiedPort != 0 {
		p["listeners"] += fmt.Sprintf(",PROXIED://127.0.0.1:%d", n.ProxiedPort)
		p["advertised.listeners"] += fmt.Sprintf(",PROXIED://127.0.0.1:%d", n.ProxyPort)
		p["listener.security.protocol.map"] += ",PROXIED:PLAINTEXT"
	}
	for k, v := range extra {
		p[k] = v
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by kafka-local for cluster %s node %d.\n", c.Name, n.ID)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, escapeProp(p[k]))
	}
	return b.String()
}

// escapeProp escapes a java.util.Properties value.
func escapeProp(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(v)
}

const log4jConfig = `# Written by kafka-local: INFO to stdout, which goes to the node's server.log.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
`

// brokerBase is what every broker gets, KRaft or ZooKeeper: its
// advertised listener and data folder, replication factors that fit rf,
// small thread pools.
func brokerBase(n *Node, rf int) map[string]string {
	return map[string]string{
		"advertised.listeners":                     fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port),
		"log.dirs":                                 filepath.Join(n.Dir, "data"),
		"num.partitions":                           "1",
		"default.replication.factor":               strconv.Itoa(rf),
		"offsets.topic.replication.factor":         strconv.Itoa(rf),
		"offsets.topic.num.partitions":             "10",
		"transaction.state.log.replication.factor": strconv.Itoa(rf),
		"transaction.state.log.min.isr":            strconv.Itoa(min(2, rf)),
		"transaction.state.log.num.partitions":     "10",
		"group.initial.rebalance.delay.ms":         "0",
		"num.network.threads":                      "2",
		"num.io.threads":                           "4",
		"num.recovery.threads.per.data.dir":        "1",
		"background.threads":                       "4",
		"log.cleaner.threads":                      "1",
		"log.cleaner.dedupe.buffer.size":           strconv.Itoa(16 << 20),
	}
}

// javaProps returns the -D options and classpath shared by all JVMs of a node.
func javaProps(libs, log4j, nodeDir string) []string {
	return []string{
		"-Dlog4j2.configurationFile=file:" + log4j,
		"-Dkafka.logs.dir=" + filepath.Join(nodeDir, "logs"),
		"-cp", filepath.Join(libs, "*"),
	}
}

func javaPath() string {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p
	}
	return "java"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// newClusterID returns a random Kafka UUID in its base64 text form, never
// starting with '-' (the CLI would read it as a flag).
func newClusterID() string {
	for {
		b := make([]byte, 16)
		rand.Read(b)
		id := base64.RawURLEncoding.EncodeToString(b)
		if id[0] != '-' {
			return id
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

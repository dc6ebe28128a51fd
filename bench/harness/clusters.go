package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/bench/latproxy"
	"github.com/kmirror/kmirror/internal/kafkalocal"
)

// BrokerJVMOpts are the JVM options of the benchmark's brokers: those of
// Kafka's kafka-server-start.sh and kafka-run-class.sh, not kafkalocal's
// small start-up-friendly defaults.
var BrokerJVMOpts = []string{
	"-Xms1g", "-Xmx1g",
	"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-XX:+ExitOnOutOfMemoryError",
	"-Djava.awt.headless=true",
}

// Clusters are the source and target clusters of a benchmark, each one
// node, and the delaying proxies in front of the source.
type Clusters struct {
	Run *kafkalocal.Run
	// SourceRun holds the source when it runs an older Kafka release
	// (StartClusters' srcVersion); Run then holds only the target.
	SourceRun *kafkalocal.Run
	Source    string // bootstrap of the source, direct
	Target    string // bootstrap of the target, direct
	// Delayed maps a one-way delay to the bootstrap of the source through
	// a proxy adding it. The source broker has one more listener per
	// delay (WAN0, WAN1, ...) whose advertised address is that proxy, so
	// clients that bootstrap there stay behind it.
	Delayed map[time.Duration]string
	proxies []*latproxy.Proxy
}

// StartClusters brings up clusters "src" and "dst" in dir, adds a listener
// per delay to the source broker (a restart: KRaft brokers cannot change
// advertised.listeners dynamically) and starts a proxy in front of each
// that delays each direction by that delay.
//
// With srcVersion (an older release, jars in srcLibs), the source runs that
// release in dir/src and the target the pinned one in dir/dst; delays are
// then refused.
func StartClusters(ctx context.Context, dir, libs string, delays []time.Duration, srcVersion, srcLibs string, log io.Writer) (*Clusters, error) {
	if srcVersion != "" {
		return startOldSource(ctx, dir, libs, delays, srcVersion, srcLibs, log)
	}
	run, err := kafkalocal.Up(ctx, kafkalocal.Options{
		Names: []string{"src", "dst"}, Nodes: 1, Dir: dir, Libs: libs,
		JVMOpts: BrokerJVMOpts, DieWithParent: true, Log: log,
	})
	if err != nil {
		return nil, err
	}
	c := &Clusters{Run: run, Delayed: map[time.Duration]string{}}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	src, dst := run.Cluster("src"), run.Cluster("dst")
	c.Source, c.Target = strings.Join(src.Bootstrap, ","), strings.Join(dst.Bootstrap, ",")
	if len(delays) == 0 {
		ok = true
		return c, nil
	}

	ports, err := kafkalocal.FreePorts(2 * len(delays))
	if err != nil {
		return nil, err
	}
	n := src.Nodes[0]
	listeners := []string{fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port), fmt.Sprintf("CONTROLLER://127.0.0.1:%d", n.ControllerPort)}
	advertised := []string{fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port)}
	protocols := []string{"CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"}
	for i := range delays {
		name := fmt.Sprintf("WAN%d", i)
		listeners = append(listeners, fmt.Sprintf("%s://127.0.0.1:%d", name, ports[2*i]))
		advertised = append(advertised, fmt.Sprintf("%s://127.0.0.1:%d", name, ports[2*i+1]))
		protocols = append(protocols, name+":PLAINTEXT")
	}
	extra := "\n# Added by kbench: listeners reached through delaying proxies.\n" +
		"listeners=" + strings.Join(listeners, ",") + "\n" +
		"advertised.listeners=" + strings.Join(advertised, ",") + "\n" +
		"listener.security.protocol.map=" + strings.Join(protocols, ",") + "\n"
	if err := run.StopNode("src", n.ID, false, 30*time.Second); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(n.Dir, "server.properties"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(extra)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := run.StartNode(sctx, "src", n.ID, true); err != nil {
		return nil, err
	}
	for i, d := range delays {
		p, err := latproxy.Start(latproxy.Options{
			Listen: "127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			Target: "127.0.0.1:" + strconv.Itoa(ports[2*i]),
			Delay:  d,
		})
		if err != nil {
			return nil, err
		}
		c.proxies = append(c.proxies, p)
		c.Delayed[d] = p.Addr()
	}
	ok = true
	return c, nil
}

// startOldSource starts a source of Kafka srcVersion and a target of the
// pinned release, one node each.
func startOldSource(ctx context.Context, dir, libs string, delays []time.Duration, srcVersion, srcLibs string, log io.Writer) (*Clusters, error) {
	if len(delays) > 0 {
		return nil, fmt.Errorf("workloads with a delay cannot run with source version %s", srcVersion)
	}
	c := &Clusters{Delayed: map[time.Duration]string{}}
	src, err := kafkalocal.Up(ctx, kafkalocal.Options{
		Names: []string{"src"}, Nodes: 1, Dir: filepath.Join(dir, "src"), Libs: srcLibs, Version: srcVersion,
		// Before 1.0 topics cannot be deleted by default; the harness
		// deletes them between workloads.
		Config:  map[string]string{"delete.topic.enable": "true"},
		JVMOpts: BrokerJVMOpts, DieWithParent: true, Log: log,
	})
	if err != nil {
		return nil, err
	}
	c.SourceRun = src
	dst, err := kafkalocal.Up(ctx, kafkalocal.Options{
		Names: []string{"dst"}, Nodes: 1, Dir: filepath.Join(dir, "dst"), Libs: libs,
		JVMOpts: BrokerJVMOpts, DieWithParent: true, Log: log,
	})
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.Run = dst
	c.Source = strings.Join(src.Cluster("src").Bootstrap, ",")
	c.Target = strings.Join(dst.Cluster("dst").Bootstrap, ",")
	return c, nil
}

// DelayedRTT measures the round trip of a small request to the source
// broker through the proxy that adds delay (the median of five on a warm
// connection), to show the delay is in the path.
func (c *Clusters) DelayedRTT(ctx context.Context, delay time.Duration) (time.Duration, error) {
	addr, ok := c.Delayed[delay]
	if !ok {
		return 0, fmt.Errorf("no proxy adds %v", delay)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var rtts []time.Duration
	for i := range 6 {
		start := time.Now()
		if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl); err != nil {
			return 0, err
		}
		if i > 0 { // the first also dials
			rtts = append(rtts, time.Since(start))
		}
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], nil
}

// SourceFor is the source bootstrap a replicator uses for w.
func (c *Clusters) SourceFor(w Workload) string {
	if w.Delay > 0 {
		return c.Delayed[w.Delay]
	}
	return c.Source
}

// Stop stops the proxies and every broker and removes the brokers' data.
func (c *Clusters) Stop() {
	for _, p := range c.proxies {
		p.Close()
	}
	for _, r := range []*kafkalocal.Run{c.SourceRun, c.Run} {
		if r == nil {
			continue
		}
		kafkalocal.Down(r.Dir, 30*time.Second)
		// The brokers' logs stay; their data (gigabytes per run) goes.
		dirs, _ := filepath.Glob(filepath.Join(r.Dir, "*", "node-*", "data"))
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
}

// BrokerPIDs are the process ids of the source and target brokers.
func (c *Clusters) BrokerPIDs() (src, dst int) {
	srcRun := c.Run
	if c.SourceRun != nil {
		srcRun = c.SourceRun
	}
	return srcRun.Cluster("src").Nodes[0].PID, c.Run.Cluster("dst").Nodes[0].PID
}

package kafkalocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Class data sharing (CDS) roughly halves the CPU a node spends starting:
// the classes a broker loads are dumped once into an archive that later
// JVMs map instead of parsing and verifying the jars again. A JVM that
// cannot use the archive (other JDK, other jars) warns and runs without it.

// cdsArchive returns the archive path for these jars and this JVM.
func cdsArchive(java, libs string) string {
	real, err := filepath.EvalSymlinks(java)
	if err != nil {
		real = java
	}
	sum := sha256.Sum256([]byte(real + "\x00" + libs))
	return filepath.Join(filepath.Dir(libs), filepath.Base(libs)+".cds-"+hex.EncodeToString(sum[:6])+".jsa")
}

// ensureCDS returns JVM options that use the CDS archive, creating it
// first if needed by starting and stopping a throwaway single-node
// cluster. On any failure it logs and returns no options: CDS only speeds
// things up.
func ensureCDS(ctx context.Context, java, libs string, jvmOpts []string, log io.Writer) []string {
	archive := cdsArchive(java, libs)
	use := []string{"-XX:SharedArchiveFile=" + archive, "-Xshare:auto"}
	if fileExists(archive) {
		return use
	}
	unlock, err := lockFile(archive + ".lock")
	if err != nil {
		fmt.Fprintf(log, "kafka-local: no CDS archive: %v\n", err)
		return nil
	}
	defer unlock()
	if fileExists(archive) {
		return use
	}
	start := time.Now()
	if err := dumpCDS(ctx, java, libs, jvmOpts, archive); err != nil {
		fmt.Fprintf(log, "kafka-local: no CDS archive, nodes start slower: %v\n", err)
		return nil
	}
	fmt.Fprintf(log, "kafka-local: wrote CDS archive %s in %s\n", archive, time.Since(start).Round(time.Millisecond))
	return use
}

// dumpCDS runs one node with -XX:ArchiveClassesAtExit until it serves,
// then stops it so that the JVM writes the archive as it exits.
func dumpCDS(ctx context.Context, java, libs string, jvmOpts []string, archive string) error {
	dir, err := os.MkdirTemp(filepath.Dir(archive), "cds-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	log4j := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(log4jConfig), 0o644); err != nil {
		return err
	}
	n := &Node{ID: 1, Port: ports[0], ControllerPort: ports[1], Dir: filepath.Join(dir, "node-1")}
	c := &Cluster{Name: "CDS", ClusterID: newClusterID(), Bootstrap: []string{hostPort(n.Port)}, Nodes: []*Node{n}}
	if err := os.MkdirAll(filepath.Join(n.Dir, "data"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(propsPath(n.Dir), []byte(serverProperties(c, n, nil, "")), 0o644); err != nil {
		return err
	}
	run := &Run{Libs: libs, Dir: dir, Clusters: []*Cluster{c}}
	if err := formatAll(ctx, run, java, jvmOpts, log4j); err != nil {
		return err
	}
	tmp := archive + ".tmp"
	os.Remove(tmp)
	n.Command = append([]string{java, "-XX:ArchiveClassesAtExit=" + tmp}, jvmOpts...)
	n.Command = append(append(n.Command, javaProps(libs, log4j, n.Dir)...), "kafka.Kafka", propsPath(n.Dir))
	if err := launch(n, true); err != nil {
		return err
	}
	defer syscall.Kill(n.PID, syscall.SIGKILL) // if anything below fails
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitBrokers(wctx, c, c.Nodes); err != nil {
		return err
	}
	if err := stopAll(map[string]int{n.Dir: n.PID}, syscall.SIGTERM, time.Minute); err != nil {
		return err
	}
	if !fileExists(tmp) {
		return fmt.Errorf("the JVM wrote no archive; see %s", logTail(n.Dir, 20))
	}
	return os.Rename(tmp, archive)
}

// Command kafka-local starts and stops real Apache Kafka clusters on
// 127.0.0.1 for kmirror's tests and demos. scripts/kafka-local builds and
// runs it; see docs/testing.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/internal/kafkalocal"
)

const usage = `kafka-local: real Apache Kafka ` + kafkalocal.KafkaVersion + ` clusters on 127.0.0.1

Usage:
  kafka-local up [--clusters N] [--nodes M] [--secure] [--config k=v]... [--dir RUNDIR]
        format and start N clusters (A, B, ...) of M KRaft broker+controller
        nodes; print their bootstrap servers and write RUNDIR/clusters.json
        and RUNDIR/clusters.env
  kafka-local up --version V [--clusters N] [--nodes M] ...
        an older Kafka instead (docs/compatibility.md): 0.11.0.3, 1.1.1 and
        2.8.2 on ZooKeeper (one per cluster), 3.9.1 on KRaft; jars from
        scripts/kafka/V/pom.xml, fetched on first use
  kafka-local down [--dir RUNDIR] [--timeout 20s]
        stop every node started under RUNDIR (SIGTERM, then SIGKILL)
  kafka-local status [--dir RUNDIR]
  kafka-local stop-node [--kill] [--dir RUNDIR] CLUSTER NODEID...
  kafka-local start-node [--dir RUNDIR] CLUSTER NODEID...   (several start together)
  kafka-local libs      resolve the Kafka jars with Maven; print their folder

RUNDIR defaults to .run/local in the repository.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := kafkalocal.FindRoot()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("kafka-local "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &command{ctx: ctx, name: cmd, root: root, fs: fs, stdout: stdout, stderr: stderr}
	c.dir = fs.String("dir", filepath.Join(root, ".run", "local"), "run folder")
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "libs":
		return c.libs(args)
	case "up":
		return c.up(args)
	case "down":
		return c.down(args)
	case "status":
		return c.status(args)
	case "stop-node", "start-node":
		return c.nodes(args)
	default:
		fmt.Fprintf(stderr, "kafka-local: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

// command is one run of a kafka-local command: its name and flags (--dir
// already defined), the repository root and where it writes.
type command struct {
	ctx            context.Context
	name, root     string
	fs             *flag.FlagSet
	dir            *string
	stdout, stderr io.Writer
}

// libs resolves the Kafka jars and prints their folder.
func (c *command) libs(args []string) int {
	if c.fs.Parse(args) != nil {
		return 2
	}
	libs, err := kafkalocal.ResolveLibs(c.ctx, c.root, c.stderr)
	if err != nil {
		return fail(c.stderr, err)
	}
	fmt.Fprintln(c.stdout, libs)
	return 0
}

// up starts the clusters and prints them.
func (c *command) up(args []string) int {
	fs := c.fs
	clusters := fs.Int("clusters", 1, "number of clusters")
	nodes := fs.Int("nodes", 1, "nodes per cluster")
	secure := fs.Bool("secure", false, "add a SASL_SSL listener with SCRAM-SHA-512/PLAIN users and ACLs")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait for the clusters")
	version := fs.String("version", kafkalocal.KafkaVersion, "Kafka release to start (older ones: docs/compatibility.md)")
	config := map[string]string{}
	fs.Func("config", "extra broker setting k=v (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("want k=v, got %q", s)
		}
		config[k] = v
		return nil
	})
	if fs.Parse(args) != nil {
		return 2
	}
	libs, err := kafkalocal.ResolveVersionLibs(c.ctx, c.root, *version, c.stderr)
	if err != nil {
		return fail(c.stderr, err)
	}
	start := time.Now()
	r, err := kafkalocal.Up(c.ctx, kafkalocal.Options{
		Clusters: *clusters, Nodes: *nodes, Secure: *secure, Dir: *c.dir,
		Libs: libs, Config: config, Timeout: *timeout, Log: c.stderr, Version: *version,
	})
	if err != nil {
		return fail(c.stderr, err)
	}
	printRun(c.stdout, r)
	fmt.Fprintf(c.stdout, "\nup in %s; state in %s\n", time.Since(start).Round(time.Millisecond), filepath.Join(r.Dir, kafkalocal.StateFile))
	fmt.Fprintf(c.stdout, "source %s  # for KAFKA_A_BOOTSTRAP, KMIRROR_TEST_CLUSTERS, ...\n", filepath.Join(r.Dir, kafkalocal.EnvFile))
	return 0
}

// down stops every node of the run folder.
func (c *command) down(args []string) int {
	timeout := c.fs.Duration("timeout", kafkalocal.DefaultStopTimeout, "SIGKILL nodes still running after this")
	if c.fs.Parse(args) != nil {
		return 2
	}
	start := time.Now()
	n, err := kafkalocal.Down(*c.dir, *timeout)
	if err != nil {
		return fail(c.stderr, err)
	}
	fmt.Fprintf(c.stdout, "stopped %d node(s) under %s in %s\n", n, *c.dir, time.Since(start).Round(time.Millisecond))
	return 0
}

// status prints the clusters of the run folder.
func (c *command) status(args []string) int {
	if c.fs.Parse(args) != nil {
		return 2
	}
	r, err := kafkalocal.Load(*c.dir)
	if err != nil {
		return fail(c.stderr, err)
	}
	printRun(c.stdout, r)
	return 0
}

// nodes stops (stop-node) or starts (start-node) nodes of a cluster.
func (c *command) nodes(args []string) int {
	fs := c.fs
	kill := fs.Bool("kill", false, "SIGKILL instead of a controlled shutdown")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() < 2 {
		fmt.Fprintf(c.stderr, "kafka-local %s: want CLUSTER NODEID...\n", c.name)
		return 2
	}
	ids, err := nodeIDs(fs.Args()[1:])
	if err != nil {
		return fail(c.stderr, err)
	}
	r, err := kafkalocal.Load(*c.dir)
	if err != nil {
		return fail(c.stderr, err)
	}
	if c.name == "stop-node" {
		for _, id := range ids {
			if err = r.StopNode(fs.Arg(0), id, *kill, kafkalocal.DefaultStopTimeout); err != nil {
				break
			}
		}
	} else {
		// Together: a quorum whose nodes all stopped needs a
		// majority back before any of them serves.
		ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
		defer cancel()
		err = r.StartNodes(ctx, fs.Arg(0), ids, false)
	}
	if err != nil {
		return fail(c.stderr, err)
	}
	fmt.Fprintf(c.stdout, "%s: cluster %s node(s) %v\n", c.name, fs.Arg(0), ids)
	return 0
}

// nodeIDs parses node ids.
func nodeIDs(args []string) ([]int32, error) {
	var ids []int32
	for _, a := range args {
		id, err := strconv.Atoi(a)
		if err != nil {
			return nil, fmt.Errorf("bad node id %q", a)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

func printRun(w io.Writer, r *kafkalocal.Run) {
	fmt.Fprintf(w, "Kafka %s, jars in %s\n", r.KafkaVersion, r.Libs)
	for _, c := range r.Clusters {
		fmt.Fprintf(w, "cluster %s  bootstrap %s\n", c.Name, strings.Join(c.Bootstrap, ","))
		if c.Secure {
			fmt.Fprintf(w, "  SASL_SSL %s  CA %s\n", strings.Join(c.SecureBootstrap, ","), c.CAFile)
			for _, u := range c.Users {
				fmt.Fprintf(w, "  user %s password %s super=%t (SCRAM-SHA-512, PLAIN)\n", u.Name, u.Password, u.Super)
			}
		}
		for _, n := range c.Nodes {
			state := "down"
			if n.Alive() {
				state = "up"
			}
			fmt.Fprintf(w, "  node %d  port %d  controller %d", n.ID, n.Port, n.ControllerPort)
			if n.SecurePort != 0 {
				fmt.Fprintf(w, "  secure %d", n.SecurePort)
			}
			fmt.Fprintf(w, "  pid %d %s  %s\n", n.PID, state, n.Dir)
		}
	}
}

func fail(w io.Writer, err error) int {
	fmt.Fprintln(w, "kafka-local:", err)
	return 1
}

// Command kmirror replicates topics and consumer group offsets between Apache
// Kafka clusters, driven by MirrorMaker 2 configuration files.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/kmirror/kmirror/internal/version"
)

const usage = `kmirror: cross-cluster replication for Apache Kafka

Usage:
  kmirror run [--clusters ALIAS,...] [--log-format text|json] [--rest-addr ADDR]
              [--metrics-addr ADDR] [--memory-limit SIZE] [--shutdown-timeout 30s] FILE
                         run every enabled flow of an MM2 properties file;
                         SIGHUP reloads it, SIGTERM stops cleanly (waiting at most
                         --shutdown-timeout; a second SIGTERM exits at once)
  kmirror connect [--log-format text|json] [--metrics-addr ADDR] [--shutdown-timeout 30s]
                  WORKER-FILE
                         a Kafka Connect-compatible REST API (port 8083 by default)
                         for MM2's connectors, configs kept in the worker file's
                         config.storage.topic (docs/operations.md#connect-rest-api);
                         SIGTERM stops as kmirror run's does
  kmirror check [--connect] [--timeout 60s] FILE
                         validate FILE and print what each flow will do; --connect
                         also reaches every cluster (broker versions, missing
                         permissions, topics it would create); exit 1 on a problem
  kmirror mm1 --consumer.config FILE --producer.config FILE --whitelist REGEX [...]
                         MirrorMaker 1's command line (kafka-mirror-maker.sh flags);
                         "kmirror mm1 --help" lists them
  kmirror offsets --config FILE --group G --from A --to B [--apply [--allow-rewind]]
                  [--use checkpoints|translate] [--output text|json] [--timeout 30s]
                         print G's offsets on B translated from A; --apply commits
                         them to G on B (refused while G has active members on B);
                         for failback (--from B --to A with A->B in the file) the
                         A->B offset syncs are read in reverse
  kmirror topology --config FILE [--output text|json] [--timeout 15s]
                         which clusters replicate to which, from the heartbeats
  kmirror verify --config FILE [--flow A->B] [--topics REGEX] [--output text|json]
                         compare every copied source record with the target;
                         exit 1 if a record is missing or foreign
  kmirror cutover plan|status|switch FILE --flow A->B [--groups REGEX] [--topics REGEX]
                  [--window 5s] [--verify N|all|none] [--dry-run] [--report-dir DIR]
                         a migration or failover of one flow: plan (what moves),
                         status (the readiness gate), switch (commit the idle
                         groups' translated offsets on B, refuse active ones);
                         exit 0 ok, 1 error, 2 usage, 3 not ready or refused
                         (docs/failover.md)
  kmirror version        print the version and git commit
  kmirror help           print this help
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "kmirror", version.String())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	case "run":
		return runCmd(args[1:], stdout, stderr)
	case "connect":
		return connectCmd(args[1:], stdout, stderr)
	case "check":
		return checkCmd(args[1:], stdout, stderr)
	case "mm1":
		return mm1Cmd(args[1:], stdout, stderr)
	case "offsets":
		return offsetsCmd(args[1:], stdout, stderr)
	case "topology":
		return topologyCmd(args[1:], stdout, stderr)
	case "verify":
		return verifyCmd(args[1:], stdout, stderr)
	case "cutover":
		return cutoverCmd(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "kmirror: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// Package kafkalocal runs real Apache Kafka clusters on 127.0.0.1 from the
// Maven-resolved Kafka jars: KRaft nodes that are broker and controller at
// once, optionally with a SASL_SSL listener (SCRAM-SHA-512 and PLAIN) and
// the StandardAuthorizer.
//
// A run folder holds everything a run needs and produces: per-node configs,
// data and logs, TLS material, and clusters.json / clusters.env describing
// the clusters. Nodes are plain OS processes recorded by pid, so a later
// process (scripts/kafka-local down, a test binary) can stop them.
//
// scripts/kafka-local (cmd/kafka-local) and internal/testkafka both use it.
package kafkalocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// KafkaVersion is the Apache Kafka release that scripts/kafka/pom.xml pins.
const KafkaVersion = "4.3.1"

// PomPath is the Maven project, relative to the repository root, whose
// runtime dependencies are the Kafka jars.
const PomPath = "scripts/kafka/pom.xml"

// EnvLibs names an environment variable pointing at an already resolved
// jar folder; when set, Maven is not run.
const EnvLibs = "KMIRROR_KAFKA_LIBS"

// EnvRoot names an environment variable holding the repository root.
const EnvRoot = "KMIRROR_ROOT"

// FindRoot returns the kmirror repository root: $KMIRROR_ROOT if set, else
// the nearest parent of the working directory holding scripts/kafka/pom.xml.
func FindRoot() (string, error) {
	if r := os.Getenv(EnvRoot); r != "" {
		return filepath.Abs(r)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, PomPath)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kafkalocal: no %s above the working directory; set %s", PomPath, EnvRoot)
		}
		dir = parent
	}
}

// LibsDir is where ResolveLibs puts the jars for the repository at root.
func LibsDir(root string) string {
	return filepath.Join(root, ".cache", "kafka-"+KafkaVersion, "libs")
}

// ResolveLibs returns a folder holding every runtime jar of the Kafka
// broker, tools and MirrorMaker 2. It honours $KMIRROR_KAFKA_LIBS, then
// reuses the cache under root/.cache when it was resolved from the current
// pom, else runs Maven. Concurrent callers (parallel test binaries) are
// serialized by a file lock. Maven output goes to log (may be nil).
func ResolveLibs(ctx context.Context, root string, log io.Writer) (string, error) {
	if d := os.Getenv(EnvLibs); d != "" {
		return d, checkLibs(d)
	}
	if log == nil {
		log = io.Discard
	}
	pom, err := os.ReadFile(filepath.Join(root, PomPath))
	if err != nil {
		return "", err
	}
	if v := pomVersion(pom); v != KafkaVersion {
		return "", fmt.Errorf("kafkalocal: %s pins Kafka %q but kafkalocal.KafkaVersion is %q", PomPath, v, KafkaVersion)
	}
	return resolvePom(ctx, filepath.Join(root, PomPath), pom, LibsDir(root), KafkaVersion, checkLibs, log)
}

// resolvePom copies the runtime dependencies of the Maven project pomFile
// (contents pom) into libs, unless libs was already resolved from the same
// pom and passes check.
func resolvePom(ctx context.Context, pomFile string, pom []byte, libs, version string, check func(string) error, log io.Writer) (string, error) {
	sum := sha256.Sum256(pom)
	stamp := hex.EncodeToString(sum[:])

	base := filepath.Dir(libs)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	stampFile := filepath.Join(base, "libs.pom-sha256")
	if upToDate(libs, stampFile, stamp, check) {
		return libs, nil
	}

	unlock, err := lockFile(filepath.Join(base, "libs.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if upToDate(libs, stampFile, stamp, check) { // someone else resolved meanwhile
		return libs, nil
	}

	tmp, err := os.MkdirTemp(base, "libs.tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(log, "kafka-local: resolving Kafka %s jars with Maven into %s\n", version, libs)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", pomFile,
		"dependency:copy-dependencies", "-DoutputDirectory="+tmp, "-DincludeScope=runtime")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("kafkalocal: Maven (mvn) is needed to fetch the Kafka jars: %w", err)
		}
		return "", fmt.Errorf("kafkalocal: mvn dependency:copy-dependencies: %w\n%s", err, out.String())
	}
	if err := check(tmp); err != nil {
		return "", err
	}
	if err := os.RemoveAll(libs); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, libs); err != nil {
		return "", err
	}
	if err := os.Chmod(libs, 0o755); err != nil {
		return "", err
	}
	// CDS archives of the old jars would be rejected by every JVM.
	old, _ := filepath.Glob(filepath.Join(base, filepath.Base(libs)+".cds-*.jsa"))
	for _, f := range old {
		os.Remove(f)
	}
	return libs, os.WriteFile(stampFile, []byte(stamp+"\n"), 0o644)
}

func upToDate(libs, stampFile, stamp string, check func(string) error) bool {
	b, err := os.ReadFile(stampFile)
	return err == nil && strings.TrimSpace(string(b)) == stamp && check(libs) == nil
}

// checkLibs makes sure dir holds the jars the harness starts classes from.
func checkLibs(dir string) error {
	for _, jar := range []string{"kafka_2.13-", "kafka-tools-", "connect-mirror-", "log4j-core-"} {
		m, _ := filepath.Glob(filepath.Join(dir, jar+"*.jar"))
		if len(m) == 0 {
			return fmt.Errorf("kafkalocal: no %s*.jar in %s", jar, dir)
		}
	}
	return nil
}

var pomVersionRE = regexp.MustCompile(`<kafka\.version>([^<]+)</kafka\.version>`)

func pomVersion(pom []byte) string {
	m := pomVersionRE.FindSubmatch(pom)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(string(m[1]))
}

// lockFile takes an exclusive flock on path and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

package kafkalocal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/up-*.golden")

// fakeJavaEnv, when set, names the file where the test binary, standing in
// for java, records its command lines.
const fakeJavaEnv = "KAFKALOCAL_FAKE_JAVA_LOG"

func TestMain(m *testing.M) {
	if log := os.Getenv(fakeJavaEnv); log != "" {
		os.Exit(fakeJava(log, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeJava records its command line. As the storage tool it succeeds; as
// ZooKeeper it listens on its clientPort until killed; as a broker it
// says so and exits 1.
func fakeJava(log string, args []string) int {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 2
	}
	f.WriteString("java " + strings.Join(args, " ") + "\n")
	f.Close()
	main := ""
	for _, a := range args {
		if strings.Contains(a, ".") && !strings.HasPrefix(a, "-") && !strings.Contains(a, "/") {
			main = a
			break
		}
	}
	switch main {
	case "kafka.tools.StorageTool":
		return 0
	case "org.apache.zookeeper.server.ZooKeeperServerMain":
		b, err := os.ReadFile(args[len(args)-1])
		if err != nil {
			return 2
		}
		port := regexp.MustCompile(`(?m)^clientPort=(\d+)$`).FindSubmatch(b)
		if port == nil {
			return 2
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+string(port[1]))
		if err != nil {
			return 2
		}
		for {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}
	}
	fmt.Println("fake java: no", main, "here")
	return 1
}

// TestUpFakeJava runs Up and upZooKeeper with the test binary for java:
// every file they write, every command they run, their progress log and
// the error when the brokers exit must match testdata/up-NAME.golden.
func TestUpFakeJava(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	java := filepath.Join(home, "bin", "java")
	if err := os.MkdirAll(filepath.Dir(java), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, java); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JAVA_HOME", home)
	tests := []struct {
		name string
		opts Options
	}{
		{"kraft", Options{NoCDS: true}},
		{"kraft-secure-proxied", Options{Names: []string{"east", "west"}, Nodes: 2, Secure: true, Proxied: true, NoCDS: true,
			Config: map[string]string{"auto.create.topics.enable": "false"}, JVMOpts: []string{"-Xmx64m"}}},
		{"kraft-cds", Options{}},
		{"kraft-3.9.1", Options{Version: "3.9.1"}},
		{"zookeeper-2.8.2", Options{Clusters: 2, Nodes: 2, Version: "2.8.2", Config: map[string]string{"num.partitions": "3"}}},
		{"zookeeper-names", Options{Names: []string{"old"}, Version: "0.11.0.3", JVMOpts: []string{"-Xmx64m"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			calls := filepath.Join(root, "calls")
			t.Setenv(fakeJavaEnv, calls)
			o := tt.opts
			o.Dir, o.Libs = filepath.Join(root, "run"), filepath.Join(root, "libs")
			o.DieWithParent, o.Timeout = true, time.Minute
			var log bytes.Buffer
			o.Log = &log
			if err := os.MkdirAll(o.Libs, 0o755); err != nil {
				t.Fatal(err)
			}
			run, err := Up(context.Background(), o)
			if err == nil {
				Down(run.Dir, time.Second)
				t.Fatal("Up succeeded with a fake java")
			}
			var b strings.Builder
			fmt.Fprintf(&b, "== error\n%v\n== log\n%s", err, log.String())
			b.WriteString("== java\n")
			lines, _ := os.ReadFile(calls)
			sorted := strings.Split(strings.TrimSpace(string(lines)), "\n")
			sort.Strings(sorted)
			b.WriteString(strings.Join(sorted, "\n") + "\n")
			filepath.WalkDir(o.Dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(o.Dir, p)
				if d.IsDir() {
					fmt.Fprintf(&b, "== %s/\n", rel)
					return nil
				}
				fmt.Fprintf(&b, "== %s\n", rel)
				if !strings.HasSuffix(p, ".pem") {
					body, _ := os.ReadFile(p)
					b.Write(body)
				}
				return nil
			})
			got := normalizeUp(b.String(), o.Dir, o.Libs, java, exe)
			golden := filepath.Join("testdata", "up-"+tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("differs from %s (go test -run TestUpFakeJava -update to rewrite it):\n%s", golden, got)
			}
		})
	}
}

// normalizeUp replaces what changes from run to run: folders, ports, pids,
// cluster ids, passwords, durations and the pinned Kafka version.
func normalizeUp(s, dir, libs, java, exe string) string {
	s = strings.NewReplacer(dir, "RUN", libs, "LIBS", filepath.Dir(libs), "ROOT", java, "JAVA", exe, "EXE").Replace(s)
	s = strings.NewReplacer(`"kafka_version": "`+KafkaVersion+`"`, `"kafka_version": "KAFKA"`,
		`KAFKA_VERSION='`+KafkaVersion+`'`, `KAFKA_VERSION='KAFKA'`).Replace(s)
	for _, r := range []struct{ re, with string }{
		{`127\.0\.0\.1:\d+`, "127.0.0.1:PORT"},
		{`@127\.0\.0\.1:PORT`, "@127.0.0.1:PORT"},
		{`("(?:port|secure_port|proxied_port|proxy_port|controller_port|pid)"): \d+`, "$1: N"},
		{`clientPort=\d+`, "clientPort=PORT"},
		{`listening on \d+`, "listening on PORT"},
		{`pid \d+`, "pid N"},
		{`(?m)^\d+$`, "N"},
		{`("cluster_id": )"[^"]*"`, `$1"ID"`},
		{`--cluster-id \S+`, "--cluster-id ID"},
		{`\.cds-[0-9a-f]{12}\.jsa`, ".cds-HASH.jsa"},
		{`-[0-9a-f]{12}\b`, "-SECRET"},
		{`cds-run-\d+`, "cds-run-N"},
		{` in [0-9.]+(?:ns|µs|ms|s|m[0-9.]+s)`, " in T"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

// Up's errors before it writes anything.
func TestUpRefuses(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Clusters: 27, Libs: "x", Dir: "d"}, "kafkalocal: at most 26 clusters"},
		{Options{Clusters: 27, Dir: "d"}, "kafkalocal: at most 26 clusters"},
		{Options{Dir: "d", Version: "0.0.1"}, "kafkalocal: Options.Libs is empty"},
		{Options{Libs: "x", Dir: "d", Version: "0.0.1"}, `kafkalocal: unknown Kafka version "0.0.1"`},
		{Options{Libs: "x", Dir: "d", Version: "2.8.2", Secure: true}, "kafkalocal: --secure is not supported for Kafka 2.8.2"},
		{Options{Libs: "x", Version: "2.8.2"}, "kafkalocal: no run folder"},
		{Options{Libs: "x", Version: "3.9.1"}, "kafkalocal: no run folder"},
		{Options{Libs: "x"}, "kafkalocal: no run folder"},
	}
	for _, tt := range tests {
		if _, err := Up(context.Background(), tt.opts); err == nil || err.Error() != tt.want {
			t.Errorf("Up(%+v): %v, want %q", tt.opts, err, tt.want)
		}
	}
}

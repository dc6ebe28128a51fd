package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// The configurations printed in the user's articles (../shared/seeds) are
// kept as printed in testdata/seeds (README.md there maps each file to its
// article). A test replaces only host names, ports, paths and passwords
// that the article leaves to the reader; everything else runs as printed.

// seedFile reads testdata/seeds/name, applies the replacements (old, new
// pairs; each old must occur) and writes the result as base in dir.
func seedFile(t *testing.T, dir, name, base string, repl ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "seeds", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for i := 0; i < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("%s does not hold the placeholder %q", name, repl[i])
		}
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	p := filepath.Join(dir, base)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// noteRE matches a note an article puts after a value or a shell line.
var noteRE = regexp.MustCompile(`[ \t]+#.*$`)

// withoutNotes moves the notes after values ("x=1 # change this") to lines
// of their own, as a reader who follows them does.
func withoutNotes(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if n := noteRE.FindString(l); n != "" && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, strings.TrimSpace(n))
			l = strings.TrimSuffix(l, n)
		}
		out = append(out, l)
	}
	p := path + ".clean"
	if err := os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// shellCommand turns a printed command line into one shell line: notes are
// cut and trailing blanks trimmed, so that each '\' ends its line as the
// author meant, and the lines are joined.
func shellCommand(printed string) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(printed), "\n") {
		l = strings.TrimRight(noteRE.ReplaceAllString(l, ""), " \t")
		parts = append(parts, strings.TrimSuffix(l, `\`))
	}
	return strings.Join(parts, " ")
}

// runWithEnv runs kmirror ARGS with extra environment variables and returns
// its combined output and exit code.
func runWithEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(kmirrorBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	timer := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// checkWarnings returns the "warning: " lines of kmirror check's output, without
// the file name.
func checkWarnings(out, file string) []string {
	var ws []string
	for _, l := range strings.Split(out, "\n") {
		if w, ok := strings.CutPrefix(l, "warning: "); ok {
			ws = append(ws, strings.TrimPrefix(w, file))
		}
	}
	return ws
}

// copied is one topic a seed's flow must copy.
type copied struct {
	from, to           *testkafka.Cluster
	source, remote     string
	partitions, record int
}

// TestSeedsAsPrinted runs every concrete configuration of the articles on
// two 3-node clusters (the seeds' replication factors are 2 and 3) with a
// SASL_SSL listener that also takes SCRAM-SHA-256, the mechanism of seed
// 001's security block: kmirror check passes with exactly the warnings
// listed, or fails with exactly the error listed, and kmirror run or
// kmirror mm1 copies records that are then compared one by one.
func TestSeedsAsPrinted(t *testing.T) {
	t.Parallel()
	const scram256 = "SCRAM-SHA-512,PLAIN,SCRAM-SHA-256"
	cs := testkafka.Start(t, testkafka.Options{Clusters: 2, Nodes: 3, Secure: true, Config: map[string]string{
		"sasl.enabled.mechanisms":                               scram256,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":        scram256,
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		// Seed 001's user replicates everything, as an MM2 user does.
		"super.users": "User:ANONYMOUS;User:admin;User:mm2",
	}})
	a, b := cs[0], cs[1]
	// Seed 001's user and passwords, as printed.
	for c, pw := range map[*testkafka.Cluster]string{a: "mm2-secret", b: "mm2-secret-sz"} {
		res, err := c.Admin(t).AlterUserSCRAMs(ctx(t), nil, []kadm.UpsertSCRAM{{User: "mm2", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pw}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	plainA, plainB := strings.Join(a.Bootstrap, ","), strings.Join(b.Bootstrap, ",")
	secA, secB := strings.Join(a.Info().SecureBootstrap, ","), strings.Join(b.Info().SecureBootstrap, ",")
	// The seeds trust the JVM's CAs; kmirror's are the system's.
	trustCA := []string{"SSL_CERT_FILE=" + a.Info().CAFile}
	n := time.Now().UnixNano() % 100000
	restAddr := freeAddr(t)

	// Seed 001's warnings: Connect worker keys and tasks.max have no effect.
	warn001 := []string{
		`:8: "group.id" has no effect at top level in MirrorMaker 2, nor in kmirror anywhere: it is a Connect worker setting (kmirror connect takes it in its worker file)`,
		`:17: "config.storage.topic" has no effect: kmirror run writes no Connect status or config topics (kmirror connect keeps connectors in its worker file's config.storage.topic)`,
		`:18: "config.storage.replication.factor" has no effect: kmirror run writes no Connect status or config topics (kmirror connect keeps connectors in its worker file's config.storage.topic)`,
		`:21: "status.storage.topic" has no effect: kmirror run writes no Connect status or config topics (kmirror connect keeps connectors in its worker file's config.storage.topic)`,
		`:22: "status.storage.replication.factor" has no effect: kmirror run writes no Connect status or config topics (kmirror connect keeps connectors in its worker file's config.storage.topic)`,
		`:70: "sh->sz.tasks.max" has no effect: kmirror copies all partitions of a flow in one process; share a flow between processes with kmirror.workers = group`,
		`:71: "sz->sh.tasks.max" has no effect: kmirror copies all partitions of a flow in one process; share a flow between processes with kmirror.workers = group`,
	}
	seed001 := func(t *testing.T, hostA, hostB string, security bool, tag string) (string, []copied) {
		file := seedFile(t, t.TempDir(), "001-1.properties", "connect-mirror-maker.properties",
			"sh-kafka1:9092,sh-kafka2:9092,sh-kafka3:9092", hostA,
			"sz-kafka1:9092,sz-kafka2:9092,sz-kafka3:9092", hostB)
		if security { // the article adds its section 4.4 to the file
			sec, err := os.ReadFile(filepath.Join("testdata", "seeds", "001-2.properties"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.Write(append([]byte("\n"), sec...))
				f.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		tag = fmt.Sprintf("%d%s", n, tag)
		// sh->sz copies orders.*|payments.*|users.*; sz->sh every topic
		// but .*test.* and the internal ones.
		orders, users, payments := "orders.created-"+tag, "users-"+tag, "payments.sz-"+tag
		a.CreateTopic(t, orders, 3, nil)
		a.CreateTopic(t, users, 1, nil)
		b.CreateTopic(t, payments, 2, nil)
		return file, []copied{
			{a, b, orders, "sh." + orders, 3, 60},
			{a, b, users, "sh." + users, 1, 20},
			{b, a, payments, "sz." + payments, 2, 40},
		}
	}

	tests := []struct {
		name   string
		setup  func(t *testing.T) (args []string, topics []copied)
		env    []string
		warns  []string                      // kmirror check's warnings, without the file name
		fails  []string                      // the run exits non-zero with these lines (nothing copied)
		logs   []string                      // lines kmirror's log must hold
		lacks  []string                      // what the log must not show
		not    map[string]*testkafka.Cluster // topics a cluster must not have
		during func(t *testing.T)            // called while the flows run
	}{
		{
			name: "000 MM2 file us-west->us-east",
			setup: func(t *testing.T) ([]string, []copied) {
				file := seedFile(t, t.TempDir(), "000-1.properties", "mm2.properties", "host1:9092", plainA, "host2:9092", plainB)
				topic := fmt.Sprintf("clicks-%d", n)
				return []string{"run", "--rest-addr", restAddr, file}, []copied{{a, b, topic, "us-west." + topic, 2, 50}}
			},
			env: []string{"KMIRROR_REST_TOKEN=seed-token"},
			// The article's Connect REST call, sent to kmirror's API.
			during: func(t *testing.T) { connectCall(t, restAddr, readSeed(t, "000-2.http")) },
		},
		{
			name: "001 MM2 file sh<->sz",
			setup: func(t *testing.T) ([]string, []copied) {
				file, topics := seed001(t, plainA, plainB, false, "p")
				return []string{"run", file}, topics
			},
			warns: warn001,
			not:   map[string]*testkafka.Cluster{fmt.Sprintf("sz.sh.orders.created-%dp", n): a}, // no loop
		},
		{
			name: "001 MM2 file sh<->sz with its SASL_SSL SCRAM-SHA-256 block",
			setup: func(t *testing.T) ([]string, []copied) {
				file, topics := seed001(t, secA, secB, true, "s")
				return []string{"run", file}, topics
			},
			env:   trustCA,
			warns: warn001,
			lacks: []string{"mm2-secret"},
		},
		{
			name: "001 as extracted: sh-sz for sh->sz",
			setup: func(t *testing.T) ([]string, []copied) {
				file, _ := seed001(t, plainA, plainB, false, "x")
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(file, []byte(strings.ReplaceAll(string(data), "->", "-")), 0o600)
				return []string{"check", file}, nil
			},
			warns: []string{
				": no flow is enabled: only heartbeats run, as in MirrorMaker 2 (set SOURCE->TARGET.enabled = true to replicate)",
				`:36: unknown key "sh-sz.enabled": did you mean "sh->sz.enabled"? (a flow is written SOURCE->TARGET)`,
				`:39: unknown key "sz-sh.enabled": did you mean "sz->sh.enabled"? (a flow is written SOURCE->TARGET)`,
				`:43: unknown key "sh-sz.topics": did you mean "sh->sz.topics"? (a flow is written SOURCE->TARGET)`,
			},
		},
		{
			name: "004 MM1 files as printed: notes after the values",
			setup: func(t *testing.T) ([]string, []copied) {
				return mm1Seed(t, dir, a, b, shellCommand(readSeed(t, "004-3-command.sh")), true), nil
			},
			fails: []string{
				`consumer.properties:2: "group.id": the value ends in "# 需要根据实际情况修改", which is part of the value`,
				`consumer.properties:1: bootstrap.servers: "` + a.Bootstrap[len(a.Bootstrap)-1] + ` # 需要根据实际情况修改" is not host:port (a '#' starts a comment only at the start of a line; this one is part of the value)`,
				`producer.properties:1: bootstrap.servers: "` + b.Info().SecureBootstrap[len(b.Bootstrap)-1] + ` # 需要根据实际情况修改" is not host:port`,
				`producer.properties:5: ssl.truststore.location: open ` + dir + `/Kafka.client.truststore.jks #根据实际情况替换证书路径: no such file or directory`,
			},
		},
		{
			name: "004 MM1 command line, SASL_SSL PLAIN target with a JKS trust store",
			setup: func(t *testing.T) ([]string, []copied) {
				// The article's steps 1 and 2: the topic exists on both sides.
				a.CreateTopic(t, "testTopic", 1, nil)
				b.CreateTopic(t, "testTopic", 1, nil)
				return mm1Seed(t, dir, a, b, shellCommand(readSeed(t, "004-3-command.sh")), false), []copied{{a, b, "testTopic", "testTopic", 1, 30}}
			},
			logs: []string{"mirroring as MirrorMaker 1 would"},
		},
		{
			name: "004 MM1 flags the article lists",
			setup: func(t *testing.T) ([]string, []copied) {
				a.CreateTopic(t, "AppColdStartMsg", 2, nil)
				produceN(t, a, "AppColdStartMsg", 2, 10, "cold")
				// The defaults the article gives, its comma list and --blacklist.
				cmd := "kafka-mirror-maker.sh --consumer.config ../config/consumer.properties --producer.config ../config/producer.properties " +
					"--whitelist 'ABTestMsg,AppColdStartMsg' --blacklist 'AppCold.*' --num.producers 1 --num.streams 1 --queue.size 10000"
				return mm1Seed(t, dir, a, b, cmd, false), []copied{{a, b, "ABTestMsg", "ABTestMsg", 2, 20}}
			},
			logs: []string{"--num.producers has no effect: removed in Kafka 0.9", "--queue.size has no effect: removed in Kafka 0.9",
				"--num.streams is ignored", "--blacklist was removed from MirrorMaker 1 in Kafka 2.0; kmirror applies it as topics.exclude"},
			not: map[string]*testkafka.Cluster{"AppColdStartMsg": b},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args, topics := tc.setup(t)
			for _, c := range topics {
				if !hasTopic(t, c.from, c.source) {
					c.from.CreateTopic(t, c.source, int32(c.partitions), nil)
				}
				produceN(t, c.from, c.source, int32(c.partitions), c.record, "seed")
			}
			if args[0] == "run" || args[0] == "check" {
				file := args[len(args)-1]
				out, code := runWithEnv(t, tc.env, "check", "--connect", file)
				if code != 0 {
					t.Fatalf("kmirror check --connect exit %d:\n%s", code, out)
				}
				if got := checkWarnings(out, file); strings.Join(got, "\n") != strings.Join(tc.warns, "\n") && args[0] == "run" ||
					args[0] == "check" && !containsAll(strings.Join(got, "\n"), tc.warns) {
					t.Errorf("kmirror check warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.warns, "\n"))
				}
			}
			if args[0] == "check" {
				return
			}
			cmd := exec.Command(kmirrorBin(t), args...)
			if args[0] == "sh" {
				cmd = exec.Command("sh", args[1:]...)
			}
			cmd.Env = append(os.Environ(), append(tc.env, "TMPDIR="+t.TempDir())...)
			if tc.fails != nil {
				out, err := cmd.CombinedOutput()
				if err == nil || !containsAll(string(out), tc.fails) {
					t.Errorf("exit %v, output:\n%s\nwant the lines:\n%s", err, out, strings.Join(tc.fails, "\n"))
				}
				return
			}
			p := startProc(t, "kmirror", cmd)
			for _, c := range topics {
				waitFor(t, 90*time.Second, fmt.Sprintf("%d records in %s", c.record, c.remote), func() bool {
					select {
					case <-p.done:
						t.Fatalf("kmirror exited: %v", p.err)
					default:
					}
					return countOrZero(t, c.to, c.remote) >= c.record
				})
			}
			if tc.during != nil {
				tc.during(t)
			}
			time.Sleep(time.Second) // nothing more arrives
			p.stop()
			for _, c := range topics {
				sameRecords(t, c.from.ReadAll(t, c.source), c.to.ReadAll(t, c.remote), "")
			}
			log := p.log.String()
			for _, w := range tc.logs {
				if !strings.Contains(log, w) {
					t.Errorf("log lacks %q", w)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(log, s) {
					t.Errorf("log shows %q", s)
				}
			}
			for topic, c := range tc.not {
				if hasTopic(t, c, topic) {
					t.Errorf("topic %s was created on %s", topic, c.Name)
				}
			}
		})
	}
}

// containsAll reports whether s holds every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// connectCall sends a printed HTTP request (request line, blank line, JSON
// body) to kmirror's REST API at addr: kmirror says it runs no connectors
// and where their settings go.
func connectCall(t *testing.T, addr, printed string) {
	t.Helper()
	head, body, _ := strings.Cut(printed, "\n")
	f := strings.Fields(head) // PUT /connectors/us-west-source/config HTTP/1.1
	req, err := http.NewRequest(f[0], "http://"+addr+f[1], strings.NewReader(strings.TrimSpace(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(got), "kmirror run serves no Kafka Connect connectors: run kmirror connect WORKER-FILE") {
		t.Errorf("%s %s: %d %s", f[0], f[1], resp.StatusCode, got)
	}
}

func readSeed(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "seeds", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// mm1Seed writes seed 004's consumer and producer files (placeholders
// replaced: source and target brokers, the target's user and password, the
// trust store's path; the store is made by keytool with the printed
// password) and returns the arguments that run cmd, a printed
// kafka-mirror-maker.sh line, as kmirror mm1 through sh.
func mm1Seed(t *testing.T, dir string, a, b *testkafka.Cluster, cmd string, keepNotes bool) []string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "Kafka.client.truststore.jks")
	if _, err := os.Stat(store); err != nil {
		testkafka.TrustStore(t, dir, "Kafka.client.truststore.jks", "JKS", "KafkaTrustStorePass", b.Info().CAFile)
	}
	cons := seedFile(t, conf, "004-1-consumer.properties", "consumer.properties", "localhost:9092", strings.Join(a.Bootstrap, ","))
	prod := seedFile(t, conf, "004-2-producer.properties", "producer.properties",
		"SASL接入点（公网）", strings.Join(b.Info().SecureBootstrap, ","),
		"替换用户名", "admin", "替换密码", b.Info().Password("admin"),
		"/xxx/Kafka.client.truststore.jks", store)
	// As printed, the notes after the values are part of them.
	for _, f := range []string{cons, prod} {
		if keepNotes {
			break
		}
		if err := os.Rename(withoutNotes(t, f), f); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(cmd, "kafka-mirror-maker.sh ") {
		t.Fatalf("not a MirrorMaker 1 command line: %s", cmd)
	}
	line := strings.NewReplacer("kafka-mirror-maker.sh", kmirrorBin(t)+" mm1",
		"../config/consumer.properties", cons, "../config/producer.properties", prod).Replace(cmd)
	return []string{"sh", "-c", "exec " + line}
}

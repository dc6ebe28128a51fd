package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mm1Files writes a consumer and a producer file and returns their paths.
func mm1Files(t *testing.T, consumer, producer string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	c, p := filepath.Join(dir, "c.properties"), filepath.Join(dir, "p.properties")
	for path, body := range map[string]string{c: consumer, p: producer} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c, p
}

func TestParseMM1Args(t *testing.T) {
	base := []string{"--consumer.config", "c.properties", "--producer.config=p.properties"}
	tests := []struct {
		name    string
		args    []string
		check   func(*mm1Options) bool
		wantErr string
	}{
		{"whitelist", append(base, "--whitelist", "a.*"),
			func(o *mm1Options) bool {
				return o.ConsumerConfig == "c.properties" && o.ProducerConfig == "p.properties" &&
					o.Topics == "a.*" && o.TopicsFlag == "--whitelist" && o.Source == "source" && o.Target == "target"
			}, ""},
		{"include with equals", append(base, "--include=a,b"),
			func(o *mm1Options) bool { return o.Topics == "a|b" && o.TopicsFlag == "--include" }, ""},
		{"include wins over whitelist", append(base, "--whitelist", "x", "--include", "y"),
			func(o *mm1Options) bool { return o.Topics == "y" && len(o.notes) == 1 }, ""},
		{"single dash", []string{"-consumer.config", "c", "-producer.config", "p", "-whitelist", "t"},
			func(o *mm1Options) bool { return o.Topics == "t" }, ""},
		{"commit interval and rf", append(base, "--whitelist", "t", "--offset.commit.interval.ms", "5000", "--replication.factor=1"),
			func(o *mm1Options) bool { return o.CommitIntervalMs == "5000" && o.ReplicationFactor == "1" }, ""},
		{"accepted no-ops", append(base, "--whitelist", "t", "--num.streams", "4", "--abort.on.send.failure", "false", "--new.consumer"),
			func(o *mm1Options) bool { return len(o.notes) == 3 }, ""},
		{"flags of MM1 before Kafka 0.9", append(base, "--whitelist", "t", "--num.producers", "2", "--queue.size", "10000", "--queue.byte.size=1000", "--no.data.loss"),
			func(o *mm1Options) bool {
				return len(o.notes) == 4 && strings.Contains(o.notes[0], "--num.producers has no effect: removed in Kafka 0.9") &&
					strings.Contains(o.notes[3], "--no.data.loss has no effect")
			}, ""},
		{"run flags handed on", append(base, "--whitelist", "t", "--rest-addr", ":8083", "--log-format=json"),
			func(o *mm1Options) bool {
				return slices.Equal(o.runArgs, []string{"--log-format=json", "--rest-addr=:8083"}) && o.logFormat == "json"
			}, ""},
		{"aliases", append(base, "--whitelist", "t", "--source-alias", "dc1", "--target-alias=dc2"),
			func(o *mm1Options) bool { return o.Source == "dc1" && o.Target == "dc2" }, ""},

		{"no consumer config", []string{"--producer.config", "p", "--whitelist", "t"}, nil, "--consumer.config FILE is required"},
		{"no producer config", []string{"--consumer.config", "c", "--whitelist", "t"}, nil, "--producer.config FILE is required"},
		{"no topics", base, nil, "--include or --whitelist REGEX is required"},
		{"empty topics", append(base, "--whitelist", "''"), nil, "--whitelist: the topic regex is empty"},
		{"bad regex", append(base, "--include", "a("), nil, "--include: regex"},
		{"message handler", append(base, "--whitelist", "t", "--message.handler", "com.example.H"), nil, "--message.handler is not supported"},
		{"handler args", append(base, "--whitelist", "t", "--message.handler.args=x"), nil, "--message.handler.args is not supported"},
		{"rebalance listener", append(base, "--whitelist", "t", "--consumer.rebalance.listener", "L"), nil, "--consumer.rebalance.listener is not supported"},
		{"blacklist alone", append(base, "--blacklist", "a,b"),
			func(o *mm1Options) bool {
				return o.Topics == ".*" && o.Exclude == "a|b" && len(o.notes) == 1 && strings.Contains(o.notes[0], "applies it as topics.exclude")
			}, ""},
		{"blacklist with whitelist", append(base, "--whitelist", "x.*", "--blacklist", "x-tmp"),
			func(o *mm1Options) bool { return o.Topics == "x.*" && o.Exclude == "x-tmp" }, ""},
		{"bad blacklist", append(base, "--blacklist", "a("), nil, "--blacklist: regex"},
		{"zookeeper", append(base, "--whitelist", "t", "--zookeeper", "zk:2181"), nil,
			"--zookeeper is not supported: kmirror reads the source through its brokers"},
		{"rebalance listener without consumer.", append(base, "--whitelist", "t", "--rebalance.listener", "L"), nil,
			"--rebalance.listener is not a MirrorMaker 1 flag that kmirror knows (did you mean --consumer.rebalance.listener?)"},
		{"typo", append(base, "--whitlist", "t"), nil, "--whitlist is not a MirrorMaker 1 flag that kmirror knows (did you mean --whitelist?)"},
		{"num streams", append(base, "--whitelist", "t", "--num.streams", "zero"), nil, "--num.streams \"zero\""},
		{"commit interval", append(base, "--whitelist", "t", "--offset.commit.interval.ms", "0"), nil, "--offset.commit.interval.ms \"0\""},
		{"abort value", append(base, "--whitelist", "t", "--abort.on.send.failure", "maybe"), nil, "--abort.on.send.failure \"maybe\""},
		{"rf zero", append(base, "--whitelist", "t", "--replication.factor", "0"), nil, "--replication.factor \"0\""},
		{"same aliases", append(base, "--whitelist", "t", "--source-alias", "x", "--target-alias", "x"), nil, "both \"x\""},
		{"bad alias", append(base, "--whitelist", "t", "--source-alias", "a.b"), nil, "--source-alias \"a.b\""},
		{"positional", append(base, "--whitelist", "t", "extra"), nil, "unexpected argument \"extra\""},
		{"unknown flag", append(base, "--whitelist", "t", "--frobnicate", "5"), nil, "--frobnicate is not a MirrorMaker 1 flag that kmirror knows"},
		{"missing value", append(base, "--whitelist"), nil, "needs an argument"},
		{"help", []string{"--help"}, nil, errHelp.Error()},
		{"version", []string{"--version"}, nil, errVersion.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseMM1Args(tt.args)
			if err != nil && strings.Contains(err.Error(), "provided but not defined") {
				t.Fatalf("bare flag package error: %v", err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("unexpected options %+v", o)
			}
		})
	}
}

// Errors name the user's file and line, not the generated file.
func TestMM1ErrorsNamePosition(t *testing.T) {
	tests := []struct {
		name, consumer, producer string
		want                     string
	}{
		{"consumer value", "bootstrap.servers=a:1\nauto.offset.reset=sometimes\n", "bootstrap.servers=b:1\n",
			"c.properties:2: auto.offset.reset"},
		{"producer value", "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\n# comment\nacks=most\n",
			"p.properties:3: acks"},
		{"bad bootstrap", "bootstrap.servers=nohost\n", "bootstrap.servers=b:1\n",
			"c.properties:1: bootstrap.servers"},
		{"provider", "bootstrap.servers=a:1\n",
			"bootstrap.servers=b:1\nsasl.jaas.config=${file:/nonexistent/x.properties:pw}\n",
			"p.properties:2: sasl.jaas.config: cannot resolve"},
		{"no bootstrap", "group.id=g\n", "bootstrap.servers=b:1\n", "c.properties: bootstrap.servers is missing"},
		{"syntax", "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\nbad\\u12=x\n", "p.properties:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := mm1Files(t, tt.consumer, tt.producer)
			var out, errb bytes.Buffer
			code := run([]string{"mm1", "--consumer.config", c, "--producer.config", p, "--whitelist", "t", "--print-config"}, &out, &errb)
			if code != 1 || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errb.String(), tt.want)
			}
			if strings.Contains(errb.String(), "generated") {
				t.Errorf("error names the generated file: %s", errb.String())
			}
		})
	}
}

func TestMM1Command(t *testing.T) {
	c, p := mm1Files(t, "bootstrap.servers=a:1\n", "bootstrap.servers=b:1\nsasl.mechanism=PLAIN\nsecurity.protocol=SASL_PLAINTEXT\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"topsecret\";\n")
	tests := []struct {
		args     []string
		code     int
		contains string
		lacks    string
	}{
		{[]string{"mm1", "--help"}, 0, "--consumer.config FILE", ""},
		{[]string{"mm1", "--version"}, 0, "kmirror ", ""},
		{[]string{"mm1"}, 2, "--consumer.config FILE is required", ""},
		{[]string{"mm1", "--consumer.config", filepath.Join(t.TempDir(), "missing"), "--producer.config", p, "--whitelist", "t"}, 1,
			"--consumer.config: open", ""},
		{[]string{"mm1", "--consumer.config", c, "--producer.config", p, "--whitelist", "t", "--print-config"}, 0,
			"target.sasl.jaas.config = [hidden]", "topsecret"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, &out, &errb)
		got := out.String() + errb.String()
		if code != tt.code || !strings.Contains(got, tt.contains) || (tt.lacks != "" && strings.Contains(got, tt.lacks)) {
			t.Errorf("%v: exit %d, output %q; want exit %d with %q", tt.args, code, got, tt.code, tt.contains)
		}
	}
}

// Every flag of MirrorMaker 1 that old posts show either works or says
// what to use instead; none gets the flag package's bare error.
func TestOldMM1Flags(t *testing.T) {
	base := []string{"--consumer.config", "c.properties", "--producer.config", "p.properties", "--whitelist", "t"}
	tests := []struct {
		flag []string
		want string // "" when accepted without a note
	}{
		{[]string{"--num.producers", "1"}, "--num.producers has no effect: removed in Kafka 0.9"},
		{[]string{"--queue.size", "10000"}, "--queue.size has no effect: removed in Kafka 0.9"},
		{[]string{"--blacklist", "x"}, "--blacklist was removed from MirrorMaker 1 in Kafka 2.0; kmirror applies it as topics.exclude"},
		{[]string{"--num.streams", "1"}, "--num.streams is ignored"},
		{[]string{"--abort.on.send.failure", "true"}, "--abort.on.send.failure has no effect"},
		{[]string{"--offset.commit.interval.ms", "60000"}, ""},
		{[]string{"--new.consumer"}, "--new.consumer has no effect"},
		{[]string{"--include", "t"}, "--whitelist is ignored because --include is given"},
		{[]string{"--message.handler", "H"}, "--message.handler is not supported: kmirror is written in Go and cannot load Java classes"},
		{[]string{"--consumer.rebalance.listener", "L"}, "--consumer.rebalance.listener is not supported"},
		{[]string{"--rebalance.listener", "L"}, "(did you mean --consumer.rebalance.listener?)"},
		{[]string{"--zookeeper", "zk:2181"}, "put them as bootstrap.servers in the --consumer.config file"},
	}
	for _, tt := range tests {
		t.Run(tt.flag[0], func(t *testing.T) {
			o, err := parseMM1Args(append(slices.Clone(base), tt.flag...))
			var got string
			switch {
			case err != nil:
				got = err.Error()
			case len(o.notes) > 0:
				got = strings.Join(o.notes, "; ")
			}
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("%v: got %q, want %q", tt.flag, got, tt.want)
			}
			if strings.Contains(got, "provided but not defined") {
				t.Errorf("%v: bare flag package error %q", tt.flag, got)
			}
		})
	}
}

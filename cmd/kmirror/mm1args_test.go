package main

import (
	"fmt"
	"strings"
	"testing"
)

// describeMM1 renders what parseMM1Args returned, for exact comparison.
func describeMM1(o *mm1Options, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("consumer=%s producer=%s topics=%s from %s exclude=%s commit=%s rf=%s aliases=%s,%s print=%v run=%q log=%s/%s notes=%q",
		o.ConsumerConfig, o.ProducerConfig, o.Topics, o.TopicsFlag, o.Exclude, o.CommitIntervalMs, o.ReplicationFactor,
		o.Source, o.Target, o.printConfig, o.runArgs, o.logFormat, o.logLevel, o.notes)
}

// parseMM1Args' results word for word: the error text, the order in which
// the checks run when several flags are wrong, and the notes in order.
func TestParseMM1ArgsExact(t *testing.T) {
	base := "--consumer.config c --producer.config p "
	tests := []struct{ args, want string }{
		{base + "--whitelist t",
			`consumer=c producer=p topics=t from --whitelist exclude= commit= rf= aliases=source,target print=false run=[] log=text/info notes=[]`},
		{base + "--include a,b --whitelist x --blacklist y --num.streams 2 --abort.on.send.failure true --new.consumer " +
			"--no.data.loss --queue.size 5 --num.producers 1 --queue.byte.size 9 --offset.commit.interval.ms 70 --replication.factor -1 " +
			"--source-alias s_1 --target-alias T-2 --print-config --memory-limit 1GiB --log-level debug --rest-addr :1 --metrics-addr :2 --log-format json",
			`consumer=c producer=p topics=a|b from --include exclude=y commit=70 rf=-1 aliases=s_1,T-2 print=true ` +
				`run=["--log-format=json" "--log-level=debug" "--rest-addr=:1" "--metrics-addr=:2" "--memory-limit=1GiB"] log=json/debug notes=[` +
				`"--num.producers has no effect: removed in Kafka 0.9 (one producer per process since); kmirror runs one idempotent producer per flow" ` +
				`"--queue.size has no effect: removed in Kafka 0.9; kmirror bounds what it holds in memory by bytes (fetch.max.bytes of the source consumer)" ` +
				`"--queue.byte.size has no effect: removed in Kafka 0.9; kmirror bounds what it holds in memory by bytes (fetch.max.bytes of the source consumer)" ` +
				`"--no.data.loss has no effect: removed in Kafka 0.9; kmirror never loses data: acks=all and idempotent writes always" ` +
				`"--whitelist is ignored because --include is given" ` +
				`"--blacklist was removed from MirrorMaker 1 in Kafka 2.0; kmirror applies it as topics.exclude (with MM2's default exclusions) to the topics --include selects" ` +
				`"--num.streams is ignored: kmirror fetches and produces every assigned partition concurrently" ` +
				`"--abort.on.send.failure has no effect: send errors are retried; an error a retry cannot fix stops that partition only (see GET /status and kmirror_partition_errors_total)" ` +
				`"--new.consumer has no effect"]`},
		{base + "--blacklist ' * '",
			`consumer=c producer=p topics=.* from --blacklist exclude=.* commit= rf= aliases=source,target print=false run=[] log=text/info notes=["--blacklist was removed from MirrorMaker 1 in Kafka 2.0; kmirror applies it as topics.exclude (with MM2's default exclusions) to the topics --blacklist selects"]`},
		{base + "--whitelist t --replication.factor 32767", `consumer=c producer=p topics=t from --whitelist exclude= commit= rf=32767 aliases=source,target print=false run=[] log=text/info notes=[]`},

		// Errors, each exact; with several wrong flags, the first check wins.
		{"--help --version", "error: help requested"},
		{"--version extra", "error: version requested"},
		{"--nope", "error: --nope is not a MirrorMaker 1 flag that kmirror knows"},
		{"--whitelist", "error: flag needs an argument: -whitelist"},
		{"--num.streams=1 --new.consumer=maybe", `error: invalid boolean value "maybe" for -new.consumer: parse error`},
		{"extra --message.handler h", `error: unexpected argument "extra" (MirrorMaker 1 takes only flags)`},
		{"--zookeeper z --rebalance.listener.args a",
			"error: --rebalance.listener.args is not supported: kmirror is written in Go and cannot load Java classes; copy records unchanged, or transform them in a separate consumer on the target"},
		{"--zookeeper z", "error: --zookeeper is not supported: kmirror reads the source through its brokers, as MirrorMaker 1's new consumer did; put them as bootstrap.servers in the --consumer.config file"},
		{"--producer.config p --num.streams 0", "error: --consumer.config FILE is required"},
		{"--consumer.config c", "error: --producer.config FILE is required"},
		{base + "--num.streams 0", "error: --include or --whitelist REGEX is required (e.g. --whitelist '.*')"},
		{base + "--include '' --whitelist t", "error: --include: the topic regex is empty"},
		{base + "--blacklist ''", "error: --blacklist: the topic regex is empty"},
		{base + "--whitelist t --blacklist \" --num.streams 0", "error: --blacklist: the topic regex is empty"},
		{base + "--include a( --blacklist b(", "error: --include: regex \"a(\": missing closing ): `a(`"},
		{base + "--whitelist t --blacklist b(", "error: --blacklist: regex \"b(\": missing closing ): `b(`"},
		{base + "--whitelist t --num.streams -1 --offset.commit.interval.ms 0", `error: --num.streams "-1": want a positive integer`},
		{base + "--whitelist t --offset.commit.interval.ms x --abort.on.send.failure 2", `error: --offset.commit.interval.ms "x": want a positive number of milliseconds`},
		{base + "--whitelist t --abort.on.send.failure 2 --replication.factor 0", `error: --abort.on.send.failure "2": want true or false`},
		{base + "--whitelist t --replication.factor -2 --source-alias a.b", `error: --replication.factor "-2": want -1 (broker default) or 1 to 32767`},
		{base + "--whitelist t --replication.factor 32768", `error: --replication.factor "32768": want -1 (broker default) or 1 to 32767`},
		{base + "--whitelist t --source-alias a.b --target-alias a.b", `error: --source-alias "a.b": want letters, digits, '_' or '-'`},
		{base + "--whitelist t --target-alias ''", `error: --target-alias "": want letters, digits, '_' or '-'`},
		{base + "--whitelist t --target-alias source", `error: --source-alias and --target-alias are both "source"`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got := describeMM1(parseMM1Args(splitArgs(tt.args)))
			if got != tt.want {
				t.Errorf("parseMM1Args(%s):\n got %s\nwant %s", tt.args, got, tt.want)
			}
		})
	}
}

// splitArgs splits a command line at spaces; single quotes keep spaces and
// two of them make an empty argument.
func splitArgs(s string) []string {
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'') + 1
			args = append(args, s[1:end])
			s = s[end+1:]
			continue
		}
		arg, rest, _ := strings.Cut(s, " ")
		args = append(args, arg)
		s = rest
	}
	return args
}

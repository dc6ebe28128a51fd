package flow

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/config"
)

const planBase = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"

// planFlow parses body (planBase and more lines) into its one flow.
func planFlow(t *testing.T, body string) *config.Flow {
	t.Helper()
	cfg, err := config.Parse("test.properties", []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Flows[0]
}

// TestPlanOf: every decision of a flow's plan, from its configuration
// alone.
func TestPlanOf(t *testing.T) {
	eos := "B.exactly.once.source.support = enabled\n"
	group := "A->B.kmirror.workers = group\n"
	ab := func(p Plan) Plan { p.source, p.target = "A", "B"; return p }
	tests := []struct {
		name   string
		body   string
		origin bool
		want   Plan
	}{
		{"default", planBase, false, ab(Plan{Fetches: DefaultFetches})},
		{"start at the end", planBase + "A.consumer.auto.offset.reset = LATEST\n", false, ab(Plan{Fetches: DefaultFetches, StartAtEnd: true})},
		{"auto.offset.reset none starts at the log start", planBase + "A.consumer.auto.offset.reset = none\n", false, ab(Plan{Fetches: DefaultFetches})},
		{"read_uncommitted ignored", planBase + "A.consumer.isolation.level = read_uncommitted\n", false, ab(Plan{Fetches: DefaultFetches, IgnoredIsolation: true})},
		{"read_committed", planBase + "A.consumer.isolation.level = read_committed\n", false, ab(Plan{Fetches: DefaultFetches})},
		{"fetch sizes", planBase + "A.consumer.fetch.max.bytes = 1048576\nA->B.consumer.max.partition.fetch.bytes = 65536\nA.consumer.fetch.max.wait.ms = 250\n" +
			config.FetchesKey + " = 4\n", false,
			ab(Plan{Fetches: 4, FetchMaxBytes: 1 << 20, PartitionMaxBytes: 65536, FetchMaxWait: 250 * time.Millisecond})},
		{"origin header", planBase, true, ab(Plan{Fetches: DefaultFetches, AddOrigin: true,
			Encoding: Encoding{What: "every batch is re-encoded", Why: "the provenance header is written"}})},
		{"target codec", planBase + "B.producer.compression.type = GZIP\n", false, ab(Plan{Fetches: DefaultFetches,
			Encoding: Encoding{Codec: "gzip", What: "batches not compressed with gzip are re-encoded with it", Why: "the target producer sets compression.type = gzip"}})},
		{"group workers", planBase + group + "A->B.kmirror.workers.group.id = w\n", false, ab(Plan{Fetches: DefaultFetches, Group: "w", CheckpointsID: "kmirror-A->B-checkpoints"})},
		{"group timeouts", planBase + group + "A.consumer.session.timeout.ms = 6000\nA.consumer.heartbeat.interval.ms = 500\n", false,
			ab(Plan{Fetches: DefaultFetches, Group: "kmirror-A->B", SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
				CheckpointsID: "kmirror-A->B-checkpoints"})},
		{"exactly-once", planBase + eos, false, ab(Plan{Fetches: DefaultFetches, TransactionalID: "kmirror-A->B"})},
		{"exactly-once group: slots", planBase + eos + group + config.SlotsKey + " = 4\n", false,
			ab(Plan{Fetches: DefaultFetches, Group: "kmirror-A->B", TransactionalID: "kmirror-A->B", Slots: 4, CheckpointsID: "kmirror-A->B-checkpoints"})},
		{"start from a group, throttled", planBase + config.StartGroupKey + " = mm1\n" + config.ThrottleKey + " = 1000\n", false,
			ab(Plan{Fetches: DefaultFetches, StartFromGroup: "mm1", Throttle: 1000})},
		{"slots without exactly-once", planBase + group + config.SlotsKey + " = 4\n", false, ab(Plan{Fetches: DefaultFetches, Group: "kmirror-A->B", CheckpointsID: "kmirror-A->B-checkpoints"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PlanOf(planFlow(t, tt.body), tt.origin); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PlanOf =\n%+v, want\n%+v", got, tt.want)
			}
		})
	}
}

// TestPlanWords: the data path's log line and the lines `kmirror check`
// prints, per plan.
func TestPlanWords(t *testing.T) {
	tests := []struct {
		name, body string
		origin     bool
		log        string // DataPath's message and attributes
		lines      []string
	}{
		{"default", planBase, false, "data path: source batches are forwarded without recompression [fetches_per_broker 2]", []string{
			"data path: batch engine, source batches forwarded as they are, 2 fetches per source broker",
			"fetch sizes: 16 MiB per fetch, a share of the fetch, 1 MiB to 16 MiB per partition, waiting at most 500ms",
			"start: partitions without progress start at the log start",
			"provenance header: off",
			"exactly-once: off",
			"workers: single (this process copies every partition)",
		}},
		{"everything set", planBase + config.PassthroughKey + " = false\nB.producer.compression.type = zstd\nA.consumer.fetch.max.bytes = 1000\n" +
			"A.consumer.max.partition.fetch.bytes = 65536\nA.consumer.fetch.max.wait.ms = 100\nA.consumer.auto.offset.reset = latest\n" +
			"A.consumer.isolation.level = read_uncommitted\nB.exactly.once.source.support = enabled\nA->B.kmirror.workers = group\n" + config.SlotsKey + " = 3\n" +
			config.StartGroupKey + " = mm1\n" + config.ThrottleKey + " = 5000\nA.consumer.session.timeout.ms = 6000\n", true,
			"data path: every batch is re-encoded, compressed with zstd [because " + config.PassthroughKey +
				" = false and the provenance header is written and the target producer sets compression.type = zstd fetches_per_broker 2]", []string{
				"data path: batch engine, every batch is re-encoded, compressed with zstd because " + config.PassthroughKey +
					" = false and the provenance header is written and the target producer sets compression.type = zstd, 2 fetches per source broker",
				"fetch sizes: 1000 bytes per fetch, 64 KiB per partition, waiting at most 100ms",
				`start: partitions without progress start where consumer group "mm1" on A stands, else at the log end (auto.offset.reset = latest)`,
				"isolation: read_uncommitted is ignored, only committed records are copied",
				"provenance header: written; records that came from the target are not copied back",
				"exactly-once: on (B.exactly.once.source.support = enabled), records and progress in target transactions, 3 slots, transactional ids kmirror-A->B-slot-0 to kmirror-A->B-slot-2",
				`workers: group "kmirror-A->B" on A shares the partitions between kmirror processes, session timeout 6s`,
				"checkpoints: the worker that leads the flow writes them in transactions (transactional id kmirror-A->B-checkpoints), fencing the one that led before",
				"throttle: 5000 bytes per second",
			}},
		{"exactly-once single", planBase + "B.exactly.once.source.support = enabled\n", false, "data path: source batches are forwarded without recompression [fetches_per_broker 2]", []string{
			"exactly-once: on (B.exactly.once.source.support = enabled), batches and progress in target transactions, transactional id kmirror-A->B",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanOf(planFlow(t, tt.body), tt.origin)
			msg, attrs := p.DataPath()
			if got := msg + " " + fmt.Sprint(attrs); got != tt.log {
				t.Errorf("DataPath = %q, want %q", got, tt.log)
			}
			got := strings.Join(p.Lines(), "\n")
			for _, l := range tt.lines {
				if !strings.Contains("\n"+got+"\n", "\n"+l+"\n") {
					t.Errorf("lines lack %q:\n%s", l, got)
				}
			}
		})
	}
}

// TestEncodingOf: every flow runs on the batch engine; what makes it
// re-encode batches, and which.
func TestEncodingOf(t *testing.T) {
	base := "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
	eos := "B.exactly.once.source.support = enabled\n"
	off := config.PassthroughKey + " = false\n"
	tests := []struct {
		name   string
		body   string
		origin bool
		want   Encoding
	}{
		{"default", base, false, Encoding{}},
		{"auto", base + config.PassthroughKey + " = auto\n", false, Encoding{}},
		{"true", base + "A->B." + config.PassthroughKey + " = true\n", false, Encoding{}},
		{"false", base + off, false, Encoding{All: true, What: "every batch is re-encoded", Why: config.PassthroughKey + " = false"}},
		{"exactly-once", base + eos, false, Encoding{}},
		{"exactly-once re-encode", base + eos + off, false, Encoding{All: true, What: "every batch is re-encoded", Why: config.PassthroughKey + " = false"}},
		{"exactly-once group", base + eos + "kmirror.workers = group\n", false, Encoding{}},
		{"exactly-once group re-encode", base + eos + "kmirror.workers = group\n" + off, false,
			Encoding{All: true, What: "every batch is re-encoded", Why: config.PassthroughKey + " = false"}},
		{"provenance header", base + config.PassthroughKey + " = true\n", true, Encoding{What: "every batch is re-encoded", Why: "the provenance header is written"}},
		{"target codec", base + "B.producer.compression.type = zstd\n", false,
			Encoding{Codec: "zstd", What: "batches not compressed with zstd are re-encoded with it", Why: "the target producer sets compression.type = zstd"}},
		{"target codec and re-encode", base + "B.producer.compression.type = lz4\n" + off, false,
			Encoding{All: true, Codec: "lz4", What: "every batch is re-encoded, compressed with lz4",
				Why: config.PassthroughKey + " = false and the target producer sets compression.type = lz4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.properties", []byte(tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodingOf(cfg.Flows[0], tt.origin); got != tt.want {
				t.Errorf("encodingOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFetchesOf(t *testing.T) {
	base := "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
	tests := []struct {
		name, body string
		want       int
	}{
		{"default", base, DefaultFetches},
		{"re-encode default", base + config.PassthroughKey + " = false\n", DefaultFetches},
		{"re-encode set", base + config.PassthroughKey + " = false\n" + config.FetchesKey + " = 1\n", 1},
		{"top level", base + config.FetchesKey + " = 4\n", 4},
		{"per flow", base + "A->B." + config.FetchesKey + " = 1\n", 1},
		{"most", base + config.FetchesKey + " = 8\n", config.MaxFetchesPerBroker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.properties", []byte(tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := fetchesOf(cfg.Flows[0]); got != tt.want {
				t.Errorf("fetchesOf = %d; want %d", got, tt.want)
			}
		})
	}
}

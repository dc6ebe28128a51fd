package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// produceMixed writes n records per partition to topic through producers
// of every codec: keys, headers (one with a null value), explicit
// timestamps, tombstones and empty values. The timestamps are an hour
// old: older ones (beyond the brokers' 7-day retention) could be deleted
// by a retention check before they are copied and compared.
func produceMixed(t *testing.T, c *testkafka.Cluster, topic string, partitions int32, n int) {
	t.Helper()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for ci, codec := range codecs {
		cl := c.Client(t, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		var recs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < n; i++ {
				r := &kgo.Record{
					Topic:     topic,
					Partition: p,
					Key:       []byte(fmt.Sprintf("k-%d-%d-%d", ci, p, i)),
					Value:     []byte(strings.Repeat(fmt.Sprintf("v%d-%d-%d|", ci, p, i), 1+i%7)),
					Timestamp: base.Add(time.Duration(ci*100000+i) * time.Millisecond),
					Headers: []kgo.RecordHeader{
						{Key: "h1", Value: []byte(fmt.Sprint(i))},
						{Key: "null-header", Value: nil},
					},
				}
				switch i % 10 {
				case 3:
					r.Value = nil // tombstone
				case 4:
					r.Value = []byte{}
				case 5:
					r.Key = nil
				case 6:
					r.Headers = nil
				}
				recs = append(recs, r)
			}
		}
		if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
			t.Fatalf("producing with %v: %v", codec, err)
		}
	}
}

// produceTxn writes committed and aborted transactions to topic.
func produceTxn(t *testing.T, c *testkafka.Cluster, topic string, partitions int32) {
	t.Helper()
	cl := c.Client(t, kgo.TransactionalID("kmirror-e2e-"+topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for round := 0; round < 4; round++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < 5; i++ {
				r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("txn-%d-%d", round, i)), Value: []byte(fmt.Sprintf("round %d", round))}
				if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		commit := kgo.TransactionEndTry(round%2 == 0) // rounds 1 and 3 abort
		if err := cl.EndTransaction(ctx(t), commit); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplicateRecordsExactly(t *testing.T) {
	t.Parallel()
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		replicateExactly(t, []string{reencodeAll})
	})
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		replicateExactly(t, []string{"kmirror.passthrough.enabled = true"})
	})
}

func replicateExactly(t *testing.T, extra []string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	prefix := testkafka.Topic(t, "exact")
	topics := []string{prefix + "-one", prefix + "-two", prefix + "-three"}
	for _, tp := range topics {
		a.CreateTopic(t, tp, 3, nil)
		produceMixed(t, a, tp, 3, 40)
	}
	produceTxn(t, a, topics[0], 3)

	src, dst := alias(t, "src"), alias(t, "dst")
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append(extra, src+"->"+dst+".topics = "+prefix+"-.*")...))
	p := startKmirror(t, cfg)

	want := map[string][]*kgo.Record{}
	for _, tp := range topics {
		want[tp] = a.ReadAll(t, tp)
	}
	for _, tp := range topics {
		remote := src + "." + tp
		waitFor(t, 90*time.Second, "records in "+remote, func() bool {
			return hasTopic(t, b, remote) && countAll(t, b, remote) >= len(want[tp])
		})
	}
	p.stop()
	forwarded := strings.Contains(p.log.String(), "data path: source batches are forwarded")
	reencoded := strings.Contains(p.log.String(), "data path: every batch is re-encoded")
	if want := slices.Contains(extra, reencodeAll); forwarded == want || reencoded != want {
		t.Errorf("flow forwarded batches: %v, re-encoded every batch: %v; want re-encoding %v", forwarded, reencoded, want)
	}
	for _, tp := range topics {
		got := b.ReadAll(t, src+"."+tp)
		sameRecords(t, want[tp], got, "")
	}
	// The transactional topic holds only committed records on the target:
	// 2 committed rounds x 3 partitions x 5 records, none of the aborted.
	var committed, aborted int
	for _, r := range b.ReadAll(t, src+"."+topics[0]) {
		switch string(r.Value) {
		case "round 0", "round 2":
			committed++
		case "round 1", "round 3":
			aborted++
		}
	}
	if committed != 30 || aborted != 0 {
		t.Errorf("target has %d committed and %d aborted transactional records, want 30 and 0", committed, aborted)
	}

	// An independent reader agrees: kcat reads the target topic.
	remote := src + "." + topics[1]
	out := testkafka.Kcat(t, "-C", "-b", strings.Join(b.Bootstrap, ","), "-t", remote, "-e", "-q", "-o", "beginning",
		"-f", `%p|%k|%S|%T\n`)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	var exp []string
	for _, r := range want[topics[1]] {
		size := len(r.Value)
		if r.Value == nil {
			size = -1
		}
		exp = append(exp, fmt.Sprintf("%d|%s|%d|%d", r.Partition, r.Key, size, r.Timestamp.UnixMilli()))
	}
	sort.Strings(lines)
	sort.Strings(exp)
	if strings.Join(lines, "\n") != strings.Join(exp, "\n") {
		t.Errorf("kcat sees %d records on %s, want %d; first lines kcat %q want %q", len(lines), remote, len(exp), first(lines), first(exp))
	}
}

func first(s []string) []string {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}

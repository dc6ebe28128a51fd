package passthrough

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
)

// legacyEntry returns an entry of n bytes at offset whose length field
// covers it and whose magic is m; the rest is zero.
func legacyEntry(offset int64, n int, m int8) []byte {
	raw := make([]byte, n)
	binary.BigEndian.PutUint64(raw, uint64(offset))
	binary.BigEndian.PutUint32(raw[lengthAt:], uint32(n-lengthExtra))
	raw[magicAt] = byte(m)
	return raw
}

// TestSplitCorruptEntries feeds split entries that are complete by their
// length field but cannot be read as their magic says: each is a corrupt
// batch (what came before it still goes out, the next fetch starts at it),
// never a panic. The 17-byte magic 0 entry made split read raw[17].
func TestSplitCorruptEntries(t *testing.T) {
	good := sourceBatch(t, testRecords(2, 10, 30), kgo.CodecNone, 10, false)
	v1 := messageV1(12, "k", "v", 1_600_000_000_000)
	badCRC := append([]byte(nil), v1...)
	badCRC[len(badCRC)-1] ^= 1
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"17-byte magic 0 entry", legacyEntry(12, 17, 0)},
		{"magic 0 entry shorter than its fields", legacyEntry(12, legacyMinV0-1, 0)},
		{"magic 1 entry shorter than its fields", legacyEntry(12, legacyMinV1-1, 1)},
		{"magic 1 CRC mismatch", badCRC},
		{"negative magic", legacyEntry(12, 80, -1)},
		{"magic 3", legacyEntry(12, 80, 3)},
		{"v2 batch shorter than its header", legacyEntry(12, 40, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(Config{SourceAlias: "A", TargetAlias: "B", Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			p := &partition{tp: progress.TP{Topic: "t", Partition: 0}}
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches = append(append([]byte(nil), good...), tc.in...)
			items, next, bad := pl.split(context.Background(), p, fetchAsk{p: p, offset: 10, maxBytes: defaultMaxMessageBytes}, &rp)
			if bad == nil {
				t.Fatalf("no error; items %+v, next %d", items, next)
			}
			if next != 12 || len(items) != 1 || items[0].batch == nil || items[0].batch.first != 10 {
				t.Fatalf("items %+v, next %d; want the good batch, then the next fetch at 12", items, next)
			}
		})
	}
	if err := checkEntry(v1); err != nil {
		t.Fatalf("a good magic 1 message: %v", err)
	}
	if err := checkEntry(badCRC); !errors.Is(err, errCorrupt) {
		t.Fatalf("bad CRC: %v, want %v", err, errCorrupt)
	}
}

// TestFetchedCorruptLegacyEntry runs the 17-byte entry through fetched:
// the partition backs off and counts a source batch error, as for a CRC
// mismatch, and stays where it was.
func TestFetchedCorruptLegacyEntry(t *testing.T) {
	m := metrics.New()
	pl := New(Config{SourceAlias: "A", TargetAlias: "B", Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p := &partition{tp: progress.TP{Topic: "t", Partition: 0}, partFetch: partFetch{next: 7}}
	p.labels = prometheus.Labels{"source": "A", "target": "B", "topic": "t", "partition": "0"}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = legacyEntry(7, 17, 0)
	pl.fetched(context.Background(), fetchAsk{p: p, offset: 7, maxBytes: defaultMaxMessageBytes}, &rp)
	if p.next != 7 || p.badBatches != 1 || p.lastErr == nil || p.retryAt.IsZero() {
		t.Fatalf("next %d, bad batches %d, last error %v, retry at %v", p.next, p.badBatches, p.lastErr, p.retryAt)
	}
	if n := testutil.ToFloat64(m.SourceBatchErrors.With(p.labels)); n != 1 {
		t.Fatalf("source batch errors %v, want 1", n)
	}
}

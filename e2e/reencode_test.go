package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestReencodeModes runs the batch engine's re-encoding modes on the
// binary against real brokers: a target compression.type (batches of
// another codec re-encoded with it), kmirror.passthrough.enabled = false
// (every batch re-encoded with its own codec) and the provenance header
// (every batch re-encoded, each record marked with its origin). Each mode
// says so in the log, the target holds the source's committed records
// exactly (keys, values, tombstones, headers, timestamps), and its
// batches carry the codecs the mode asks for.
func TestReencodeModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra func(src, dst string) []string
		log   string
		// codecs checks the codecs of the target's data batches
		// against those of the source's.
		codecs func(src, dst map[int16]int) bool
		origin bool
	}{
		{
			name:  "target codec",
			extra: func(_, dst string) []string { return []string{dst + ".producer.compression.type = gzip"} },
			log:   "data path: batches not compressed with gzip are re-encoded with it",
			codecs: func(_, dst map[int16]int) bool {
				return len(dst) == 1 && dst[1] > 0
			},
		},
		{
			name:  "every batch",
			extra: func(_, _ string) []string { return []string{reencodeAll} },
			log:   "data path: every batch is re-encoded",
			codecs: func(src, dst map[int16]int) bool {
				return sameKeys(src, dst)
			},
		},
		{
			name: "provenance header",
			extra: func(src, dst string) []string {
				return []string{src + "->" + dst + ".kmirror.provenance.header.enabled = true"}
			},
			log: "data path: every batch is re-encoded",
			codecs: func(src, dst map[int16]int) bool {
				return sameKeys(src, dst)
			},
			origin: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := testkafka.Shared(t, 2)
			a, b := cs[0], cs[1]
			topic := testkafka.Topic(t, "reencode")
			a.CreateTopic(t, topic, 1, nil)
			produceMixed(t, a, topic, 1, 30)
			produceTxn(t, a, topic, 1)
			want := a.ReadAll(t, topic)

			src, dst := alias(t, "src"), alias(t, "dst")
			extra := append(tc.extra(src, dst), src+"->"+dst+".topics = "+topic)
			p := startKmirror(t, writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, extra...)))
			remote := src + "." + topic
			waitFor(t, 90*time.Second, "records in "+remote, func() bool { return countOrZero(t, b, remote) >= len(want) })
			p.stop()
			if !strings.Contains(p.log.String(), tc.log) {
				t.Errorf("log lacks %q", tc.log)
			}
			got := b.ReadAll(t, remote)
			drop := ""
			if tc.origin {
				drop = datapath.OriginHeader
				for _, g := range got {
					if v, ok := headerValue(g, datapath.OriginHeader); !ok || v != src {
						t.Fatalf("target record at %d has origin %q (present %v), want %q", g.Offset, v, ok, src)
					}
				}
			}
			sameRecords(t, want, got, drop)
			srcCodecs, dstCodecs := dataCodecs(t, a, topic), dataCodecs(t, b, remote)
			if !tc.codecs(srcCodecs, dstCodecs) {
				t.Errorf("target batch codecs %v, source %v", dstCodecs, srcCodecs)
			}
		})
	}
}

// dataCodecs counts the codecs of a partition's data (not control) batches.
func dataCodecs(t *testing.T, c *testkafka.Cluster, topic string) map[int16]int {
	t.Helper()
	out := map[int16]int{}
	for _, rb := range rawBatches(t, c, topic, 0) {
		if !rb.control {
			out[rb.codec]++
		}
	}
	return out
}

// sameKeys reports whether a and b count the same codecs.
func sameKeys(a, b map[int16]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if b[k] == 0 {
			return false
		}
	}
	return true
}

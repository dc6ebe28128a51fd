// Package harness runs kmirror and Apache MirrorMaker 2 side by side on the
// same local Kafka clusters and the same mm2.properties, measures each run
// (catch-up time, records/s, MB/s, CPU seconds, peak RSS) and writes the
// report in docs/benchmarks.md with a PNG chart.
//
// See docs/benchmarks.md for the method; cmd/kbench is the command line.
package harness

import (
	"fmt"
	"strings"
	"time"
)

// Workload is a named, fixed data set on the source cluster and the way the
// replicator reaches it.
type Workload struct {
	Name        string
	Topics      int   // source topics
	Partitions  int32 // per topic
	Records     int64 // total records over all topics (full run)
	Quick       int64 // total records in --quick mode
	ValueBytes  int
	KeyBytes    int    // 0: no key
	Headers     int    // headers per record (0 or 3)
	Compression string // producer codec at the source: none, lz4, zstd
	// Text makes values words of a fixed vocabulary, which lz4 can
	// compress; otherwise they are random letters, which it cannot (and
	// then franz-go's producer writes the batches uncompressed).
	Text bool
	// Data names the workload whose source topics this one replicates;
	// empty means its own.
	Data string
	// Delay is added by a proxy to each direction between the replicator
	// and the source brokers (0: direct).
	Delay time.Duration
}

// Workloads are the benchmark's workloads in the order they run. Record
// counts are chosen so that a kmirror run copies for about 10 s on a busy
// 2-core machine while a full run stays under about 25 minutes.
var Workloads = []Workload{
	{Name: "small", Topics: 4, Partitions: 8, Records: 6_000_000, Quick: 400_000, ValueBytes: 100, Compression: "none"},
	// kb and zstd hold values of words, so that the source batches really
	// are compressed, as the workloads are defined: neither lz4 nor
	// franz-go's zstd shrinks random letters, and franz-go then writes the
	// batches uncompressed. kb-raw is that uncompressed case.
	{Name: "kb", Topics: 4, Partitions: 8, Records: 2_000_000, Quick: 100_000, ValueBytes: 1024, Compression: "lz4", Text: true},
	{Name: "wan", Data: "kb", Delay: 15 * time.Millisecond},
	{Name: "zstd", Topics: 4, Partitions: 8, Records: 2_000_000, Quick: 100_000, ValueBytes: 1024, Compression: "zstd", Text: true},
	{Name: "keys-headers", Topics: 4, Partitions: 8, Records: 1_500_000, Quick: 200_000, ValueBytes: 256, KeyBytes: 16, Headers: 3, Compression: "none"},
	{Name: "kb-raw", Topics: 4, Partitions: 8, Records: 2_000_000, Quick: 100_000, ValueBytes: 1024, Compression: "none"},
	{Name: "wan-raw", Data: "kb-raw", Delay: 15 * time.Millisecond},
	// Few partitions over a long round trip: where a replicator with one
	// fetch in flight per partition is bound by the round trip.
	{Name: "wan-few", Topics: 1, Partitions: 2, Records: 300_000, Quick: 30_000, ValueBytes: 1024, Compression: "lz4", Text: true, Delay: 50 * time.Millisecond},
}

// Lookup returns the workload named name, with the data fields of its Data
// workload filled in.
func Lookup(name string) (Workload, error) {
	for _, w := range Workloads {
		if w.Name != name {
			continue
		}
		if w.Data != "" {
			d, err := Lookup(w.Data)
			if err != nil {
				return w, err
			}
			d.Name, d.Data, d.Delay = w.Name, w.Data, w.Delay
			return d, nil
		}
		return w, nil
	}
	var names []string
	for _, w := range Workloads {
		names = append(names, w.Name)
	}
	return Workload{}, fmt.Errorf("no workload %q (have %s)", name, strings.Join(names, ", "))
}

// DataName is the workload whose source topics w reads.
func (w Workload) DataName() string {
	if w.Data != "" {
		return w.Data
	}
	return w.Name
}

// TopicNames are the source topics of w.
func (w Workload) TopicNames() []string {
	var ts []string
	for i := range w.Topics {
		ts = append(ts, fmt.Sprintf("bench-%s-%d", w.DataName(), i))
	}
	return ts
}

// TopicRegex matches exactly the source topics of w (for A->B.topics).
func (w Workload) TopicRegex() string {
	// No backslashes: mm2.properties is a Java properties file, where
	// they are escapes.
	return fmt.Sprintf("bench-%s-[0-9]+", w.DataName())
}

// Fixed header names and value sizes of the keys-headers workload.
var headerShapes = []struct {
	key   string
	value int
}{{"trace-id", 16}, {"content-type", 16}, {"seq", 8}}

// RecordBytes is the payload size of one record: key, value and header keys
// and values. MB/s figures count these bytes (1 MB = 10^6 bytes).
func (w Workload) RecordBytes() int {
	n := w.KeyBytes + w.ValueBytes
	for i := range w.Headers {
		h := headerShapes[i%len(headerShapes)]
		n += len(h.key) + h.value
	}
	return n
}

// Describe is a one-line description for the report.
func (w Workload) Describe(quick bool) string {
	n := w.Records
	if quick {
		n = w.Quick
	}
	s := fmt.Sprintf("%d topics × %d partitions, %s records, %d B values", w.Topics, w.Partitions, count(n), w.ValueBytes)
	if w.KeyBytes > 0 {
		s += fmt.Sprintf(", %d B keys", w.KeyBytes)
	}
	if w.Headers > 0 {
		s += fmt.Sprintf(", %d headers", w.Headers)
	}
	if w.Text {
		s += " of words"
	}
	s += ", " + w.Compression
	if w.Delay > 0 {
		s += fmt.Sprintf(", +%v each way to the source (RTT %v)", w.Delay, 2*w.Delay)
	}
	return s
}

func count(n int64) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return fmt.Sprintf("%gM", float64(n)/1e6)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

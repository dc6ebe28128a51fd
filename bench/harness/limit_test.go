package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDefaultLimitProcs(t *testing.T) {
	for _, tc := range []struct {
		workload string
		want     int
	}{
		{"kb", 4},
		{"small", 4},
		{"wan-few", 2}, // one topic, but at least 2
	} {
		w, err := Lookup(tc.workload)
		if err != nil {
			t.Fatal(err)
		}
		if got := DefaultLimitProcs(w); got != tc.want {
			t.Errorf("%s: DefaultLimitProcs = %d, want %d", tc.workload, got, tc.want)
		}
	}
}

func TestLimitShares(t *testing.T) {
	type share struct {
		partitions int32
		records    int64
	}
	for _, tc := range []struct {
		name       string
		partitions int32
		n          int64
		procs      int
		want       []share
	}{
		{"one producer: all partitions in one topic", 32, 100_000, 1, []share{{32, 100_000}}},
		{"one per topic of kb", 32, 100_000, 4, []share{{8, 25_000}, {8, 25_000}, {8, 25_000}, {8, 25_000}}},
		{"uneven records and partitions", 10, 10, 3, []share{{4, 4}, {3, 3}, {3, 3}}},
		{"more producers than partitions", 2, 1000, 3, []share{{1, 334}, {1, 333}, {1, 333}}},
		{"more producers than records", 8, 2, 4, []share{{4, 1}, {4, 1}}},
		{"zero means one", 8, 5, 0, []share{{8, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := limitShares("limit-kb-7", tc.partitions, tc.n, tc.procs)
			if len(got) != len(tc.want) {
				t.Fatalf("limitShares = %+v, want %d shares", got, len(tc.want))
			}
			var sum int64
			for i, s := range got {
				if s.Partitions != tc.want[i].partitions || s.Records != tc.want[i].records {
					t.Errorf("share %d = %+v, want %+v", i, s, tc.want[i])
				}
				if want := "limit-kb-7-" + string(rune('0'+i)); s.Topic != want {
					t.Errorf("share %d topic = %q, want %q", i, s.Topic, want)
				}
				sum += s.Records
			}
			if sum != tc.n {
				t.Errorf("shares hold %d records, want %d", sum, tc.n)
			}
		})
	}
}

func TestProducerPerfArgs(t *testing.T) {
	for _, tc := range []struct {
		codec string
		s     limitShare
		want  []string // in this order, after the JVM options and the class
	}{
		{"lz4", limitShare{"limit-kb-3-1", 8, 25_000}, []string{
			"--bootstrap-server", "127.0.0.1:9092", "--topic", "limit-kb-3-1",
			"--num-records", "25000", "--record-size", "1024", "--throughput", "-1",
			"--command-config", "/d/g", "--command-property", "compression.type=lz4", "acks=all", "enable.idempotence=true",
			"batch.size=262144", "linger.ms=20", "buffer.memory=67108864", "max.in.flight.requests.per.connection=5",
		}},
		{"none", limitShare{"limit-small-1-0", 32, 400_000}, []string{
			"--topic", "limit-small-1-0", "--num-records", "400000", "--record-size", "1024",
			"--throughput", "-1", "--command-config", "/d/g", "--command-property", "compression.type=none",
		}},
	} {
		args := producerPerfArgs("/libs", "127.0.0.1:9092", "/d/g", tc.s, 1024, tc.codec)
		cls := slices.Index(args, "org.apache.kafka.tools.ProducerPerformance")
		if cls < 0 || !slices.Equal(args[:cls], append(slices.Clone(MM2JVMOpts), "-cp", "/libs/*")) {
			t.Errorf("%s: JVM part of %q", tc.codec, args)
			continue
		}
		rest := strings.Join(args[cls+1:], " ")
		if !strings.Contains(rest, strings.Join(tc.want, " ")) {
			t.Errorf("%s: args %q lack %q", tc.codec, rest, strings.Join(tc.want, " "))
		}
		for _, p := range args[cls+1:] {
			// Java's small defaults must not be what the limit runs with.
			if p == "batch.size=16384" || p == "--producer-props" {
				t.Errorf("%s: %q in %q", tc.codec, p, rest)
			}
		}
	}
}

func TestAggregate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name           string
		records, bytes int64
		window         time.Duration
		rps, mbs, secs float64
	}{
		{"kb quick", 100_000, 100_000 * 1024, 500 * time.Millisecond, 200_000, 204.8, 0.5},
		{"small", 400_000, 400_000 * 100, 2 * time.Second, 200_000, 20, 2},
		{"empty window", 10, 10, 0, 0, 0, 0},
	} {
		r := Result{Records: tc.records, Bytes: tc.bytes}
		aggregate(&r, t0, t0.Add(tc.window))
		if math.Abs(r.RecordsPerSec-tc.rps) > 1e-6 || math.Abs(r.MBPerSec-tc.mbs) > 1e-6 || r.Seconds != tc.secs {
			t.Errorf("%s: %.0f rec/s, %.2f MB/s in %.2f s; want %.0f, %.2f, %.2f", tc.name, r.RecordsPerSec, r.MBPerSec, r.Seconds, tc.rps, tc.mbs, tc.secs)
		}
	}
}

func TestLimitMethod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		meta     Meta
		want     []string
		wantNone []string
	}{
		{"older results: one producer", Meta{Workloads: []string{"small", "kb"}},
			[]string{"writing the\n  same number of records", "`linger.ms=20 batch.size=262144 acks=all`"},
			[]string{"parallel"}},
		{"parallel producers", Meta{Workloads: []string{"small", "kb", "wan"},
			LimitProcs: map[string]int{"kb": 4, "small": 1}, LimitProps: limitProducerProps},
			[]string{"(`small`: 1, `kb`: 4;", "buffer.memory=67108864", "`batch.size=16384`", "first of their records on the target to the last of all"},
			[]string{"`wan`: "}},
	} {
		got := limitMethod(tc.meta)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, w, got)
			}
		}
		for _, w := range tc.wantNone {
			if strings.Contains(got, w) {
				t.Errorf("%s: has %q:\n%s", tc.name, w, got)
			}
		}
	}
}

func TestMergeLimitProcs(t *testing.T) {
	a, b := fakeResults(), fakeResults()
	a.Meta.LimitProcs = map[string]int{"kb": 4}
	b.Meta.LimitProcs, b.Meta.LimitProps = map[string]int{"small": 2}, limitProducerProps
	m := Merge(a, b)
	if m.Meta.LimitProcs["kb"] != 4 || m.Meta.LimitProcs["small"] != 2 || len(a.Meta.LimitProcs) != 1 || len(m.Meta.LimitProps) == 0 {
		t.Errorf("merged limit procs %v props %v; first's %v", m.Meta.LimitProcs, m.Meta.LimitProps, a.Meta.LimitProcs)
	}
}

func TestOpenGates(t *testing.T) {
	dir := t.TempDir()
	var gates []string
	for i := range 3 {
		g := filepath.Join(dir, fmt.Sprintf("g%d", i))
		if err := syscall.Mkfifo(g, 0o600); err != nil {
			t.Fatal(err)
		}
		gates = append(gates, g)
	}
	read := make(chan string, len(gates))
	for i, g := range gates {
		go func() {
			time.Sleep(time.Duration(i) * 100 * time.Millisecond) // JVMs come up one after another
			f, err := os.Open(g)
			if err != nil {
				read <- err.Error()
				return
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				read <- err.Error()
				return
			}
			read <- string(b)
		}()
	}
	start := time.Now()
	if err := openGates(context.Background(), gates, make(chan error, 3), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Errorf("gates opened after %v, before the last reader came (200 ms)", el)
	}
	for range gates {
		if got := <-read; got != "# kbench: go\n" {
			t.Errorf("a reader got %q", got)
		}
	}

	// A producer that ends before reading its gate fails the run at once,
	// and its exit stays for the caller to collect.
	exited := make(chan error, 1)
	exited <- errors.New("exit status 1")
	err := openGates(context.Background(), gates[:1], exited, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 1") || len(exited) != 1 {
		t.Errorf("openGates with an ended producer = %v, %d exits left", err, len(exited))
	}
	if err := openGates(context.Background(), gates[:1], make(chan error, 1), 50*time.Millisecond); err == nil {
		t.Error("openGates without a reader succeeded")
	}
}

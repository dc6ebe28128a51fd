package passthrough

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestRealThroughput copies uncompressed 1 KiB records of random capital
// letters (bench's kb workload) between two real clusters and logs MB/s
// and CPU seconds per GB of this process during the copy. It runs only
// with KMIRROR_PT_REAL=1 and KMIRROR_TEST_CLUSTERS set (two clusters):
//
//	KMIRROR_PT_REAL=1 KMIRROR_TEST_CLUSTERS=/tmp/kmh1/clusters.json \
//	  go test -run RealThroughput -v ./internal/passthrough/
//
// KMIRROR_PT_MB (default 256) and KMIRROR_PT_PARTS (default 8) size it;
// KMIRROR_PT_PROF=FILE writes a CPU profile of the copy. KMIRROR_PT_EOS=0
// copies exactly-once in one transaction, KMIRROR_PT_EOS=N over N slots,
// committing every second as a flow does.
func TestRealThroughput(t *testing.T) {
	if os.Getenv("KMIRROR_PT_REAL") != "1" || os.Getenv(testkafka.EnvClusters) == "" {
		t.Skip("needs KMIRROR_PT_REAL=1 and KMIRROR_TEST_CLUSTERS")
	}
	mb, parts := 256, 8
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_PT_MB")); err == nil && v > 0 {
		mb = v
	}
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_PT_PARTS")); err == nil && v > 0 {
		parts = v
	}
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "ptreal")
	a.CreateTopic(t, topic, int32(parts), nil)
	remote := "A." + topic
	b.CreateTopic(t, remote, int32(parts), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	cl := a.Client(t, kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(256<<10),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedBytes(64<<20))
	n := mb * 1024
	rng := rand.New(rand.NewPCG(7, 9))
	var wg sync.WaitGroup
	var perr error
	var emu sync.Mutex
	for i := range n {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = 'A' + byte(rng.IntN(26))
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				emu.Lock()
				perr = err
				emu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	adm := b.Admin(t)
	producer := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	store, err := progress.Open(ctx, adm, []kgo.Opt{kgo.SeedBrokers(b.Bootstrap...)}, producer, progress.Options{
		Topic: "mm2-offsets." + topic + ".internal", Source: "A", Partitions: 1, ReplicationFactor: 1,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{SourceAlias: "A", TargetAlias: "B", Source: a.Client(t), SourceAdmin: a.Admin(t),
		Target: b.Client(t), TargetAdmin: adm, Progress: store, Metrics: metrics.New(), Log: log}
	if v, err := strconv.Atoi(os.Getenv("KMIRROR_PT_EOS")); err == nil && v >= 0 {
		cfg.TransactionalID, cfg.Slots = "kmirror-"+topic, v
	}
	pl := New(cfg)
	var ps []datapath.Partition
	var tps []progress.TP
	for p := range int32(parts) {
		ps = append(ps, datapath.Partition{TP: progress.TP{Topic: topic, Partition: p}, Remote: remote})
		tps = append(tps, ps[p].TP)
	}
	if f := os.Getenv("KMIRROR_PT_PROF"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	t0 := time.Now()
	if failed := pl.Fence(ctx, tps); len(failed) > 0 {
		t.Fatal(failed)
	}
	pl.Assign(ps)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pl.Run(rctx, 30*time.Second) }()
	if cfg.TransactionalID != "" {
		due := pl.CommitDue(1)
		go func() { // as a flow commits
			for {
				select {
				case <-rctx.Done():
					return
				case <-due:
				}
				if err := pl.Commit(rctx); err != nil && rctx.Err() == nil {
					t.Errorf("commit: %v", err)
				}
			}
		}()
	}
	for {
		var sum int64
		for _, off := range pl.Positions() {
			sum += off + 1
		}
		if sum >= int64(n) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("copied %d of %d records", sum, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(t0)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	rcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	gb := float64(n) * 1024 / 1e9
	t.Logf("%d MiB of uncompressed 1 KiB records, %d partitions: %v, %.0f MB/s, CPU %v, %.2f CPU s/GB",
		mb, parts, d.Round(time.Millisecond), gb*1000/d.Seconds(), cpu.Round(time.Millisecond), cpu.Seconds()/gb)
}

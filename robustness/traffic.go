package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// The source topics. Consumer groups read orders and payments; doomed is
// the topic whose remote copy a fault deletes (its records before the
// deletion are gone on the target by design, see docs/operations.md);
// late is created and events grown while the run goes on.
const (
	topicOrders    = "orders"    // 6 partitions, keyed, headers
	topicEvents    = "events"    // 3 partitions grown to 5 mid-run, some null keys
	topicCompacted = "compacted" // 3 partitions, cleanup.policy=compact, tombstones
	topicPayments  = "payments"  // 3 partitions, transactional producer, some aborts
	topicLate      = "late"      // 2 partitions, created mid-run
	topicDoomed    = "doomed"    // 2 partitions, its remote topic deleted by a fault

	groupOrders   = "g-orders"
	groupPayments = "g-payments" // read_committed
)

// topicSpec is a source topic and its partition count at creation.
type topicSpec struct {
	name       string
	partitions int32
	configs    map[string]*string
}

func initialTopics() []topicSpec {
	compact := "compact"
	return []topicSpec{
		{topicOrders, 6, nil},
		{topicEvents, 3, nil},
		{topicCompacted, 3, map[string]*string{"cleanup.policy": &compact}},
		{topicPayments, 3, nil},
		{topicDoomed, 2, nil},
	}
}

// traffic writes to the source and consumes it with committing groups
// until stop.
type traffic struct {
	src  *testkafka.Cluster
	rate int // records per second of the plain producer

	mu     sync.Mutex
	rng    *rand.Rand
	topics []string // written by the plain producer; late joins when created

	seq                           atomic.Int64
	produced, failed              atomic.Int64
	txCommitted, txAborted, txErr atomic.Int64
	consumed                      atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newTraffic(src *testkafka.Cluster, rate int, seed uint64) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	return &traffic{
		src: src, rate: rate, rng: rand.New(rand.NewPCG(seed, 7)),
		topics: []string{topicOrders, topicEvents, topicCompacted, topicDoomed},
		ctx:    ctx, cancel: cancel,
	}
}

func (g *traffic) intn(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rng.IntN(n)
}

// addTopic makes the plain producer write to topic too.
func (g *traffic) addTopic(topic string) {
	g.mu.Lock()
	g.topics = append(g.topics, topic)
	g.mu.Unlock()
}

// record is a new record for topic: a unique value (topic and sequence
// number), a key, two headers and a timestamp up to a minute in the past.
func (g *traffic) record(topic string) *kgo.Record {
	n := g.seq.Add(1)
	r := &kgo.Record{Topic: topic}
	r.Value = []byte(fmt.Sprintf("%s-%d-%x", topic, n, g.intn(1<<20)))
	switch topic {
	case topicCompacted:
		r.Key = []byte("ck" + strconv.Itoa(g.intn(50)))
		if g.intn(100) < 15 {
			r.Value = nil // tombstone
		}
	case topicEvents:
		if g.intn(100) >= 5 {
			r.Key = []byte("ek" + strconv.Itoa(g.intn(1000)))
		}
	default:
		r.Key = []byte("k" + strconv.Itoa(g.intn(500)))
	}
	r.Headers = []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.FormatInt(n, 10))}, {Key: "gen", Value: []byte("robustness")}}
	r.Timestamp = time.Now().Add(-time.Duration(g.intn(60000)) * time.Millisecond).Truncate(time.Millisecond)
	return r
}

// start runs the plain producer, the transactional producer and the two
// consumer groups.
func (g *traffic) start() error {
	plain, err := kgo.NewClient(kgo.SeedBrokers(g.src.Bootstrap...), kgo.ProducerLinger(20*time.Millisecond))
	if err != nil {
		return err
	}
	g.run(func() { g.producePlain(plain) })
	g.run(g.produceTransactions)
	g.run(func() { g.consume(groupOrders, topicOrders, false) })
	g.run(func() { g.consume(groupPayments, topicPayments, true) })
	return nil
}

func (g *traffic) run(fn func()) {
	g.wg.Add(1)
	go func() { defer g.wg.Done(); fn() }()
}

// stop ends the traffic and waits for the producers to flush and the
// groups to commit and leave.
func (g *traffic) stop() {
	g.cancel()
	g.wg.Wait()
}

func (g *traffic) producePlain(cl *kgo.Client) {
	defer cl.Close()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	per := max(1, g.rate/10)
	for {
		select {
		case <-g.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cl.Flush(ctx)
			cancel()
			return
		case <-tick.C:
		}
		g.mu.Lock()
		topics := append([]string(nil), g.topics...)
		g.mu.Unlock()
		for range per {
			r := g.record(topics[g.intn(len(topics))])
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					g.failed.Add(1)
				} else {
					g.produced.Add(1)
				}
			})
		}
	}
}

// produceTransactions writes transactions of 3 to 12 records to payments,
// aborting one in five.
func (g *traffic) produceTransactions() {
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.src.Bootstrap...), kgo.TransactionalID("robustness-payments"),
			kgo.TransactionTimeout(30*time.Second))
		if err != nil {
			panic(err) // options are static
		}
		return cl
	}
	cl := newClient()
	defer func() { cl.Close() }()
	for g.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.BeginTransaction()
		n := 3 + g.intn(10)
		var recs []*kgo.Record
		for range n {
			recs = append(recs, g.record(topicPayments))
		}
		if err == nil {
			err = cl.ProduceSync(ctx, recs...).FirstErr()
		}
		commit := kgo.TryCommit
		if err != nil || g.intn(5) == 0 {
			commit = kgo.TryAbort
		}
		if eerr := cl.EndTransaction(ctx, commit); eerr != nil || err != nil {
			// A broker fault: start over with a new producer (the
			// transaction times out or is aborted by the next
			// InitProducerID).
			g.txErr.Add(1)
			cl.Close()
			cl = newClient()
		} else if commit == kgo.TryCommit {
			g.txCommitted.Add(int64(n))
		} else {
			g.txAborted.Add(int64(n))
		}
		cancel()
		select {
		case <-g.ctx.Done():
		case <-time.After(time.Duration(200+g.intn(300)) * time.Millisecond):
		}
	}
}

// consume reads topic in group, committing after every poll, slowly
// enough to stay behind the producers for most of the run.
func (g *traffic) consume(group, topic string, readCommitted bool) {
	opts := []kgo.Opt{kgo.SeedBrokers(g.src.Bootstrap...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64 << 10), kgo.SessionTimeout(10 * time.Second)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		panic(err)
	}
	defer cl.Close() // leaves the group
	for g.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(g.ctx, 5*time.Second)
		fs := cl.PollRecords(ctx, 100)
		cancel()
		g.consumed.Add(int64(fs.NumRecords()))
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = cl.CommitUncommittedOffsets(cctx)
		ccancel()
		select {
		case <-g.ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

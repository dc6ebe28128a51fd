package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
	"github.com/kmirror/kmirror/internal/testwait"
	"github.com/kmirror/kmirror/internal/wire"
)

// fenceSetup is a flow whose offset syncs translate t-0 0..99 to 0..99,
// on two clusters: fake ones, or the shared brokers (with a source alias
// of its own).
type fenceSetup struct {
	f            *config.Flow
	fake         *kfake.Cluster // the fake target, nil on the brokers
	srcAdm       *kadm.Client
	dst          *kgo.Client
	topic, group string
}

func newFenceSetup(t *testing.T, brokers bool) fenceSetup {
	t.Helper()
	var s fenceSetup
	var src *kgo.Client
	if brokers {
		cl := testkafka.Shared(t, 2)
		s.f = testFlow(cl[0].Bootstrap, cl[1].Bootstrap, "exact")
		s.f.Source = testkafka.Topic(t, "src")
		s.topic = testkafka.Topic(t, "t")
		src, s.dst = cl[0].Client(t), cl[1].Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else {
		a, acl := testkafka.Fake(t)
		b, bcl := testkafka.Fake(t)
		s.f, s.topic = testFlow(a.ListenAddrs(), b.ListenAddrs(), "exact"), "t"
		src, s.dst, s.fake = acl, bcl, b
	}
	s.group = s.topic + "-g"
	s.f.Topics, s.f.Groups, s.f.SyncGroupOffsetsEnabled = []string{s.topic}, []string{s.group}, false
	built(s.f)
	ctx := context.Background()
	s.srcAdm = kadm.NewClient(src)
	dadm := kadm.NewClient(s.dst)
	if _, err := s.srcAdm.CreateTopic(ctx, 1, 1, nil, s.topic); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{s.f.OffsetSyncsTopic(), s.f.Source + "." + s.topic} {
		if _, err := dadm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	produce(t, s.dst, syncRec(s.f.OffsetSyncsTopic(), wire.OffsetSync{Topic: s.topic, UpstreamOffset: 0, DownstreamOffset: 0}),
		syncRec(s.f.OffsetSyncsTopic(), wire.OffsetSync{Topic: s.topic, UpstreamOffset: 100, DownstreamOffset: 99}))
	return s
}

// commit commits the group at offset at on the source.
func (s fenceSetup) commit(t *testing.T, at int64) {
	t.Helper()
	o := make(kadm.Offsets)
	o.Add(kadm.Offset{Topic: s.topic, Partition: 0, At: at, LeaderEpoch: -1})
	if _, err := s.srcAdm.CommitOffsets(context.Background(), s.group, o); err != nil {
		t.Fatal(err)
	}
}

// waitCheckpoint waits until the checkpoints topic's last committed
// checkpoint of the group is at upstream offset at.
func (s fenceSetup) waitCheckpoint(t *testing.T, at int64) {
	t.Helper()
	cpTopic := s.f.Policy.CheckpointsTopic(s.f.Source)
	testwait.For(t, 30*time.Second, fmt.Sprintf("the checkpoint of offset %d", at), func() bool {
		return readCheckpoints(t, s.dst, cpTopic)[s.group+"/"+s.f.Source+"."+s.topic].UpstreamOffset == at
	})
}

type running struct {
	task *Task
	done chan error
	stop context.CancelFunc
}

func (s fenceSetup) start(t *testing.T, cfg Config) running {
	t.Helper()
	task, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := running{task: task, done: make(chan error, 1), stop: cancel}
	go func() { r.done <- task.Run(ctx) }()
	t.Cleanup(func() { r.end() })
	return r
}

// end stops the task and returns what Run returned (again on later
// calls).
func (r running) end() error {
	r.stop()
	err := <-r.done
	r.done <- err
	return err
}

// TestFencedTaskYields: checkpoint tasks of one flow with the same
// transactional ID, as workers that both believe they lead it (one
// frozen past its session and back). The one that starts second fences
// the first and reads what it committed; the first's next write fails and
// its Run ends with an error Yielded reports. A third task goes on from
// there. Each round is one transaction, and a task does not read the
// topic back for its own commit markers. On fake clusters and the brokers.
func TestFencedTaskYields(t *testing.T) {
	for _, brokers := range []bool{false, true} {
		name := "kfake"
		if brokers {
			name = "brokers"
		}
		t.Run(name, func(t *testing.T) {
			s := newFenceSetup(t, brokers)
			id := "kmirror-" + s.f.Name() + "-checkpoints-" + s.topic
			s.commit(t, 50)
			first := s.start(t, Config{Flow: s.f, Metrics: metrics.New(), TransactionalID: id})
			s.waitCheckpoint(t, 50)

			second := s.start(t, Config{Flow: s.f, Metrics: metrics.New(), TransactionalID: id})
			testwait.For(t, 30*time.Second, "the second task loaded the first's checkpoint", func() bool {
				cps := second.task.Checkpoints(s.group)
				return len(cps) == 1 && cps[0].UpstreamOffset == 50
			})
			// A fenced task learns it only when it writes: the second
			// stops before the next commit, so that the first, not
			// having read it, writes and is refused.
			if err := second.end(); err != nil {
				t.Fatalf("the second task ended with %v", err)
			}
			s.commit(t, 60)
			select {
			case err := <-first.done:
				first.done <- err // for the cleanup
				if !Yielded(err) {
					t.Fatalf("the fenced task ended with %v; want an error Yielded reports", err)
				}
				t.Logf("the fenced task ended: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the fenced task still runs 30 s after another took its transactional ID")
			}
			third := s.start(t, Config{Flow: s.f, Metrics: metrics.New(), TransactionalID: id})
			s.waitCheckpoint(t, 60)

			// Rounds of the task's own: no read of the topic for them
			// (the commit markers are its own).
			third.task.mu.Lock()
			reads := third.task.reads
			third.task.mu.Unlock()
			for _, at := range []int64{70, 80, 90} {
				s.commit(t, at)
				s.waitCheckpoint(t, at)
			}
			third.task.mu.Lock()
			after := third.task.reads
			third.task.mu.Unlock()
			if after != reads {
				t.Errorf("the checkpoints topic was read %d times in 3 rounds of the task's own transactions; want 0", after-reads)
			}
		})
	}
}

// TestFenceRefusedWritesPlainly: a target that refuses the transactional
// ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or whose transaction
// coordinator never answers (a one-broker cluster that cannot make its
// transaction state topic), gets the checkpoints written plainly, with a
// warning, instead of none.
func TestFenceRefusedWritesPlainly(t *testing.T) {
	old := fenceFor
	t.Cleanup(func() { fenceFor = old }) // after the parallel subtests
	fenceFor = time.Second
	for _, tt := range []struct {
		name string
		code int16
		warn string
	}{
		{"refused", kerr.TransactionalIDAuthorizationFailed.Code, "does not let kmirror use"},
		{"no coordinator", kerr.CoordinatorNotAvailable.Code, "did not answer for 1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFenceSetup(t, false)
			// Short client retries: each attempt at the ID gives up
			// soon, as fenceFor does.
			s.f.TargetProducer["retry.backoff.ms"], s.f.TargetProducer["retry.backoff.max.ms"] = "20", "50"
			s.fake.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				s.fake.KeepControl()
				req := kr.(*kmsg.InitProducerIDRequest)
				if req.TransactionalID == nil {
					return nil, nil, false
				}
				resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ErrorCode = tt.code
				return resp, nil, true
			})
			s.commit(t, 40)
			var logs testkafka.Logs
			s.start(t, Config{Flow: s.f, Metrics: metrics.New(), Log: logs.Logger(), TransactionalID: "refused"})
			s.waitCheckpoint(t, 40)
			if got := logs.Lines("written without fencing"); len(got) != 1 || !strings.Contains(got[0], tt.warn) {
				t.Errorf("want one warning that checkpoints are written without fencing (%q); got %q", tt.warn, got)
			}
		})
	}
}

// TestStopDuringTransaction: a task stopped while its transaction waits
// on a target that does not answer returns within seconds, without an
// error: it does not wait out the write timeout to abort (the next task's
// fence aborts what is left open).
func TestStopDuringTransaction(t *testing.T) {
	s := newFenceSetup(t, false)
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.fake.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		s.fake.KeepControl()
		if kr.(*kmsg.ProduceRequest).TransactionID == nil {
			return nil, nil, false
		}
		once.Do(func() { close(stuck) })
		<-release // a target that does not answer
		return nil, nil, false
	})
	t.Cleanup(func() { close(release) }) // before the fake cluster closes
	s.commit(t, 30)
	task, err := New(Config{Flow: s.f, Metrics: metrics.New(), TransactionalID: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- task.Run(ctx) }()
	select {
	case <-stuck:
	case <-time.After(30 * time.Second):
		t.Fatal("no transactional write in 30 s")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after a stop: %v, want nil", err)
		}
		if took := time.Since(start); took > stopAbort+5*time.Second {
			t.Errorf("Run took %v to return after the stop", took)
		}
	case <-time.After(WriteTimeout):
		t.Fatal("Run still waits a write timeout after the stop")
	}
}

// TestCommitFails: a transaction whose commit fails for good (the
// coordinator answers EndTxn with INVALID_TXN_STATE, which franz-go takes
// as fatal for its producer ID; its abort then sends nothing, and the
// transaction stays open) ends the task with ErrTxnUnknown, which Yielded
// reports, at the latest when the next round cannot begin a transaction:
// the task does not fail round after round, the worker does not start it
// again at once (the next task's fence aborts what is open), and nothing
// of the round is committed. (A commit whose outcome was merely
// unconfirmed, a timeout, is aborted by franz-go's TryAbort, and the next
// round goes on.)
func TestCommitFails(t *testing.T) {
	s := newFenceSetup(t, false)
	var commits sync.Map // EndTxn's Commit -> true
	s.fake.ControlKey(int16(kmsg.EndTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		s.fake.KeepControl()
		req := kr.(*kmsg.EndTxnRequest)
		commits.Store(req.Commit, true)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	s.commit(t, 30)
	var logs testkafka.Logs
	r := s.start(t, Config{Flow: s.f, Metrics: metrics.New(), Log: logs.Logger(), TransactionalID: "unknown"})
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrTxnUnknown) || !Yielded(err) {
			t.Errorf("Run: %v, want ErrTxnUnknown", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the task still runs a minute after its transaction could not end")
	}
	if _, ok := commits.Load(true); !ok {
		t.Error("no commit was tried")
	}
	if got := logs.Lines("retrying at the next interval"); len(got) > 1 {
		t.Errorf("the task went on failing: %q", got)
	}
	// The transaction stays open on the target: its last stable offset
	// stays at the start.
	cpTopic := s.f.Policy.CheckpointsTopic(s.f.Source)
	ends, err := kadm.NewClient(s.dst).ListCommittedOffsets(context.Background(), cpTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("%s-%d: last stable offset %d (%v), want 0: nothing committed", o.Topic, o.Partition, o.Offset, o.Err)
		}
	})
	if len(ends) == 0 {
		t.Errorf("no partition of %s listed", cpTopic)
	}
}

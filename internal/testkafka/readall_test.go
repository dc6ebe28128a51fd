package testkafka_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// fatalTB records the first Fatalf and stops the calling goroutine, so
// that a test can check the message a helper fails with.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// readAll runs c.ReadAll on its own goroutine and returns the records, or
// the message it failed with.
func readAll(t *testing.T, c *testkafka.Cluster, topic string) (recs []*kgo.Record, fatal string) {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		recs = c.ReadAll(tb, topic)
	}()
	<-done
	return recs, tb.msg
}

// TestReadAllCases pins what ReadAll returns: partition, offset and value
// of each record, in order, or its failure message.
func TestReadAllCases(t *testing.T) {
	t.Parallel()
	c := testkafka.Shared(t, 1)[0]
	ctx := context.Background()
	// produce writes values to partition p of topic, in order.
	produce := func(t *testing.T, topic string, p int32, values ...string) {
		cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name       string
		partitions int32 // 0: the topic is not created
		setup      func(t *testing.T, topic string)
		want       []string // "p<partition>@<offset>=<value>"; nil: ReadAll returns nil
		wantFatal  string   // %[1]s is the topic, %[2]s the cluster
	}{
		{name: "empty topic", partitions: 2, setup: func(*testing.T, string) {}},
		{
			name: "sorted by partition then offset", partitions: 3,
			setup: func(t *testing.T, topic string) {
				produce(t, topic, 2, "c0")
				produce(t, topic, 0, "a0", "a1")
				produce(t, topic, 2, "c1")
			},
			want: []string{"p0@0=a0", "p0@1=a1", "p2@0=c0", "p2@1=c1"},
		},
		{
			name: "from the log start", partitions: 2,
			setup: func(t *testing.T, topic string) {
				produce(t, topic, 0, "a0", "a1", "a2")
				produce(t, topic, 1, "b0")
				var o kadm.Offsets
				o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 2})
				o.Add(kadm.Offset{Topic: topic, Partition: 1, At: 1})
				rs, err := c.Admin(t).DeleteRecords(ctx, o)
				if err == nil {
					err = rs.Error()
				}
				if err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"p0@2=a2"},
		},
		{
			name: "aborted transactions and markers skipped", partitions: 1,
			setup: func(t *testing.T, topic string) {
				cl := c.Client(t, kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
				for i, commit := range []bool{true, false, true} {
					if err := cl.BeginTransaction(); err != nil {
						t.Fatal(err)
					}
					v := fmt.Sprintf("txn%d", i)
					if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
						t.Fatal(err)
					}
					if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []string{"p0@0=txn0", "p0@4=txn2"},
		},
		{
			name: "stops before an open transaction", partitions: 1,
			setup: func(t *testing.T, topic string) {
				produce(t, topic, 0, "plain")
				cl := c.Client(t, kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cl.EndTransaction(ctx, kgo.TryAbort) })
				if err := cl.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
					t.Fatal(err)
				}
				produce(t, topic, 0, "after")
			},
			want: []string{"p0@0=plain"},
		},
		{
			name: "unknown topic", setup: func(*testing.T, string) {},
			wantFatal: "testkafka: list start offsets of %[1]s on cluster %[2]s: UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			topic := testkafka.Topic(t, "ra")
			if tt.partitions > 0 {
				c.CreateTopic(t, topic, tt.partitions, nil)
			}
			tt.setup(t, topic)
			recs, fatal := readAll(t, c, topic)
			if tt.wantFatal != "" {
				if want := fmt.Sprintf(tt.wantFatal, topic, c.Name); fatal != want {
					t.Fatalf("ReadAll failed with\n%q\nwant\n%q", fatal, want)
				}
				return
			}
			if fatal != "" {
				t.Fatalf("ReadAll: %s", fatal)
			}
			if tt.want == nil && recs != nil {
				t.Fatalf("ReadAll = %v, want nil", recs)
			}
			var got []string
			for _, r := range recs {
				got = append(got, fmt.Sprintf("p%d@%d=%s", r.Partition, r.Offset, r.Value))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("ReadAll = %q, want %q", got, tt.want)
			}
		})
	}
}

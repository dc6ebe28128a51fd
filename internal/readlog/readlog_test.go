package readlog

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestToEndRetriesMovingLeaders answers the first ListOffsets requests with
// per-partition errors that mean a leader is moving, as a broker does right
// after a topic is created or while a node restarts: ToEnd waits them out
// and reads every record. A non-retriable error fails at once.
func TestToEndRetriesMovingLeaders(t *testing.T) {
	tests := []struct {
		name    string
		code    int16
		times   int64
		wantErr bool
	}{
		{"no errors", 0, 0, false},
		{"not leader twice", kerr.NotLeaderForPartition.Code, 2, false},
		{"leader not available", kerr.LeaderNotAvailable.Code, 3, false},
		{"not authorized", kerr.TopicAuthorizationFailed.Code, 1, true},
		// Callers handle a missing topic themselves (no index yet, say):
		// it must not be waited out.
		{"unknown topic", kerr.UnknownTopicOrPartition.Code, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
			cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("t"))...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Partition: int32(i % 2), Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cl.Close()
			var calls atomic.Int64
			c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if calls.Add(1) > tt.times {
					return nil, nil, false
				}
				return testkafka.ListOffsetsAnswer(req.(*kmsg.ListOffsetsRequest), func(string, int32) (int16, int64) {
					return tt.code, -1
				}), nil, true
			})
			n := 0
			err = ToEnd(context.Background(), opts, "t", func(*kgo.Record) { n++ })
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error; read %d records", n)
				}
				if calls.Load() != 1 {
					t.Errorf("%d ListOffsets requests for a non-retriable error, want 1", calls.Load())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != 20 {
				t.Errorf("read %d records, want 20", n)
			}
		})
	}
}

// TestRange reads one partition between two offsets: from the log start
// (first < 0), from the middle, up to and including last, and nothing when
// first is at or past the end.
func TestRange(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("t"))...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	for _, tt := range []struct {
		first, last int64
		want        []int64
	}{
		{-1, -1, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{7, -1, []int64{7, 8, 9}},
		{3, 5, []int64{3, 4, 5}},
		{-1, 1, []int64{0, 1}},
		{10, -1, nil},
		{12, 20, nil},
	} {
		var got []int64
		if err := Range(context.Background(), opts, "t", 0, tt.first, tt.last, func(r *kgo.Record) { got = append(got, r.Offset) }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Range(%d, %d): %v, want %v", tt.first, tt.last, got, tt.want)
		}
	}
}

// TestToEndUnreachableBrokerAnswersAtOnce reads through a proxy that
// closes every connection at once, as one in front of a broker that is
// down does: ToEnd returns the error at once rather than waiting, as
// the Connect REST API needs to answer while the cluster is down (e2e
// TestConnectClusterOutage; a flow's start waits in flow.startRetry).
// Once the proxy lets connections through, ToEnd reads every record.
func TestToEndUnreachableBrokerAnswersAtOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var closed atomic.Int64
	var down atomic.Bool
	down.Store(true)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if down.Load() {
				closed.Add(1)
				conn.Close()
				continue
			}
			up, err := net.Dial("tcp", c.ListenAddrs()[0])
			if err != nil {
				conn.Close()
				continue
			}
			go func() { io.Copy(up, conn); up.Close() }()
			go func() { io.Copy(conn, up); conn.Close() }()
		}
	}()
	connect := []kgo.Opt{kgo.SeedBrokers(ln.Addr().String())}
	began := time.Now()
	if err := ToEnd(context.Background(), connect, "t", func(*kgo.Record) {}); err == nil {
		t.Fatalf("no error through a proxy that closed %d connections", closed.Load())
	} else {
		// kgo's own retries take a few seconds; endsRetryFor (30 s)
		// is what must not be waited.
		took := time.Since(began)
		t.Logf("error after %v: %v", took.Round(time.Millisecond), err)
		if took >= endsRetryFor {
			t.Errorf("the error took %v, past endsRetryFor", took)
		}
	}
	down.Store(false)
	n := 0
	if err := ToEnd(context.Background(), connect, "t", func(*kgo.Record) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("read %d records, want 5", n)
	}
}

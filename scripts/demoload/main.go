// Command demoload writes the demo's source data: a few topics with keys,
// headers and explicit timestamps, and one tombstone per partition.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", os.Getenv("KAFKA_A_BOOTSTRAP"), "source cluster bootstrap servers")
	n := flag.Int("records", 1000, "records per topic")
	flag.Parse()
	if err := load(strings.Split(*bootstrap, ","), *n); err != nil {
		fmt.Fprintln(os.Stderr, "demoload:", err)
		os.Exit(1)
	}
}

func load(seeds []string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	topics := map[string]int32{"orders": 3, "payments": 2, "clicks": 4, "load-test": 1}
	for t, parts := range topics {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, t); err != nil {
			return fmt.Errorf("creating %s: %w", t, err)
		}
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for t, parts := range topics {
		for i := 0; i < n; i++ {
			r := &kgo.Record{
				Topic:     t,
				Partition: int32(i) % parts,
				Key:       []byte(fmt.Sprintf("%s-%d", t, i%50)),
				Value:     []byte(fmt.Sprintf(`{"topic":%q,"seq":%d}`, t, i)),
				Timestamp: base.Add(time.Duration(i) * time.Second),
				Headers:   []kgo.RecordHeader{{Key: "origin", Value: []byte("demo")}, {Key: "seq", Value: []byte(fmt.Sprint(i))}},
			}
			if i >= n-int(parts) {
				r.Value = nil // a tombstone per partition
			}
			recs = append(recs, r)
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

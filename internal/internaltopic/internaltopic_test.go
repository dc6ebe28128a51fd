package internaltopic

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCreate(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	created, err := Create(ctx, adm, Compacted("t.internal", 1, "x.replication.factor"))
	if err != nil || !created {
		t.Fatalf("first create: created %v, err %v", created, err)
	}
	created, err = Create(ctx, adm, Compacted("t.internal", 1, "x.replication.factor"))
	if err != nil || created {
		t.Fatalf("second create: created %v, err %v; want an existing topic to be fine", created, err)
	}
	n, err := Partitions(ctx, adm, "t.internal")
	if err != nil || n != 1 {
		t.Fatalf("Partitions = %d, %v", n, err)
	}
	_, err = Create(ctx, adm, Compacted("other.internal", 3, "x.replication.factor"))
	if err == nil || !strings.Contains(err.Error(), "key x.replication.factor") {
		t.Fatalf("replication factor 3 on one broker: %v; want an error naming the key", err)
	}
}

package mirrorclient_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kmirror/kmirror/mirrorclient"
)

// A consumer of group "orders-app" fails over from cluster A to cluster B:
// it reads where MM2's checkpoints say it was on A, in B's terms.
func Example() {
	ctx := context.Background()
	b, err := mirrorclient.New(mirrorclient.WithSeedBrokers("b-kafka:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	hops, err := b.ReplicationHops(ctx, "A")
	if err != nil {
		log.Fatal(err)
	}
	if hops < 0 {
		log.Fatal("A does not replicate into B")
	}
	offsets, err := b.RemoteConsumerOffsets(ctx, "orders-app", "A", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for tp, off := range offsets {
		fmt.Printf("resume %s at %d\n", tp, off)
	}
}

// TranslateOffsets takes the same properties as Java's
// RemoteClusterUtils.translateOffsets.
func ExampleTranslateOffsets() {
	props := map[string]string{
		"bootstrap.servers": "b-kafka:9093",
		"security.protocol": "SASL_SSL",
		"sasl.mechanism":    "SCRAM-SHA-512",
		"sasl.jaas.config":  `org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="secret";`,
	}
	offsets, err := mirrorclient.TranslateOffsets(context.Background(), props, "A", "orders-app", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(offsets), "partitions to resume")
}

// With IdentityReplicationPolicy topics keep their names, so the source
// cluster must be named to tell remote topics apart.
func ExampleWithIdentityPolicy() {
	c, err := mirrorclient.New(
		mirrorclient.WithSeedBrokers("b-kafka:9092"),
		mirrorclient.WithIdentityPolicy("A"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println(c.RemoteTopic("A", "orders"), c.CheckpointsTopic("A"))
	// Output: orders A.checkpoints.internal
}

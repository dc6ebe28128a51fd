package clients

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name         string
		role         Role
		props        map[string]string
		id           string
		maxBytes     int32
		partitionMax int32
	}{
		{"consumer, nothing set", Consumer, withSeed(), "A->B|kmirror|replication-consumer", DefaultFetchMaxBytes, DefaultPartitionFetchMaxBytes},
		// With the Java keys set, the role defaults add nothing and the
		// keys apply.
		{"consumer, Java keys set", Consumer, withSeed("fetch.max.bytes", "1", "max.partition.fetch.bytes", "1"),
			"A->B|kmirror|replication-consumer", 1, 1},
		{"consumer, user's client.id first", Consumer, withSeed("client.id", "app"), "app|A->B|kmirror|replication-consumer",
			DefaultFetchMaxBytes, DefaultPartitionFetchMaxBytes},
		// Producers and admins keep franz-go's fetch defaults.
		{"producer", Producer, withSeed(), "A->B|kmirror|replication-consumer", 50 << 20, 1 << 20},
		{"admin", Admin, withSeed("client.id", "x"), "x|A->B|kmirror|replication-consumer", 50 << 20, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, opts, err := New(ID("A->B", "replication-consumer"), tt.role, tt.props, kgo.ClientID("ignored"), kgo.ClientID(""))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// The extra options come last: here they clear the ID.
			if got := cl.OptValue(kgo.ClientID); got != "" {
				t.Errorf("client id %v with extra options, want them applied last", got)
			}
			rd, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			if got := rd.OptValue(kgo.ClientID); got != tt.id {
				t.Errorf("client id %v, want %s", got, tt.id)
			}
			if got := rd.OptValue(kgo.MetadataMinAge).(time.Duration); got != 500*time.Millisecond {
				t.Errorf("metadata min age %v", got)
			}
			if got := rd.OptValue(kgo.FetchMaxBytes).(int32); got != tt.maxBytes {
				t.Errorf("fetch max bytes %d, want %d", got, tt.maxBytes)
			}
			if got := rd.OptValue(kgo.FetchMaxPartitionBytes).(int32); got != tt.partitionMax {
				t.Errorf("partition fetch max bytes %d, want %d", got, tt.partitionMax)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for name, props := range map[string]map[string]string{
		"no bootstrap":      {},
		"bad number":        withSeed("fetch.max.bytes", "lots"),
		"port with a note":  {"bootstrap.servers": "localhost:9092 # 需要根据实际情况修改"},
		"port out of range": {"bootstrap.servers": "localhost:90920"},
	} {
		t.Run(name, func(t *testing.T) {
			if cl, _, err := New(ID("A->B", "r"), Consumer, props); err == nil {
				cl.Close()
				t.Error("no error")
			}
		})
	}
}

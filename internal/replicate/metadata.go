package replicate

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/datapath"
)

// metadataWait bounds how long Assign waits for the producers to learn
// the partitions just added to remote topics they know.
const metadataWait = 5 * time.Second

// awaitProducers has every producer that knows the remote topic of a
// partition of ps, but not the partition (added since it last read the
// target's metadata), learn it before records of ps are fetched: a
// producer fails a record for a partition beyond those it knows at once.
// A producer that does not know the topic loads it whole at its first
// record. It waits up to metadataWait, then goes on with a warning.
func (r *Replicator) awaitProducers(ps []datapath.Partition) {
	last := make(map[string]int32) // remote topic -> highest partition of ps
	for _, p := range ps {
		last[p.Remote] = max(last[p.Remote], p.TP.Partition)
	}
	lacks := func(cl *kgo.Client) string {
		for topic, p := range last {
			if leader, _, _ := cl.PartitionLeader(topic, p); leader >= 0 {
				continue
			}
			if leader, _, _ := cl.PartitionLeader(topic, 0); leader >= 0 {
				return topic
			}
		}
		return ""
	}
	deadline := time.Now().Add(metadataWait)
	for _, cl := range r.producers() {
		for i := 0; ; i++ {
			topic := lacks(cl)
			if topic == "" {
				break
			}
			if time.Now().After(deadline) {
				r.cfg.Log.Warn("the producer does not know partitions just added to a remote topic; records of them are retried until it does", "topic", topic, "waited", metadataWait.String())
				return
			}
			if i%25 == 0 {
				cl.ForceMetadataRefresh()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

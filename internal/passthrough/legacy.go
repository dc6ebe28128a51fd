package passthrough

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// Message formats v0 and v1 (magic 0/1, Kafka before 0.11 or a topic with
// an old message.format.version) are message sets, not record batches:
// they cannot be forwarded as they are and are re-encoded as v2 batches
// (see split). A v0 message has no timestamp; it becomes -1 (Kafka's "no
// timestamp") in the v2 batch, which a CreateTime target accepts and
// consumers read as -1, as Kafka's own up-conversion does.

// noLegacyTimestamp is the v2 timestamp of a record read from a v0 message.
const noLegacyTimestamp = -1

// recordMillis is a decoded record's timestamp for a v2 batch; franz-go
// leaves it zero for a v0 message.
func recordMillis(r *kgo.Record) int64 {
	if r.Timestamp.IsZero() {
		return noLegacyTimestamp
	}
	return r.Timestamp.UnixMilli()
}

// noteLegacy logs, once per partition, that p's source has batches of
// message format v0/v1 that are converted to v2.
func (pl *Pipeline) noteLegacy(p *partition, magic int8) {
	if _, seen := pl.legacySeen.LoadOrStore(p.tp, true); seen {
		return
	}
	pl.cfg.Log.Info("passthrough: source partition holds message format v0/v1; its batches are converted to v2 (v0 records get timestamp -1)",
		"topic", p.tp.Topic, "partition", p.tp.Partition, "magic", magic)
}

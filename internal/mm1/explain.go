package mm1

import (
	"bytes"
	"io"
)

// rfKeys are the MM2 settings behind the replication factor of the topics
// kmirror creates on the target; an MM1 user sets them all with
// --replication.factor.
var rfKeys = []string{"replication.factor", "offset.storage.replication.factor",
	"offset-syncs.topic.replication.factor", "checkpoints.topic.replication.factor",
	"heartbeats.topic.replication.factor"}

// RFHint is what an error about the replication factor of a topic kmirror
// creates says instead of "(key K)": the MM1 flag that sets K.
func (o *Options) RFHint(key string) string {
	if o.ReplicationFactor != "" {
		return "(--replication.factor " + o.ReplicationFactor + ", MM2 key " + key + ")"
	}
	return "(MM2 key " + key + " at its default, as --replication.factor is not given; " +
		"give --replication.factor N with N at most the number of brokers of the target, or -1 for the broker default)"
}

// ExplainWriter returns a writer that passes everything to w, with the
// replication factor errors of the flow ("... (key
// offset.storage.replication.factor): INVALID_REPLICATION_FACTOR ...")
// naming --replication.factor instead of a key an MM1 user never wrote.
// Log handlers write one record per Write, so a record is rewritten whole.
// The hint holds no quote or backslash: JSON logs stay valid.
func (o *Options) ExplainWriter(w io.Writer) io.Writer {
	pairs := make([][2][]byte, 0, len(rfKeys))
	for _, k := range rfKeys {
		pairs = append(pairs, [2][]byte{[]byte("(key " + k + ")"), []byte(o.RFHint(k))})
	}
	return &explainWriter{w: w, pairs: pairs}
}

type explainWriter struct {
	w     io.Writer
	pairs [][2][]byte
}

func (e *explainWriter) Write(p []byte) (int, error) {
	out := p
	for _, r := range e.pairs {
		if bytes.Contains(out, r[0]) {
			out = bytes.ReplaceAll(out, r[0], r[1])
		}
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

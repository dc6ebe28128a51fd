package mm1

import (
	"bytes"
	"io"
	"strings"
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

// Explain returns s with the replication factor errors of the flow ("...
// (key offset.storage.replication.factor): INVALID_REPLICATION_FACTOR
// ...") naming --replication.factor instead of a key an MM1 user never
// wrote. The hint holds no quote or backslash: JSON logs stay valid.
func (o *Options) Explain(s string) string {
	for _, k := range rfKeys {
		s = strings.ReplaceAll(s, "(key "+k+")", o.RFHint(k))
	}
	return s
}

// ExplainWriter returns a writer that passes everything to w, Explained.
// Log handlers write one record per Write, so a record is rewritten whole.
func (o *Options) ExplainWriter(w io.Writer) io.Writer {
	return &explainWriter{w: w, explain: o.Explain}
}

type explainWriter struct {
	w       io.Writer
	explain func(string) string
}

func (e *explainWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("(key ")) {
		if _, err := e.w.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if _, err := io.WriteString(e.w, e.explain(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

package connect

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzStoreApply feeds the connect config topic's reader any key and
// value, as another Connect cluster (or anyone who can write the topic)
// may leave them: apply must not panic, and a connector it keeps has
// properties.
func FuzzStoreApply(f *testing.F) {
	f.Add([]byte("connector-a"), []byte(`{"properties":{"name":"a","connector.class":"MirrorSourceConnector"}}`), []byte(`{"state":"PAUSED","state.v2":"STOPPED"}`))
	f.Add([]byte("connector-a"), []byte(`{"properties":null}`), []byte(`{"state":7}`))
	f.Add([]byte("target-state-a"), []byte(`[]`), []byte(``))
	f.Fuzz(func(t *testing.T, key, value, state []byte) {
		s := &Store{topicLog: &topicLog{topic: "cfg", log: slog.New(slog.NewTextHandler(io.Discard, nil))}, conns: map[string]*Connector{}, opened: true}
		s.apply(&kgo.Record{Key: key, Value: value})
		if len(key) > len("connector-") {
			s.apply(&kgo.Record{Key: append([]byte("target-state-"), key[len("connector-"):]...), Value: state})
		}
		for name, c := range s.conns {
			if c.Props == nil {
				t.Fatalf("connector %q kept without properties", name)
			}
		}
	})
}

// FuzzStatusRecord feeds the status topic's reader any key and value:
// it must not panic, and a record it reads encodes back to one that reads
// the same.
func FuzzStatusRecord(f *testing.F) {
	f.Add([]byte("status-task-a-b-3"), []byte(`{"state":"RUNNING","trace":null,"worker_id":"h:8083","generation":3}`))
	f.Add([]byte("status-connector-a"), []byte(`{"state":"FAILED","trace":"x\ny","worker_id":"","generation":-1}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		s := &StatusStore{topicLog: &topicLog{topic: "st", log: slog.New(slog.NewTextHandler(io.Discard, nil))}, conns: map[string]StatusRecord{}, tasks: map[string]map[int]StatusRecord{}}
		s.apply(&kgo.Record{Key: key, Value: value})
		r, err := DecodeStatus(value)
		if err != nil {
			return
		}
		back, err := DecodeStatus(EncodeStatus(r))
		if err != nil || !sameStatus(r, back) {
			t.Fatalf("%q read as %+v, encoded and read back as %+v (%v)", value, r, back, err)
		}
	})
}

// FuzzRequestJSON feeds the REST API's body readers (a config map, an
// offsets change) any body: they must answer an error or a value, never
// panic.
func FuzzRequestJSON(f *testing.F) {
	f.Add([]byte(`{"name":"a","config":{"tasks.max":1,"x":true,"y":null,"z":"s"}}`))
	f.Add([]byte(`{"offsets":[{"partition":{"cluster":"A","topic":"t","partition":3},"offset":{"offset":41}}]}`))
	f.Add([]byte(`{"offsets":[{"partition":{"cluster":"A","topic":"t","partition":"3"},"offset":null}]}`))
	f.Add([]byte(`{"config":{"a":[1]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var cfg struct {
			Config map[string]any `json:"config"`
		}
		if readJSON(httptest.NewRecorder(), httptest.NewRequest("POST", "/connectors", bytes.NewReader(body)), &cfg) {
			if p, err := props(cfg.Config); err == nil {
				for k, v := range cfg.Config {
					if _, ok := p[k]; !ok && v != nil {
						t.Fatalf("key %q (%v) dropped", k, v)
					}
				}
			}
		}
		var offs struct {
			Offsets []struct {
				Partition map[string]any `json:"partition"`
				Offset    map[string]any `json:"offset"`
			} `json:"offsets"`
		}
		if !readJSON(httptest.NewRecorder(), httptest.NewRequest("PATCH", "/connectors/a/offsets", bytes.NewReader(body)), &offs) {
			return
		}
		for _, o := range offs.Offsets {
			ch, err := parseOffset("A", o.Partition, o.Offset)
			if err == nil && (ch.topic == "" || ch.partition < 0 || (ch.offset != nil && *ch.offset < 0)) {
				t.Fatalf("accepted %s as %+v", body, ch)
			}
		}
	})
}

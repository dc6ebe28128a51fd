package connect

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// TestStoreSkipsMalformedRecords: a config topic on a real broker holding
// records kmirror cannot read keeps every connector what the good records
// said, and each bad record is warned about with its topic, offset and key.
func TestStoreSkipsMalformedRecords(t *testing.T) {
	c := testkafka.Shared(t, 1)[0]
	topic := testkafka.Topic(t, "connect-configs")
	c.CreateTopic(t, topic, 1, nil)
	good := `{"properties":{"connector.class":"MirrorSourceConnector","topics":"a"}}`
	recs := []struct {
		key, value string
		warn       string // part of the warning, "" for none
	}{
		{"connector-keep", good, ""},
		{"target-state-keep", `{"state":"PAUSED"}`, ""},
		{"connector-keep", `{"properties":`, "unexpected end of JSON input"},
		{"connector-keep", `{"properties":"topics=b"}`, "cannot unmarshal string"},
		{"connector-keep", `{"config":{"topics":"b"}}`, `no \"properties\" object`},
		{"target-state-keep", `{"state":"RUNNING"}`, `state \"RUNNING\" is none of`},
		{"target-state-keep", `[1]`, "cannot unmarshal array"},
		{"connector-other", `not json`, "invalid character"},
		{"task-keep-0", `garbage a Connect cluster's task record may hold`, ""},
		{"commit-keep", `{"tasks":1}`, ""},
	}
	var rs []*kgo.Record
	for _, r := range recs {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(r.key), Value: []byte(r.value)})
	}
	c.Produce(t, rs...)

	w := testWorker()
	w.Client["bootstrap.servers"] = strings.Join(c.Bootstrap, ",")
	w.ConfigTopic, w.ConfigRF = topic, 1
	var log bytes.Buffer
	s, err := OpenStore(context.Background(), w, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got := s.List()
	if len(got) != 1 || got[0].Name != "keep" || got[0].State != Paused ||
		!maps.Equal(got[0].Props, map[string]string{"connector.class": "MirrorSourceConnector", "topics": "a"}) {
		t.Errorf("connectors read: %+v, want keep (PAUSED, topics=a) only", got)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var warned []string
	for _, l := range lines {
		if strings.Contains(l, "malformed record") {
			warned = append(warned, l)
		}
	}
	want := 0
	for i, r := range recs {
		if r.warn == "" {
			continue
		}
		line := ""
		if want < len(warned) {
			line = warned[want]
		}
		want++
		for _, part := range []string{"topic=" + topic, "offset=" + strconv.Itoa(i), "key=" + r.key, r.warn} {
			if !strings.Contains(line, part) {
				t.Errorf("record %d (%s): warning %q lacks %q", i, r.key, line, part)
			}
		}
	}
	if len(warned) != want {
		t.Errorf("%d warnings, want %d:\n%s", len(warned), want, log.String())
	}
}

package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/internaltopic"
)

// StatusRecord is a value of Connect's status topic, as
// KafkaStatusBackingStore writes it with schemas off:
//
//	{"state":"RUNNING","trace":null,"worker_id":"host:8083","generation":3}
//
// under the keys status-connector-NAME and status-task-NAME-ID; a null
// value (a deleted connector) removes the entry.
type StatusRecord struct {
	State      string  `json:"state"`
	Trace      *string `json:"trace"`
	WorkerID   string  `json:"worker_id"`
	Generation int32   `json:"generation"`
}

// Connect's states (AbstractStatus.State).
var statusStates = map[string]bool{"UNASSIGNED": true, "RUNNING": true, "PAUSED": true, "FAILED": true,
	"RESTARTING": true, "DESTROYED": true, "STOPPED": true}

// EncodeStatus is the bytes of a status record, fields in Connect's schema
// order.
func EncodeStatus(r StatusRecord) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as Jackson writes
	_ = enc.Encode(r)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// DecodeStatus reads a status record.
func DecodeStatus(b []byte) (StatusRecord, error) {
	var v struct {
		State      *string         `json:"state"`
		Trace      *string         `json:"trace"`
		WorkerID   *string         `json:"worker_id"`
		Generation json.RawMessage `json:"generation"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return StatusRecord{}, fmt.Errorf("not a status record: %s", jsonError(err))
	}
	if v.State == nil || !statusStates[*v.State] {
		return StatusRecord{}, errors.New("state is missing or not one of Connect's")
	}
	if v.WorkerID == nil {
		return StatusRecord{}, errors.New("worker_id is missing")
	}
	// A number, as Connect reads it (a Long); not a string.
	g, err := strconv.ParseInt(string(v.Generation), 10, 32)
	if err != nil {
		return StatusRecord{}, errors.New("generation is missing or not a 32-bit number")
	}
	return StatusRecord{State: *v.State, Trace: v.Trace, WorkerID: *v.WorkerID, Generation: int32(g)}, nil
}

// Keys of the status topic.
const (
	connectorStatusPrefix = "status-connector-"
	taskStatusPrefix      = "status-task-"
)

// ConnectorStatusKey and TaskStatusKey are the status topic's keys.
func ConnectorStatusKey(name string) string { return connectorStatusPrefix + name }

// TaskStatusKey is the key of task id of connector name.
func TaskStatusKey(name string, id int) string {
	return taskStatusPrefix + name + "-" + strconv.Itoa(id)
}

// ParseStatusKey reads a status topic key: a connector's (task -1) or a
// task's. Topic status keys and others are not ok.
func ParseStatusKey(key string) (name string, task int, ok bool) {
	switch {
	case strings.HasPrefix(key, connectorStatusPrefix):
		name = strings.TrimPrefix(key, connectorStatusPrefix)
		return name, -1, name != ""
	case strings.HasPrefix(key, taskStatusPrefix):
		rest := strings.TrimPrefix(key, taskStatusPrefix)
		i := strings.LastIndexByte(rest, '-')
		if i <= 0 {
			return "", 0, false
		}
		n, err := strconv.Atoi(rest[i+1:])
		if err != nil || n < 0 || strconv.Itoa(n) != rest[i+1:] {
			return "", 0, false
		}
		return rest[:i], n, true
	}
	return "", 0, false
}

// StatusStore is the Connect status topic (status.storage.topic) of the
// worker's cluster: every worker writes the state of its own share and
// reads everybody's, so any worker answers a status request for all.
type StatusStore struct {
	*topicLog

	mu    sync.Mutex
	conns map[string]StatusRecord
	tasks map[string]map[int]StatusRecord
}

// OpenStatusStore creates the status topic unless it exists (compacted,
// status.storage.partitions, as Connect) and reads it to its end.
func OpenStatusStore(ctx context.Context, w *Worker, log *slog.Logger) (*StatusStore, error) {
	s := &StatusStore{conns: map[string]StatusRecord{}, tasks: map[string]map[int]StatusRecord{}}
	spec := internaltopic.Compacted(w.StatusTopic, w.StatusRF, "status.storage.replication.factor")
	spec.Partitions = w.StatusPartitions
	l, err := newLog(ctx, w, "status", spec, s.apply, log)
	if err != nil {
		return nil, err
	}
	s.topicLog = l
	if err := l.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *StatusStore) apply(r *kgo.Record) {
	name, task, ok := ParseStatusKey(string(r.Key))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(r.Value) == 0 {
		if task < 0 {
			delete(s.conns, name)
		} else {
			delete(s.tasks[name], task)
		}
		return
	}
	v, err := DecodeStatus(r.Value)
	if err != nil {
		s.log.Warn("skipping a malformed record of the connect status topic", "topic", s.topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
		return
	}
	if task < 0 {
		s.conns[name] = v
		return
	}
	if s.tasks[name] == nil {
		s.tasks[name] = map[int]StatusRecord{}
	}
	s.tasks[name][task] = v
}

// Connector returns the last status of connector name.
func (s *StatusStore) Connector(name string) (StatusRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.conns[name]
	return r, ok
}

// Task returns the last status of task id of connector name.
func (s *StatusStore) Task(name string, id int) (StatusRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.tasks[name][id]
	return r, ok
}

// Names lists the connectors the topic holds a status of.
func (s *StatusStore) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for n := range s.conns {
		seen[n] = true
	}
	for n, ts := range s.tasks {
		if len(ts) > 0 {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Tasks lists the task ids of connector name the topic holds.
func (s *StatusStore) Tasks(name string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.tasks[name]))
	for id := range s.tasks[name] {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

// Put writes a status record under key; nil writes a tombstone.
func (s *StatusStore) Put(ctx context.Context, key string, r *StatusRecord) error {
	rec := &kgo.Record{Key: []byte(key)}
	if r != nil {
		rec.Value = EncodeStatus(*r)
	}
	return s.write(ctx, rec)
}

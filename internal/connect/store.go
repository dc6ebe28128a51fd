package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/backoff"
	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/readlog"
)

// Target states of a connector, as Connect's config topic holds them.
const (
	Started = "STARTED"
	Paused  = "PAUSED"
	Stopped = "STOPPED"
)

// Connector is one connector as the config topic says.
type Connector struct {
	Name  string
	Props map[string]string
	State string // Started, Paused or Stopped
}

// Store is a Connect config topic: one partition, compacted. Records are
// those of Connect's KafkaConfigBackingStore with schemas off:
//
//	connector-NAME          {"properties":{...}}          (null: deleted)
//	target-state-NAME       {"state":"PAUSED","state.v2":"STOPPED"}
//	restart-connector-NAME  {"include-tasks":true,"only-failed":false}
//
// kmirror writes no task or commit records: it runs one flow per connector
// on every worker. Every write is read back before it returns, so a caller
// sees its own change; the topic's order is the only agreement between
// workers.
type Store struct {
	*topicLog

	mu       sync.Mutex
	conns    map[string]*Connector
	gen      int              // bumped on every change read
	opened   bool             // the first read to the end is done
	restarts []RestartRequest // read after opening, not yet taken
}

// RestartRequest is a restart-connector- record: every worker restarts
// its own share of the connector (all of it, or only when failed).
type RestartRequest struct {
	Connector    string
	IncludeTasks bool
	OnlyFailed   bool
}

// topicLog is an internal topic of the worker's cluster that a worker
// reads to its end and writes, as Connect's KafkaBasedLog.
type topicLog struct {
	topic   string
	connect []kgo.Opt
	cl      *kgo.Client
	log     *slog.Logger
	apply   func(*kgo.Record)

	// reading holds a token while a read of the topic is under way:
	// one at a time, and a caller with a deadline (a REST request) gives
	// up waiting for another's read at its deadline (CatchUp).
	reading chan struct{}
	ends    map[int32]int64
}

// newLog creates topic (spec) unless it exists; open reads it to its end
// through apply.
func newLog(ctx context.Context, w *Worker, name string, spec internaltopic.Spec, apply func(*kgo.Record), log *slog.Logger, popts ...kgo.Opt) (*topicLog, error) {
	opts, err := clients.Build(clients.ID("connect", name), clients.Producer, w.Client)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.Path, err)
	}
	cl, err := kgo.NewClient(append(opts, popts...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.Path, err)
	}
	connect, err := clients.Build(clients.ID("connect", name+"-reader"), clients.Consumer, w.Client)
	if err != nil {
		cl.Close()
		return nil, err
	}
	l := &topicLog{topic: spec.Name, connect: connect, cl: cl, log: log, apply: apply, reading: make(chan struct{}, 1)}
	if _, err := internaltopic.Create(ctx, kadm.NewClient(cl), spec); err != nil {
		cl.Close()
		return nil, fmt.Errorf("%s: %s topic: %w", w.Path, name, err)
	}
	return l, nil
}

// open reads the topic to its end, or closes the client.
func (l *topicLog) open(ctx context.Context) error {
	// A topic just created may not be known to every broker yet: its
	// partitions are UNKNOWN_TOPIC_OR_PARTITION for a moment.
	unknown := func(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }
	err := backoff.Retry(ctx, topicKnown, unknown, func() error { return l.CatchUp(ctx) })
	if err != nil {
		l.cl.Close()
		return fmt.Errorf("reading %s: %w", l.topic, err)
	}
	return nil
}

// topicKnown is how long open waits for every broker to know a topic.
var topicKnown = backoff.Policy{First: 100 * time.Millisecond, Max: 2 * time.Second, For: 10 * time.Second}

// OpenStore creates the config topic unless it exists and reads it to its
// end.
func OpenStore(ctx context.Context, w *Worker, log *slog.Logger) (*Store, error) {
	s := &Store{conns: map[string]*Connector{}}
	spec := internaltopic.Compacted(w.ConfigTopic, w.ConfigRF, "config.storage.replication.factor")
	l, err := newLog(ctx, w, "config", spec, s.apply, log, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	s.topicLog = l
	if err := l.open(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.opened = true
	s.mu.Unlock()
	return s, nil
}

// Close releases the log's client.
func (l *topicLog) Close() { l.cl.Close() }

// CatchUp reads what was written to the topic since the last read. It
// waits for a read under way first, at most until ctx ends: with the
// cluster down, the background read holds on for the client's retries
// (30 s), and a PUT waited for it and then for its own read, 60 s, past
// the REST API's write deadline (a loaded run of e2e
// TestConnectClusterOutage).
func (l *topicLog) CatchUp(ctx context.Context) error {
	select {
	case l.reading <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("reading %s: waiting for the read under way: %w", l.topic, ctx.Err())
	}
	defer func() { <-l.reading }()
	ends, err := readlog.From(ctx, l.connect, l.topic, l.ends, l.apply)
	if err != nil {
		return err
	}
	l.ends = ends
	return nil
}

// write produces recs to the topic and reads it back to its end.
func (l *topicLog) write(ctx context.Context, recs ...*kgo.Record) error {
	for _, r := range recs {
		r.Topic = l.topic
	}
	if err := l.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("writing to %s: %w", l.topic, err)
	}
	return l.CatchUp(ctx)
}

// Follow reads new records every interval until ctx ends; changed is
// called after a read that changed something.
func (s *Store) Follow(ctx context.Context, every time.Duration, changed func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := s.Gen()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.CatchUp(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reading the connect config topic", "topic", s.topic, "err", err)
		}
		if g := s.Gen(); g != last {
			last = g
			changed()
		}
	}
}

// Gen counts the changes read so far.
func (s *Store) Gen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

type connectorValue struct {
	Properties map[string]string `json:"properties"`
}

type stateValue struct {
	State   string `json:"state"`
	StateV2 string `json:"state.v2,omitempty"`
}

func (s *Store) apply(r *kgo.Record) {
	key := string(r.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case strings.HasPrefix(key, "connector-"):
		name := strings.TrimPrefix(key, "connector-")
		if len(r.Value) == 0 {
			delete(s.conns, name)
			break
		}
		var v connectorValue
		err := json.Unmarshal(r.Value, &v)
		if err == nil && v.Properties == nil {
			err = errors.New(`no "properties" object`)
		}
		if err != nil {
			s.malformed(r, err)
			return
		}
		c := s.conns[name]
		if c == nil {
			c = &Connector{Name: name, State: Started}
			s.conns[name] = c
		}
		c.Props = v.Properties
	case strings.HasPrefix(key, "target-state-"):
		name := strings.TrimPrefix(key, "target-state-")
		c := s.conns[name]
		if c == nil || len(r.Value) == 0 {
			return
		}
		var v stateValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			s.malformed(r, err)
			return
		}
		st := v.StateV2
		if st == "" {
			st = v.State
		}
		if st != Started && st != Paused && st != Stopped {
			s.malformed(r, fmt.Errorf("state %q is none of %s, %s, %s", st, Started, Paused, Stopped))
			return
		}
		c.State = st
	case strings.HasPrefix(key, "restart-connector-"):
		// Connect acts on restart requests read after start only.
		if !s.opened || len(r.Value) == 0 {
			return
		}
		var v restartValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			s.malformed(r, err)
			return
		}
		s.restarts = append(s.restarts, RestartRequest{strings.TrimPrefix(key, "restart-connector-"), v.IncludeTasks, v.OnlyFailed})
	default:
		return // task-, commit-, session-key records of a Connect cluster
	}
	s.gen++
}

type restartValue struct {
	IncludeTasks bool `json:"include-tasks"`
	OnlyFailed   bool `json:"only-failed"`
}

// Restart writes a restart request, as Connect's leader does for
// POST /connectors/NAME/restart?includeTasks=...: every worker restarts
// its share.
func (s *Store) Restart(ctx context.Context, req RestartRequest) error {
	b, _ := json.Marshal(restartValue{req.IncludeTasks, req.OnlyFailed})
	return s.write(ctx, &kgo.Record{Key: []byte("restart-connector-" + req.Connector), Value: b})
}

// TakeRestarts returns the restart requests read since the last call.
func (s *Store) TakeRestarts() []RestartRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.restarts
	s.restarts = nil
	return out
}

// malformed warns of a record apply skips: the connector keeps what the
// records before it said.
func (s *Store) malformed(r *kgo.Record, err error) {
	s.log.Warn("skipping a malformed record of the connect config topic", "topic", s.topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
}

// Get returns connector name.
func (s *Store) Get(name string) (Connector, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[name]
	if !ok {
		return Connector{}, false
	}
	return *c, true
}

// List returns every connector, sorted by name.
func (s *Store) List() []Connector {
	s.mu.Lock()
	out := make([]Connector, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, *c)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Put writes a connector's config, and its target state when state is not
// empty (a new connector).
func (s *Store) Put(ctx context.Context, name string, props map[string]string, state string) error {
	v, err := json.Marshal(connectorValue{props})
	if err != nil {
		return err
	}
	recs := []*kgo.Record{{Key: []byte("connector-" + name), Value: v}}
	if state != "" {
		recs = append(recs, stateRecord(name, state))
	}
	return s.write(ctx, recs...)
}

// SetState writes a connector's target state.
func (s *Store) SetState(ctx context.Context, name, state string) error {
	return s.write(ctx, stateRecord(name, state))
}

// Delete writes the tombstones of a connector.
func (s *Store) Delete(ctx context.Context, name string) error {
	return s.write(ctx, &kgo.Record{Key: []byte("target-state-" + name)}, &kgo.Record{Key: []byte("connector-" + name)})
}

func stateRecord(name, state string) *kgo.Record {
	v := stateValue{State: state, StateV2: state}
	if state == Stopped {
		v.State = Paused // what a Connect worker older than KIP-875 understands
	}
	b, _ := json.Marshal(v)
	return &kgo.Record{Key: []byte("target-state-" + name), Value: b}
}

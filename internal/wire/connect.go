package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Connector names used by dedicated-mode MM2 (the simple class names). They
// are the first element of every Connect offsets-topic key.
const (
	SourceConnector     = "MirrorSourceConnector"
	CheckpointConnector = "MirrorCheckpointConnector"
	HeartbeatConnector  = "MirrorHeartbeatConnector"
)

// ErrOffsetDeleted is returned by DecodeOffsetValue for a tombstone (null or
// empty value, or the JSON literal null): the offset was reset or deleted.
var ErrOffsetDeleted = errors.New("connect offset deleted")

// SourceOffsetKey returns the offsets-topic key MirrorSourceConnector uses for
// one replicated partition:
//
//	["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t1"}]
func SourceOffsetKey(cluster, topic string, partition int32) []byte {
	b := connectKeyStart(SourceConnector)
	b = appendJSONField(b, "cluster", cluster, true)
	b = appendJSONIntField(b, "partition", partition)
	b = appendJSONField(b, "topic", topic, false)
	return append(b, "}]"...)
}

// CheckpointOffsetKey returns the offsets-topic key MirrorCheckpointConnector
// uses for one group partition (topic is the downstream name):
//
//	["MirrorCheckpointConnector",{"partition":0,"topic":"A.t1","group":"g1"}]
func CheckpointOffsetKey(group, topic string, partition int32) []byte {
	b := connectKeyStart(CheckpointConnector)
	b = append(b, `"partition":`...)
	b = strconv.AppendInt(b, int64(partition), 10)
	b = appendJSONField(b, "topic", topic, false)
	b = appendJSONField(b, "group", group, false)
	return append(b, "}]"...)
}

// HeartbeatOffsetKey returns the offsets-topic key MirrorHeartbeatConnector
// uses:
//
//	["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]
func HeartbeatOffsetKey(sourceAlias, targetAlias string) []byte {
	b := connectKeyStart(HeartbeatConnector)
	b = appendJSONField(b, "sourceClusterAlias", sourceAlias, true)
	b = appendJSONField(b, "targetClusterAlias", targetAlias, false)
	return append(b, "}]"...)
}

// OffsetValue returns the offsets-topic value {"offset":N}.
func OffsetValue(offset int64) []byte {
	b := append(make([]byte, 0, 32), `{"offset":`...)
	b = strconv.AppendInt(b, offset, 10)
	return append(b, '}')
}

// DecodeOffsetValue parses {"offset":N}. A tombstone yields ErrOffsetDeleted.
func DecodeOffsetValue(v []byte) (int64, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || string(t) == "null" {
		return 0, ErrOffsetDeleted
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return 0, fmt.Errorf("wire: connect offset value: not a JSON object: %w", ErrMalformed)
	}
	raw, ok := m["offset"]
	if !ok {
		return 0, fmt.Errorf("wire: connect offset value: no offset field: %w", ErrMalformed)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("wire: connect offset value: offset is not an integer: %w", ErrMalformed)
	}
	return n, nil
}

// DecodeSourceOffsetKey parses a MirrorSourceConnector offsets-topic key. It
// accepts any field order and whitespace, and any connector name (Connect
// mode allows custom names), which it returns.
func DecodeSourceOffsetKey(key []byte) (connector, cluster, topic string, partition int32, err error) {
	connector, m, err := decodeConnectKey(key)
	if err != nil {
		return "", "", "", 0, err
	}
	if cluster, err = m.str("cluster"); err != nil {
		return "", "", "", 0, err
	}
	if topic, err = m.str("topic"); err != nil {
		return "", "", "", 0, err
	}
	if partition, err = m.int32("partition"); err != nil {
		return "", "", "", 0, err
	}
	return connector, cluster, topic, partition, nil
}

// DecodeCheckpointOffsetKey parses a MirrorCheckpointConnector offsets-topic key.
func DecodeCheckpointOffsetKey(key []byte) (connector, group, topic string, partition int32, err error) {
	connector, m, err := decodeConnectKey(key)
	if err != nil {
		return "", "", "", 0, err
	}
	if group, err = m.str("group"); err != nil {
		return "", "", "", 0, err
	}
	if topic, err = m.str("topic"); err != nil {
		return "", "", "", 0, err
	}
	if partition, err = m.int32("partition"); err != nil {
		return "", "", "", 0, err
	}
	return connector, group, topic, partition, nil
}

// DecodeHeartbeatOffsetKey parses a MirrorHeartbeatConnector offsets-topic key.
func DecodeHeartbeatOffsetKey(key []byte) (connector, sourceAlias, targetAlias string, err error) {
	connector, m, err := decodeConnectKey(key)
	if err != nil {
		return "", "", "", err
	}
	if sourceAlias, err = m.str("sourceClusterAlias"); err != nil {
		return "", "", "", err
	}
	if targetAlias, err = m.str("targetClusterAlias"); err != nil {
		return "", "", "", err
	}
	return connector, sourceAlias, targetAlias, nil
}

// ConnectPartition returns the offsets-topic partition Java's default
// partitioner picks for key: (murmur2(key) & 0x7fffffff) % numPartitions.
// It panics if numPartitions <= 0.
func ConnectPartition(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		panic("wire: ConnectPartition: numPartitions must be positive")
	}
	if key == nil {
		key = []byte{} // a nil key would take kgo's sticky path
	}
	// kgo's default key partitioner is the Java-compatible murmur2 hasher.
	p := kgo.StickyKeyPartitioner(nil).ForTopic("")
	return int32(p.Partition(&kgo.Record{Key: key}, int(numPartitions)))
}

func connectKeyStart(connector string) []byte {
	b := append(make([]byte, 0, 96), '[')
	b = appendJSONString(b, connector)
	return append(b, ",{"...)
}

func appendJSONField(b []byte, name, value string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = appendJSONString(b, name)
	b = append(b, ':')
	return appendJSONString(b, value)
}

func appendJSONIntField(b []byte, name string, v int32) []byte {
	b = append(b, ',')
	b = appendJSONString(b, name)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(v), 10)
}

const hexDigits = "0123456789ABCDEF"

// appendJSONString appends s as a JSON string escaped the way Jackson does by
// default: \" \\ \b \t \n \f \r, \u00XX (upper-case hex) for other control
// characters, everything else (including DEL, '/' and non-ASCII) raw UTF-8.
// Invalid UTF-8 becomes U+FFFD, as it would in a Java String.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}

// partitionMap is the decoded Connect source-partition object.
type partitionMap map[string]json.RawMessage

func decodeConnectKey(key []byte) (string, partitionMap, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(key, &parts); err != nil || len(parts) != 2 {
		return "", nil, fmt.Errorf("wire: connect offset key: want a two-element JSON array: %w", ErrMalformed)
	}
	var connector string
	if err := json.Unmarshal(parts[0], &connector); err != nil {
		return "", nil, fmt.Errorf("wire: connect offset key: connector name is not a string: %w", ErrMalformed)
	}
	var m partitionMap
	if err := json.Unmarshal(parts[1], &m); err != nil || m == nil {
		return "", nil, fmt.Errorf("wire: connect offset key: partition is not a JSON object: %w", ErrMalformed)
	}
	return connector, m, nil
}

func (m partitionMap) str(name string) (string, error) {
	var s *string
	raw, ok := m[name]
	if !ok || json.Unmarshal(raw, &s) != nil || s == nil {
		return "", fmt.Errorf("wire: connect offset key: %s: missing or not a string: %w", name, ErrMalformed)
	}
	return *s, nil
}

func (m partitionMap) int32(name string) (int32, error) {
	raw, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("wire: connect offset key: %s: missing: %w", name, ErrMalformed)
	}
	n, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("wire: connect offset key: %s: not a 32-bit integer: %w", name, ErrMalformed)
	}
	return int32(n), nil
}

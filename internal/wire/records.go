package wire

// Record is implemented by the three internal record types.
type Record interface {
	Key() ([]byte, error)
	Value() ([]byte, error)
}

// Heartbeat is a record of the heartbeats topic (always partition 0).
type Heartbeat struct {
	SourceAlias string
	TargetAlias string
	Timestamp   int64 // epoch milliseconds; also the record timestamp
}

// Key encodes sourceClusterAlias STRING, targetClusterAlias STRING.
func (h Heartbeat) Key() ([]byte, error) {
	b, err := appendString(make([]byte, 0, 4+len(h.SourceAlias)+len(h.TargetAlias)), "heartbeat source alias", h.SourceAlias)
	if err != nil {
		return nil, err
	}
	return appendString(b, "heartbeat target alias", h.TargetAlias)
}

// Value encodes version INT16 (0), timestamp INT64. It never fails.
func (h Heartbeat) Value() ([]byte, error) {
	b := appendInt16(make([]byte, 0, 10), CurrentVersion)
	return appendInt64(b, h.Timestamp), nil
}

// DecodeHeartbeat decodes a heartbeats record.
func DecodeHeartbeat(key, value []byte) (Heartbeat, error) {
	k := newReader("heartbeat key", key)
	h := Heartbeat{
		SourceAlias: k.string("sourceClusterAlias"),
		TargetAlias: k.string("targetClusterAlias"),
	}
	if k.err != nil {
		return Heartbeat{}, k.err
	}
	v := newReader("heartbeat value", value)
	v.int16("version")
	h.Timestamp = v.int64("timestamp")
	if v.err != nil {
		return Heartbeat{}, v.err
	}
	return h, nil
}

// Checkpoint is a record of the <source>.checkpoints.internal topic (always
// partition 0). Topic and Partition are the downstream (renamed) names.
type Checkpoint struct {
	Group            string
	Topic            string
	Partition        int32
	UpstreamOffset   int64
	DownstreamOffset int64
	Metadata         string // upstream commit metadata; "" when none
}

// Key encodes group STRING, topic STRING, partition INT32.
func (c Checkpoint) Key() ([]byte, error) {
	b, err := appendString(make([]byte, 0, 8+len(c.Group)+len(c.Topic)), "checkpoint group", c.Group)
	if err != nil {
		return nil, err
	}
	if b, err = appendString(b, "checkpoint topic", c.Topic); err != nil {
		return nil, err
	}
	return appendInt32(b, c.Partition), nil
}

// Value encodes version INT16 (0), upstreamOffset INT64, offset INT64,
// metadata STRING.
func (c Checkpoint) Value() ([]byte, error) {
	b := appendInt16(make([]byte, 0, 20+len(c.Metadata)), CurrentVersion)
	b = appendInt64(b, c.UpstreamOffset)
	b = appendInt64(b, c.DownstreamOffset)
	return appendString(b, "checkpoint metadata", c.Metadata)
}

// DecodeCheckpoint decodes a checkpoints record.
func DecodeCheckpoint(key, value []byte) (Checkpoint, error) {
	k := newReader("checkpoint key", key)
	c := Checkpoint{
		Group:     k.string("group"),
		Topic:     k.string("topic"),
		Partition: k.int32("partition"),
	}
	if k.err != nil {
		return Checkpoint{}, k.err
	}
	v := newReader("checkpoint value", value)
	v.int16("version")
	c.UpstreamOffset = v.int64("upstreamOffset")
	c.DownstreamOffset = v.int64("offset")
	c.Metadata = v.string("metadata")
	if v.err != nil {
		return Checkpoint{}, v.err
	}
	return c, nil
}

// OffsetSync is a record of the mm2-offset-syncs.<alias>.internal topic
// (always partition 0). Topic is the upstream name, not renamed.
type OffsetSync struct {
	Topic            string
	Partition        int32
	UpstreamOffset   int64
	DownstreamOffset int64
}

// Key encodes topic STRING, partition INT32.
func (s OffsetSync) Key() ([]byte, error) {
	b, err := appendString(make([]byte, 0, 6+len(s.Topic)), "offset sync topic", s.Topic)
	if err != nil {
		return nil, err
	}
	return appendInt32(b, s.Partition), nil
}

// Value encodes upstreamOffset INT64, offset INT64, with no version header.
// It never fails.
func (s OffsetSync) Value() ([]byte, error) {
	b := appendInt64(make([]byte, 0, 16), s.UpstreamOffset)
	return appendInt64(b, s.DownstreamOffset), nil
}

// DecodeOffsetSync decodes an offset-syncs record.
func DecodeOffsetSync(key, value []byte) (OffsetSync, error) {
	k := newReader("offset sync key", key)
	s := OffsetSync{
		Topic:     k.string("topic"),
		Partition: k.int32("partition"),
	}
	if k.err != nil {
		return OffsetSync{}, k.err
	}
	v := newReader("offset sync value", value)
	s.UpstreamOffset = v.int64("upstreamOffset")
	s.DownstreamOffset = v.int64("offset")
	if v.err != nil {
		return OffsetSync{}, v.err
	}
	return s, nil
}

// Encode returns r's key and value.
func Encode(r Record) (key, value []byte, err error) {
	if key, err = r.Key(); err != nil {
		return nil, nil, err
	}
	if value, err = r.Value(); err != nil {
		return nil, nil, err
	}
	return key, value, nil
}

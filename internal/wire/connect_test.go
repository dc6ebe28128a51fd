package wire

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestConnectKeysGolden(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{string(SourceOffsetKey("A", "t1", 0)), `["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t1"}]`},
		{string(CheckpointOffsetKey("g1", "A.t1", 0)), `["MirrorCheckpointConnector",{"partition":0,"topic":"A.t1","group":"g1"}]`},
		{string(HeartbeatOffsetKey("A", "B")), `["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]`},
		{string(SourceOffsetKey("B", "x.y-z_9", -2147483648)), `["MirrorSourceConnector",{"cluster":"B","partition":-2147483648,"topic":"x.y-z_9"}]`},
		{string(OffsetValue(41)), `{"offset":41}`},
		{string(OffsetValue(0)), `{"offset":0}`},
		{string(OffsetValue(-1)), `{"offset":-1}`},
		{string(OffsetValue(math.MaxInt64)), `{"offset":9223372036854775807}`},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
}

// Jackson's default escaping, not encoding/json's.
func TestJSONEscaping(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`a"b\c`, `"a\"b\\c"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x01\x1f\x0b", `"\u0000\u0001\u001F\u000B"`},
		{"\x7f/<>&", "\"\x7f/<>&\""},
		{"ü日本\u2028😀", "\"ü日本\u2028😀\""},
		{"bad\xffutf8", "\"bad\uFFFDutf8\""},
	} {
		if got := string(appendJSONString(nil, tc.in)); got != tc.want {
			t.Errorf("escape(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDecodeConnectKeys(t *testing.T) {
	odd := "a\"\\\n\x01ü"
	conn, cluster, topic, p, err := DecodeSourceOffsetKey(SourceOffsetKey(odd, "t1", 7))
	if err != nil || conn != SourceConnector || cluster != odd || topic != "t1" || p != 7 {
		t.Errorf("source round trip: %q %q %q %d %v", conn, cluster, topic, p, err)
	}
	// Other orders, whitespace and connector names are accepted.
	conn, cluster, topic, p, err = DecodeSourceOffsetKey([]byte(" [ \"my-mm2\" , {\"topic\" : \"t\", \"partition\":3,\n\"cluster\":\"C\", \"extra\":true} ] "))
	if err != nil || conn != "my-mm2" || cluster != "C" || topic != "t" || p != 3 {
		t.Errorf("lenient source: %q %q %q %d %v", conn, cluster, topic, p, err)
	}
	conn, g, topic, p, err := DecodeCheckpointOffsetKey(CheckpointOffsetKey("g1", "A.t1", 5))
	if err != nil || conn != CheckpointConnector || g != "g1" || topic != "A.t1" || p != 5 {
		t.Errorf("checkpoint: %q %q %q %d %v", conn, g, topic, p, err)
	}
	conn, s, tg, err := DecodeHeartbeatOffsetKey(HeartbeatOffsetKey("A", odd))
	if err != nil || conn != HeartbeatConnector || s != "A" || tg != odd {
		t.Errorf("heartbeat: %q %q %q %v", conn, s, tg, err)
	}

	for _, bad := range []string{
		``, `null`, `{}`, `[]`, `["MirrorSourceConnector"]`,
		`["a",{"cluster":"A","partition":0,"topic":"t"},1]`,
		`[1,{"cluster":"A","partition":0,"topic":"t"}]`,
		`["a",null]`, `["a",[]]`,
		`["a",{"partition":0,"topic":"t"}]`,
		`["a",{"cluster":null,"partition":0,"topic":"t"}]`,
		`["a",{"cluster":"A","partition":"0","topic":"t"}]`,
		`["a",{"cluster":"A","partition":0.5,"topic":"t"}]`,
		`["a",{"cluster":"A","partition":2147483648,"topic":"t"}]`,
		`["a",{"cluster":"A","topic":"t"}]`,
		`["a",{"cluster":"A","partition":0,"topic":1}]`,
		`["a",{"cluster":"A","partition":0,"topic":"t"}] x`,
		string(CheckpointOffsetKey("g", "t", 0)),
	} {
		if _, _, _, _, err := DecodeSourceOffsetKey([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeSourceOffsetKey(%s) err = %v", bad, err)
		}
	}
	if _, _, _, _, err := DecodeCheckpointOffsetKey(SourceOffsetKey("A", "t", 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("checkpoint decode of source key: %v", err)
	}
	if _, _, _, err := DecodeHeartbeatOffsetKey([]byte(`["h",{"sourceClusterAlias":"A"}]`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("heartbeat decode missing target: %v", err)
	}
}

func TestDecodeOffsetValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{`{"offset":41}`, 41}, {` { "offset" : -1 , "x": 2 } `, -1}, {`{"offset":9223372036854775807}`, math.MaxInt64},
	} {
		if got, err := DecodeOffsetValue([]byte(tc.in)); err != nil || got != tc.want {
			t.Errorf("DecodeOffsetValue(%s) = %d, %v", tc.in, got, err)
		}
	}
	for _, in := range [][]byte{nil, {}, []byte(" null "), []byte("  ")} {
		if _, err := DecodeOffsetValue(in); !errors.Is(err, ErrOffsetDeleted) {
			t.Errorf("DecodeOffsetValue(%q) err = %v, want ErrOffsetDeleted", in, err)
		}
	}
	for _, in := range []string{`{}`, `[]`, `41`, `{"offset":"41"}`, `{"offset":1.5}`, `{"offset":null}`, `{"offset":9223372036854775808}`, `{`} {
		if _, err := DecodeOffsetValue([]byte(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeOffsetValue(%s) err = %v, want ErrMalformed", in, err)
		}
	}
}

// Vectors from Kafka's UtilsTest.testMurmur2, checked through a partition
// count of MaxInt32 so the full 31-bit positive hash shows.
func TestConnectPartitionMurmur2Vectors(t *testing.T) {
	for _, tc := range []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
		{"", 275646681},
	} {
		want := (tc.hash & 0x7fffffff) % math.MaxInt32
		if got := ConnectPartition([]byte(tc.key), math.MaxInt32); got != want {
			t.Errorf("ConnectPartition(%q) = %d, want %d", tc.key, got, want)
		}
	}
	if got := ConnectPartition([]byte("foobar"), 50); got != 16 {
		t.Errorf("foobar/50 = %d, want 16", got)
	}
	if ConnectPartition(nil, 25) != ConnectPartition([]byte{}, 25) {
		t.Error("nil and empty keys differ")
	}
}

func TestConnectPartitionMatchesKgo(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("mm2-offsets.A.internal")
	for i := range 200 {
		k := SourceOffsetKey("A", "topic-"+strings.Repeat("x", i%7), int32(i))
		for _, n := range []int32{1, 5, 25} {
			if got, want := ConnectPartition(k, n), int32(p.Partition(&kgo.Record{Key: k}, int(n))); got != want {
				t.Fatalf("%s over %d: %d, kgo %d", k, n, got, want)
			}
		}
	}
}

func TestConnectPartitionPanicsOnZero(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	ConnectPartition([]byte("k"), 0)
}

// Encoded keys must stay valid JSON for encoding/json readers.
func TestConnectKeysAreValidJSON(t *testing.T) {
	for _, k := range [][]byte{
		SourceOffsetKey("\x00\x7f\"", "t", 1),
		CheckpointOffsetKey("g\u2028", "t", 1),
		HeartbeatOffsetKey("\xff", "\t"),
	} {
		if !json.Valid(k) {
			t.Errorf("invalid JSON: %q", k)
		}
	}
}

package wire

import (
	"bytes"
	"testing"
)

// Each fuzz target checks that decoding never panics and that whatever
// decodes re-encodes to the canonical prefix of the input and decodes again
// to the same value.

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add(unhex(f, "00014100 0142"), unhex(f, "0000 0000018bcfe56800"))
	f.Add([]byte{0xff, 0xff}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if n, err := ValueVersion(v); err == nil && len(v) < 2 {
			t.Fatalf("version %d from %d bytes", n, len(v))
		}
		h, err := DecodeHeartbeat(k, v)
		if err != nil {
			return
		}
		k2, v2 := mustEncode(t, h)
		if !bytes.HasPrefix(k, k2) || !bytes.Equal(v2[2:], v[2:10]) {
			t.Fatalf("re-encode mismatch: % x / % x vs % x / % x", k2, v2, k, v)
		}
		if h2, err := DecodeHeartbeat(k2, v2); err != nil || h2 != h {
			t.Fatalf("second decode: %+v, %v", h2, err)
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(unhex(f, "000267310004412e743100000000"), unhex(f, "0000000000000000002a00000000000000280000"))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 'm', 'd'})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		c, err := DecodeCheckpoint(k, v)
		if err != nil {
			return
		}
		k2, v2 := mustEncode(t, c)
		if !bytes.HasPrefix(k, k2) || !bytes.HasPrefix(v[2:], v2[2:]) {
			t.Fatalf("re-encode mismatch: % x / % x vs % x / % x", k2, v2, k, v)
		}
		if c2, err := DecodeCheckpoint(k2, v2); err != nil || c2 != c {
			t.Fatalf("second decode: %+v, %v", c2, err)
		}
	})
}

func FuzzDecodeOffsetSync(f *testing.F) {
	f.Add(unhex(f, "0002743100000003"), unhex(f, "000000000000002a0000000000000028"))
	f.Add([]byte{0x80, 0}, []byte{1})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		s, err := DecodeOffsetSync(k, v)
		if err != nil {
			return
		}
		k2, v2 := mustEncode(t, s)
		if !bytes.HasPrefix(k, k2) || !bytes.HasPrefix(v, v2) {
			t.Fatalf("re-encode mismatch: % x / % x vs % x / % x", k2, v2, k, v)
		}
		if s2, err := DecodeOffsetSync(k2, v2); err != nil || s2 != s {
			t.Fatalf("second decode: %+v, %v", s2, err)
		}
	})
}

func FuzzDecodeSourceOffsetKey(f *testing.F) {
	f.Add([]byte(`["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t1"}]`))
	f.Add([]byte(`[ "x" , { "topic" : "t\u0001", "partition": -5, "cluster": "" } ]`))
	f.Fuzz(func(t *testing.T, key []byte) {
		conn, cluster, topic, p, err := DecodeSourceOffsetKey(key)
		if err != nil {
			return
		}
		k2 := SourceOffsetKey(cluster, topic, p)
		c2, cl2, t2, p2, err := DecodeSourceOffsetKey(k2)
		if err != nil || c2 != SourceConnector || cl2 != cluster || t2 != topic || p2 != p {
			t.Fatalf("round trip of %q (%q): %q %q %q %d %v", key, conn, c2, cl2, t2, p2, err)
		}
	})
}

func FuzzDecodeOffsetValue(f *testing.F) {
	f.Add([]byte(`{"offset":41}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, v []byte) {
		n, err := DecodeOffsetValue(v)
		if err != nil {
			return
		}
		if n2, err := DecodeOffsetValue(OffsetValue(n)); err != nil || n2 != n {
			t.Fatalf("round trip %d: %d, %v", n, n2, err)
		}
	})
}

func FuzzDecodeCheckpointOffsetKey(f *testing.F) {
	f.Add(CheckpointOffsetKey("g1", "t1", 3))
	f.Add([]byte(`["MirrorCheckpointConnector",{"group":"g","partition":1e10,"topic":"t"}]`))
	f.Fuzz(func(t *testing.T, key []byte) {
		_, group, topic, p, err := DecodeCheckpointOffsetKey(key)
		if err != nil {
			return
		}
		_, g2, t2, p2, err := DecodeCheckpointOffsetKey(CheckpointOffsetKey(group, topic, p))
		if err != nil || g2 != group || t2 != topic || p2 != p {
			t.Fatalf("round trip of %q: %q %q %d %v", key, g2, t2, p2, err)
		}
	})
}

func FuzzDecodeHeartbeatOffsetKey(f *testing.F) {
	f.Add(HeartbeatOffsetKey("A", "B"))
	f.Add([]byte(`["MirrorHeartbeatConnector",{"sourceClusterAlias":null,"targetClusterAlias":"B"}]`))
	f.Fuzz(func(t *testing.T, key []byte) {
		_, src, tgt, err := DecodeHeartbeatOffsetKey(key)
		if err != nil {
			return
		}
		_, s2, t2, err := DecodeHeartbeatOffsetKey(HeartbeatOffsetKey(src, tgt))
		if err != nil || s2 != src || t2 != tgt {
			t.Fatalf("round trip of %q: %q %q %v", key, s2, t2, err)
		}
	})
}

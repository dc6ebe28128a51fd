package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustEncode(t testing.TB, r Record) (key, value []byte) {
	t.Helper()
	k, v, err := Encode(r)
	if err != nil {
		t.Fatalf("encode %+v: %v", r, err)
	}
	return k, v
}

// Golden bytes from the reference examples (§2.2–2.4).
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rec        Record
		key, value string
	}{
		{"heartbeat", Heartbeat{"A", "B", 1700000000000},
			"00 01 41 00 01 42", "00 00 00 00 01 8b cf e5 68 00"},
		{"checkpoint", Checkpoint{Group: "g1", Topic: "A.t1", Partition: 0, UpstreamOffset: 42, DownstreamOffset: 40},
			"00 02 67 31 00 04 41 2e 74 31 00 00 00 00",
			"00 00 | 00 00 00 00 00 00 00 2a | 00 00 00 00 00 00 00 28 | 00 00"},
		{"offset sync", OffsetSync{Topic: "t1", Partition: 3, UpstreamOffset: 42, DownstreamOffset: 40},
			"00 02 74 31 00 00 00 03", "00 00 00 00 00 00 00 2a 00 00 00 00 00 00 00 28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, v := mustEncode(t, tc.rec)
			if want := unhex(t, tc.key); !bytes.Equal(k, want) {
				t.Errorf("key = % x, want % x", k, want)
			}
			if want := unhex(t, tc.value); !bytes.Equal(v, want) {
				t.Errorf("value = % x, want % x", v, want)
			}
			var got Record
			var err error
			switch tc.rec.(type) {
			case Heartbeat:
				got, err = DecodeHeartbeat(k, v)
			case Checkpoint:
				got, err = DecodeCheckpoint(k, v)
			case OffsetSync:
				got, err = DecodeOffsetSync(k, v)
			}
			if err != nil || got != tc.rec {
				t.Errorf("decode = %+v, %v; want %+v", got, err, tc.rec)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("x", MaxStringLen)
	for _, r := range []Record{
		Heartbeat{},
		Heartbeat{"üñï", "日本", -1},
		Heartbeat{long, long, 1<<63 - 1},
		Checkpoint{Group: long, Topic: "B.A.t", Partition: -1, UpstreamOffset: -1, DownstreamOffset: 1 << 62, Metadata: long},
		Checkpoint{Group: "", Topic: "", Metadata: "meta\x00data"},
		OffsetSync{Topic: long, Partition: 1<<31 - 1, UpstreamOffset: -1 << 63, DownstreamOffset: 7},
	} {
		k, v := mustEncode(t, r)
		var got Record
		var err error
		switch r.(type) {
		case Heartbeat:
			got, err = DecodeHeartbeat(k, v)
		case Checkpoint:
			got, err = DecodeCheckpoint(k, v)
		case OffsetSync:
			got, err = DecodeOffsetSync(k, v)
		}
		if err != nil || got != r {
			t.Errorf("round trip %T: got %v, %v", r, got == r, err)
		}
	}
}

func TestEncodeTooLong(t *testing.T) {
	long := strings.Repeat("x", MaxStringLen+1)
	for _, r := range []Record{
		Heartbeat{SourceAlias: long},
		Heartbeat{TargetAlias: long},
		Checkpoint{Group: long},
		Checkpoint{Topic: long},
		Checkpoint{Metadata: long},
		OffsetSync{Topic: long},
	} {
		if _, _, err := Encode(r); !errors.Is(err, ErrStringTooLong) {
			t.Errorf("%T: err = %v, want ErrStringTooLong", r, err)
		}
	}
}

func TestTrailingBytesIgnoredAndVersion(t *testing.T) {
	k, v := mustEncode(t, Checkpoint{Group: "g", Topic: "t", Partition: 1, UpstreamOffset: 5, DownstreamOffset: 4, Metadata: "m"})
	v[1] = 7 // version 7 is still read with the v0 layout
	k = append(k, 0xde, 0xad)
	v = append(v, 0xbe, 0xef)
	c, err := DecodeCheckpoint(k, v)
	if err != nil || c.Metadata != "m" || c.DownstreamOffset != 4 {
		t.Fatalf("got %+v, %v", c, err)
	}
	if ver, err := ValueVersion(v); ver != 7 || err != nil {
		t.Errorf("ValueVersion = %d, %v", ver, err)
	}
	if _, err := ValueVersion([]byte{0}); !errors.Is(err, ErrMalformed) {
		t.Errorf("ValueVersion(short) err = %v", err)
	}

	hk, hv := mustEncode(t, Heartbeat{"a", "b", 9})
	hv[0] = 0xff // negative version
	if h, err := DecodeHeartbeat(append(hk, 1), append(hv, 1, 2, 3)); err != nil || h.Timestamp != 9 {
		t.Errorf("heartbeat = %+v, %v", h, err)
	}
	sk, sv := mustEncode(t, OffsetSync{"t", 2, 3, 4})
	if s, err := DecodeOffsetSync(append(sk, 9), append(sv, 9)); err != nil || s != (OffsetSync{"t", 2, 3, 4}) {
		t.Errorf("offset sync = %+v, %v", s, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	hk, hv := mustEncode(t, Heartbeat{"A", "B", 1})
	ck, cv := mustEncode(t, Checkpoint{Group: "g1", Topic: "t", Metadata: "md"})
	sk, sv := mustEncode(t, OffsetSync{"t1", 3, 42, 40})
	negLen := []byte{0xff, 0xff, 'a'}

	type dec func(k, v []byte) error
	hb := func(k, v []byte) error { _, err := DecodeHeartbeat(k, v); return err }
	cp := func(k, v []byte) error { _, err := DecodeCheckpoint(k, v); return err }
	os := func(k, v []byte) error { _, err := DecodeOffsetSync(k, v); return err }
	cases := []struct {
		name string
		fn   dec
		k, v []byte
	}{
		{"heartbeat nil key", hb, nil, hv},
		{"heartbeat nil value", hb, hk, nil},
		{"heartbeat empty key", hb, []byte{}, hv},
		{"heartbeat negative length", hb, negLen, hv},
		{"heartbeat string overrun", hb, []byte{0, 5, 'a'}, hv},
		{"heartbeat truncated key", hb, hk[:len(hk)-1], hv},
		{"heartbeat truncated value", hb, hk, hv[:9]},
		{"checkpoint nil key", cp, nil, cv},
		{"checkpoint nil value", cp, ck, nil},
		{"checkpoint negative length", cp, negLen, cv},
		{"checkpoint missing partition", cp, ck[:len(ck)-4], cv},
		{"checkpoint truncated metadata", cp, ck, cv[:len(cv)-1]},
		{"checkpoint negative metadata length", cp, ck, append(append([]byte{}, cv[:18]...), 0x80, 0x00)},
		{"offset sync nil key", os, nil, sv},
		{"offset sync nil value", os, sk, nil},
		{"offset sync truncated key", os, sk[:len(sk)-1], sv},
		{"offset sync truncated value", os, sk, sv[:15]},
		{"offset sync negative length", os, negLen, sv},
	}
	for _, tc := range cases {
		err := tc.fn(tc.k, tc.v)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", tc.name, err)
		}
	}
}

func TestFirstErrorReported(t *testing.T) {
	_, err := DecodeCheckpoint([]byte{0xff, 0xfe}, nil)
	if err == nil || !strings.Contains(err.Error(), "group") || !strings.Contains(err.Error(), "negative") {
		t.Errorf("err = %v, want negative group length", err)
	}
}

package e2e

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// bombValue is the value size of the record in zstdBomb: about 2 GiB,
// the most one Kafka record can hold.
const bombValue = 1<<31 - 100

// zstdBomb returns a record batch (magic 2, zstd) of one record whose
// value is bombValue zero bytes: about 64 KiB on the wire, 2 GiB
// decompressed. Its zstd frame declares no content size, so a decoder
// learns the size only by decoding.
func zstdBomb() []byte {
	var rec []byte
	rec = append(rec, 0, 0, 0, 1) // attributes, timestamp delta, offset delta, key length -1
	rec = binary.AppendVarint(rec, bombValue)
	body := len(rec) + bombValue + 1 // + the header count
	head := binary.AppendVarint(nil, int64(body))
	head = append(head, rec...)

	// Frame: magic, descriptor without content size, 1 MiB window.
	z := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 10 << 3}
	block := func(typ, size int, last bool, data ...byte) {
		h := uint32(size)<<3 | uint32(typ)<<1
		if last {
			h |= 1
		}
		z = append(z, byte(h), byte(h>>8), byte(h>>16))
		z = append(z, data...)
	}
	block(0, len(head), false, head...) // raw: the record up to its value
	for left := bombValue; left > 0; left -= 128 << 10 {
		block(1, min(left, 128<<10), false, 0) // RLE: zeros
	}
	block(0, 1, true, 0) // raw: no headers

	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 4, // zstd
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: z,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// produceRaw writes one raw batch to topic partition p.
func produceRaw(t *testing.T, c *testkafka.Cluster, topic string, p int32, raw []byte) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	td, err := c.Admin(t).ListTopics(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.Topic, rt.TopicID = topic, td[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	cl := c.Client(t)
	for try := 0; ; try++ {
		resp, err := req.RequestWith(ctx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		if err == nil {
			return
		}
		if !kerr.IsRetriable(err) || try == 20 {
			t.Fatalf("producing the batch: %v", err)
		}
		time.Sleep(250 * time.Millisecond) // a new topic's leader is not ready yet
	}
}

// peakRSS returns the most resident memory pid has had (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// TestZstdBombBounded copies a topic one of whose partitions holds a
// batch that decompresses to 2 GiB. Re-encoding decompresses it only up
// to kmirror's bound (128 MiB) and stops that partition with an error
// naming it; forwarding sends the batch as it is. Either way the
// other partition is copied and kmirror's peak memory stays far below
// the batch's size.
func TestZstdBombBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"re-encode", []string{reencodeAll}},
		{"passthrough", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := testkafka.Shared(t, 2)
			a, b := cs[0], cs[1]
			topic := testkafka.Topic(t, "bomb")
			a.CreateTopic(t, topic, 2, nil)
			produceRaw(t, a, topic, 0, zstdBomb())
			src, dst := alias(t, "src"), alias(t, "dst")
			cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{src + "->" + dst + ".topics = " + topic}, tc.extra...)...))
			p := startKmirror(t, cfg)
			produceN(t, a, topic, 2, 20, "after")
			remote := src + "." + topic
			adm := b.Admin(t)
			ends := func() map[int32]int64 {
				out := map[int32]int64{}
				if !hasTopic(t, b, remote) {
					return out
				}
				lo, err := adm.ListEndOffsets(ctx(t), remote)
				if err != nil {
					return out
				}
				lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
				return out
			}
			if tc.extra != nil {
				waitFor(t, 90*time.Second, "partition 1 copied and partition 0 reported", func() bool {
					return ends()[1] == 10 && strings.Contains(p.log.String(), "partition stopped: a source batch decompresses beyond")
				})
				if !strings.Contains(p.log.String(), "partition=0") {
					t.Errorf("the stop does not name partition 0:\n%s", p.log.String())
				}
				if e := ends()[0]; e != 0 {
					t.Errorf("partition 0 has %d records on the target, want 0", e)
				}
			} else {
				waitFor(t, 90*time.Second, "both partitions copied", func() bool {
					e := ends()
					return e[0] == 11 && e[1] == 10
				})
			}
			peak := peakRSS(t, p.cmd.Process.Pid)
			t.Logf("kmirror peak RSS %d MiB for a batch of %d MiB decompressed", peak>>20, int64(bombValue)>>20)
			if peak > 1<<30 {
				t.Errorf("kmirror peak RSS %d MiB, want under 1 GiB", peak>>20)
			}
			p.stop()
		})
	}
}

package robustness

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// rec is a record as kcat -J prints it.
type rec struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	TS        int64    `json:"ts"`
	Key       *string  `json:"key"`
	Value     *string  `json:"payload"`
	Headers   []string `json:"headers"` // name, value, name, value...
}

// seq is the generator's unique number of the record ("seq" header).
func (r rec) seq() string {
	for i := 0; i+1 < len(r.Headers); i += 2 {
		if r.Headers[i] == "seq" {
			return r.Headers[i+1]
		}
	}
	return ""
}

// readKcat reads every committed record of topic on c with kcat (an
// independent client: librdkafka), per partition in offset order.
func readKcat(t testing.TB, c *testkafka.Cluster, topic string) (map[int32][]rec, error) {
	out := c.Kcat(t, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J", "-X", "isolation.level=read_committed")
	parts := map[int32][]rec{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r rec
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("kcat %s: %v in %q", topic, err, line)
		}
		parts[r.Partition] = append(parts[r.Partition], r)
	}
	for _, rs := range parts {
		slices.SortFunc(rs, func(a, b rec) int { return int(a.Offset - b.Offset) })
	}
	return parts, sc.Err()
}

// partitionCheck is what comparePartition found for one partition.
type partitionCheck struct {
	source, target int
	duplicates     int
	lost           []int64 // source offsets missing on the target
	allowedGone    int     // missing but before the cut (remote topic deleted)
	problems       []string
	// srcOffset maps each target offset to the source offset of its record.
	srcOffset map[int64]int64
}

// comparePartition checks a target partition against its source
// partition: every source record at or after cut is on the target (the
// ones before may be missing: a deleted remote topic took them), with
// the same key, value, headers and timestamp; the first copies appear in
// source order; nothing is on the target that is not in the source
// partition; duplicates are counted.
func comparePartition(src, dst []rec, cut int64) partitionCheck {
	pc := partitionCheck{source: len(src), target: len(dst), srcOffset: map[int64]int64{}}
	idx := map[string]int{}
	for i, r := range src {
		idx[r.seq()] = i
	}
	seen := map[string]bool{}
	last := -1
	for _, d := range dst {
		s := d.seq()
		i, ok := idx[s]
		if !ok {
			if len(pc.problems) < 5 {
				pc.problems = append(pc.problems, fmt.Sprintf("target offset %d (seq %q) is not a record of the source partition", d.Offset, s))
			}
			continue
		}
		pc.srcOffset[d.Offset] = src[i].Offset
		if seen[s] {
			pc.duplicates++
			continue
		}
		seen[s] = true
		if i < last && len(pc.problems) < 5 {
			pc.problems = append(pc.problems, fmt.Sprintf("target offset %d holds source offset %d after source offset %d: out of order", d.Offset, src[i].Offset, src[last].Offset))
		}
		last = max(last, i)
		if diff := recDiff(src[i], d); diff != "" && len(pc.problems) < 5 {
			pc.problems = append(pc.problems, fmt.Sprintf("source offset %d, target offset %d: %s", src[i].Offset, d.Offset, diff))
		}
	}
	for _, r := range src {
		if seen[r.seq()] {
			continue
		}
		if r.Offset < cut {
			pc.allowedGone++
		} else {
			pc.lost = append(pc.lost, r.Offset)
		}
	}
	return pc
}

func recDiff(s, d rec) string {
	str := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return fmt.Sprintf("%q", *p)
	}
	switch {
	case str(s.Key) != str(d.Key):
		return "key " + str(s.Key) + " != " + str(d.Key)
	case str(s.Value) != str(d.Value):
		return "value " + str(s.Value) + " != " + str(d.Value)
	case s.TS != d.TS:
		return fmt.Sprintf("timestamp %d != %d", s.TS, d.TS)
	case !slices.Equal(s.Headers, d.Headers):
		return fmt.Sprintf("headers %q != %q", s.Headers, d.Headers)
	}
	return ""
}

// checkpoint is one record of the checkpoints topic (MM2's format, read
// here without kmirror's code).
type checkpoint struct {
	group, topic         string
	partition            int32
	upstream, downstream int64
	offset               int64 // in the checkpoints topic
	producer             int64 // the writer's producer ID (-1 unknown)
	at                   time.Time
}

// decodeCheckpoint decodes MM2's checkpoint key (group and topic as
// int16-length strings, partition int32) and value (version int16,
// upstream offset int64, downstream offset int64, metadata).
func decodeCheckpoint(k, v []byte) (checkpoint, error) {
	var c checkpoint
	str := func(b []byte) (string, []byte, error) {
		if len(b) < 2 {
			return "", nil, errors.New("short string")
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return "", nil, errors.New("short string")
		}
		return string(b[2 : 2+n]), b[2+n:], nil
	}
	var err error
	rest := k
	if c.group, rest, err = str(rest); err != nil {
		return c, err
	}
	if c.topic, rest, err = str(rest); err != nil {
		return c, err
	}
	if len(rest) < 4 || len(v) < 18 {
		return c, errors.New("short checkpoint")
	}
	c.partition = int32(binary.BigEndian.Uint32(rest))
	c.upstream = int64(binary.BigEndian.Uint64(v[2:]))
	c.downstream = int64(binary.BigEndian.Uint64(v[10:]))
	return c, nil
}

// lastCopies maps each source offset to the target offset of its last
// copy, from srcOffset (target offset -> source offset).
func lastCopies(srcOffset map[int64]int64) map[int64]int64 {
	last := make(map[int64]int64, len(srcOffset))
	for o, s := range srcOffset {
		if cur, ok := last[s]; !ok || o > cur {
			last[s] = o
		}
	}
	return last
}

// skipped returns the lowest source offset at or after up whose every copy
// on the target lies below down (-1 if none), from lastCopies: a group
// that resumes at down on the target never reads that record. A record
// copied twice (two workers copying one partition for a moment,
// at-least-once) may have a copy below down as long as another lies at or
// after it.
func skipped(last map[int64]int64, up, down int64) int64 {
	lo := int64(-1)
	for s, o := range last {
		if s >= up && o < down && (lo < 0 || s < lo) {
			lo = s
		}
	}
	return lo
}

// checkCheckpoints checks a group partition's checkpoints in the order
// written: the downstream offset never goes back unless the upstream one
// did (the group's offset went back: MM2's rule emits that rewind, and a
// source coordinator that moves can answer an older offset for a moment,
// robustness.md), neither moves alone against the other, and none is
// ahead of the copied data (no source record at or after the upstream
// offset has all its copies below the downstream one, and the downstream
// offset is within the target partition). Two workers that both believe
// they lead the flow for a moment (one frozen past its session) may not
// make one go back either: the new leader's task fences the old one's.
func checkCheckpoints(cps []checkpoint, srcOffset map[int64]int64, targetEnd int64) (problems []string) {
	last := lastCopies(srcOffset)
	for i, c := range cps {
		if i > 0 {
			p := cps[i-1]
			rewind := c.upstream < p.upstream && c.downstream <= p.downstream
			if !rewind && (c.upstream < p.upstream || c.downstream < p.downstream) {
				msg := fmt.Sprintf("checkpoint %s %s[%d] went back: upstream %d -> %d, downstream %d -> %d (checkpoints offsets %d, %d; producers %d, %d)",
					c.group, c.topic, c.partition, p.upstream, c.upstream, p.downstream, c.downstream, p.offset, c.offset, p.producer, c.producer)
				problems = append(problems, msg)
			}
		}
		if c.downstream > targetEnd {
			problems = append(problems, fmt.Sprintf("checkpoint %s %s[%d] downstream %d beyond the target's end %d", c.group, c.topic, c.partition, c.downstream, targetEnd))
		}
		if s := skipped(last, c.upstream, c.downstream); s >= 0 {
			problems = append(problems, fmt.Sprintf("checkpoint %s %s[%d] (upstream %d, downstream %d) is ahead of the data: every copy of source offset %d on the target is below %d",
				c.group, c.topic, c.partition, c.upstream, c.downstream, s, c.downstream))
		}
		if len(problems) >= 5 {
			break
		}
	}
	return problems
}

// metricSeries parses Prometheus text: series name{labels} -> value for
// the metric name.
func metricSeries(body, name string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		var v float64
		if _, err := fmt.Sscan(l[i+1:], &v); err == nil {
			out[l[len(name):i]] = v
		}
	}
	return out
}

// label returns the value of label in a {a="x",b="y"} string.
func label(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

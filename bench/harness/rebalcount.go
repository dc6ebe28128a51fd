package harness

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// This file is the pure part of kbench rebalance: the producer's keys and
// what the records read from the target say about each event.

// Arrival is one record read from the target: which source partition
// (an index over all topics' partitions) and sequence number its key
// carries, when it was produced at the source (the record timestamp, which
// both replicators keep) and when the reader got it.
type Arrival struct {
	Partition int
	Seq       int64
	Created   time.Time
	At        time.Time
}

// rebalKey is the key of record seq of partition part in producer run run.
func rebalKey(run, part int, seq int64) []byte {
	return []byte(fmt.Sprintf("%d:%d:%d", run, part, seq))
}

// parseRebalKey reads a key made by rebalKey.
func parseRebalKey(k []byte) (run, part int, seq int64, ok bool) {
	f := strings.Split(string(k), ":")
	if len(f) != 3 {
		return 0, 0, 0, false
	}
	r, err1 := strconv.Atoi(f[0])
	p, err2 := strconv.Atoi(f[1])
	s, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || r < 0 || p < 0 || s < 0 {
		return 0, 0, 0, false
	}
	return r, p, s, true
}

// copyingAgain is how long after at every one of parts partitions had a
// record produced at or after at on the target: for each partition the
// first arrival of such a record, the latest of those. ok is false while
// some partition has none; slowest is the partition that came last (or
// the first without any). arr is in arrival order.
func copyingAgain(arr []Arrival, parts int, at time.Time) (d time.Duration, slowest int, ok bool) {
	first := make([]time.Time, parts)
	left := parts
	i := sort.Search(len(arr), func(i int) bool { return !arr[i].At.Before(at) })
	for _, a := range arr[i:] {
		if a.Partition >= parts || !first[a.Partition].IsZero() || a.Created.Before(at) {
			continue
		}
		first[a.Partition] = a.At
		if left--; left == 0 {
			return a.At.Sub(at), a.Partition, true
		}
	}
	for p, t := range first {
		if t.IsZero() {
			return 0, p, false
		}
	}
	return 0, 0, parts == 0 // parts == 0: nothing to wait for
}

// countDuplicates counts the arrivals whose (partition, seq) arrived
// before, per window: window i holds the arrivals from bounds[i] up to
// bounds[i+1] (the last one to the end; arrivals before bounds[0] count in
// window 0). distinct is the number of different (partition, seq) seen.
func countDuplicates(arr []Arrival, bounds []time.Time) (dups []int64, distinct int64) {
	dups = make([]int64, max(len(bounds), 1))
	seen := map[[2]int64]bool{}
	w := 0
	for _, a := range arr {
		for w+1 < len(bounds) && !a.At.Before(bounds[w+1]) {
			w++
		}
		k := [2]int64{int64(a.Partition), a.Seq}
		if seen[k] {
			dups[w]++
			continue
		}
		seen[k] = true
	}
	return dups, int64(len(seen))
}

// countMissing counts the records the source acknowledged (acked[p] is
// the set of sequence numbers of partition p) that never arrived.
func countMissing(acked []map[int64]bool, arr []Arrival) int64 {
	got := make([]map[int64]bool, len(acked))
	for _, a := range arr {
		if a.Partition < len(acked) && acked[a.Partition][a.Seq] {
			if got[a.Partition] == nil {
				got[a.Partition] = map[int64]bool{}
			}
			got[a.Partition][a.Seq] = true
		}
	}
	var n int64
	for p, s := range acked {
		n += int64(len(s) - len(got[p]))
	}
	return n
}

// rebalPairs are the kmirror/MM2 pairs the rebalance section compares.
var rebalPairs = [][2]string{{KmirrorGroup, MM2}, {KmirrorGroupEOS, MM2EOS}}

// RebalanceSection is the "Scaling out and in" section of
// docs/benchmarks.md for res.
func RebalanceSection(res *RebalanceResults) string {
	m := res.Meta
	var b strings.Builder
	b.WriteString("## Scaling out and in\n\n")
	fmt.Fprintf(&b, "`kbench rebalance` (one run, %s UTC, %s, %d cores, Kafka %s, kmirror %s): %d topics × %d partitions on a one-node source, "+
		"a producer writing %d records/s of 100 B round robin over every partition, each keyed with (producer run, partition, sequence number). "+
		"Each replicator starts with %d workers on fresh aliases; then a worker joins, the oldest is killed with SIGKILL, the next oldest is stopped with SIGTERM; "+
		"%.0f s pass after every partition copies again before the next event. kmirror runs `kmirror.workers = group` (passthrough; exactly-once: %s with %s), "+
		"MM2 one dedicated-mode node per worker on the same file with `dedicated.mode.enable.internal.rest = true` (tasks.max = %d). "+
		"Both use a group session timeout of %d ms (Connect's default; kmirror's is the consumer's 45 s); MM2 runs "+
		"scheduled.rebalance.max.delay.ms = %d (its default of 300 000 would hold a dead node's tasks back for 5 minutes). "+
		"A reader of the target (read_committed for exactly-once) notes when each record arrives. "+
		"**Copying again** is the time from an event until every partition has a record on the target that was produced after the event "+
		"(for kill and stop: produced after the worker's process had exited, counted from the signal); "+
		"For join it counts from the moment the new worker's log says it was given partitions (a JVM starts slowly on this machine; until then nothing moves). "+
		"**Longest stall** is the longest any partition went without a new record arriving, from the event to the next (a new owner's duplicates do not end it). "+
		"*steady* is an event without any change, the floor of both measures. **Duplicates** are records whose (partition, sequence) had arrived before, counted from the event to the next. "+
		"Load average (1 min) at the start: %.2f.\n\n",
		m.Started.UTC().Format("2006-01-02 15:04"), m.CPU, m.Cores, m.Kafka, m.KmirrorRev, m.Topics, m.Partitions, m.Rate, m.Workers,
		m.SettleSec, cmp.Or(m.EOSPath, "the record path"), "the `kmirror-slots-N` balancer", m.TasksMax, m.SessionMS, m.MM2DelayMS, m.Load1Start)
	if m.Note != "" {
		b.WriteString(m.Note + "\n\n")
	}
	by := map[string]RebalanceRun{}
	var order []string
	for _, r := range res.Runs {
		by[r.Replicator] = r
		order = append(order, r.Replicator)
	}
	b.WriteString("| event | workers |")
	for _, r := range order {
		fmt.Fprintf(&b, " %s: copying again (s) | longest stall (s) | duplicates |", r)
	}
	b.WriteString(" load1 |\n|---|---:|")
	b.WriteString(strings.Repeat("---:|---:|---:|", len(order)))
	b.WriteString("---:|\n")
	if len(order) > 0 {
		for i, ev := range res.Runs[0].Events {
			fmt.Fprintf(&b, "| %s | %d |", ev.Name, ev.Workers)
			load := 0.0
			for _, r := range order {
				evs := by[r].Events
				if i >= len(evs) {
					b.WriteString(" – | – | – |")
					continue
				}
				load = max(load, evs[i].Load1)
				c := secText(evs[i].CopyingSec)
				if evs[i].JoinedSec > 0 {
					c += fmt.Sprintf(" (joined after %.1f)", evs[i].JoinedSec)
				}
				fmt.Fprintf(&b, " %s | %.1f | %d |", c, evs[i].StallSec, evs[i].Duplicates)
			}
			fmt.Fprintf(&b, " %.1f |\n", load)
		}
		b.WriteString("| **missing** | |")
		for _, r := range order {
			fmt.Fprintf(&b, " %d of %d | | |", by[r].Missing, by[r].Produced)
		}
		b.WriteString(" |\n")
	}
	if len(order) > 0 {
		b.WriteString("\nLatency from the source producer to the reader of the target, median / 99th percentile (s), of the records that arrived from each event to the next:\n\n| event |")
		for _, r := range order {
			fmt.Fprintf(&b, " %s |", r)
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(order)) + "\n")
		for i, ev := range res.Runs[0].Events {
			fmt.Fprintf(&b, "| %s |", ev.Name)
			for _, r := range order {
				if evs := by[r].Events; i < len(evs) {
					fmt.Fprintf(&b, " %.2f / %.2f |", evs[i].LatencyP50, evs[i].LatencyP99)
				} else {
					b.WriteString(" – |")
				}
			}
			b.WriteString("\n")
		}
	}
	for _, r := range order {
		if e := by[r].Error; e != "" {
			fmt.Fprintf(&b, "\n%s failed: %s\n", r, e)
		}
	}
	for _, p := range rebalPairs {
		k, okK := by[p[0]]
		mm, okM := by[p[1]]
		if !okK || !okM || len(k.Events) != len(mm.Events) {
			continue
		}
		var parts []string
		for i, ev := range k.Events {
			o := mm.Events[i]
			if ev.Name == "steady" {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s: copying again %s, longest stall %s, duplicates %s", ev.Name, rebalRatio(ev.CopyingSec, o.CopyingSec),
				rebalRatio(ev.StallSec, o.StallSec), rebalRatio(float64(ev.Duplicates), float64(o.Duplicates))))
		}
		fmt.Fprintf(&b, "\n%s / %s: %s.\n", p[0], p[1], strings.Join(parts, "; "))
	}
	return b.String()
}

func secText(s float64) string {
	if s < 0 {
		return "not within the timeout"
	}
	return fmt.Sprintf("%.1f", s)
}

// rebalRatio is a/b, or what stands instead when either is missing or b
// is 0.
func rebalRatio(a, b float64) string {
	switch {
	case a < 0 || b < 0:
		return "n/a"
	case b == 0 && a == 0:
		return "both 0"
	case b == 0:
		return "n/a (MM2 0)"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// latencies are the median and the 99th percentile of how long the
// records that arrived in [from, to) took from the source producer to the
// reader (to zero: up to the end); 0 without any.
func latencies(arr []Arrival, from, to time.Time) (p50, p99 time.Duration) {
	i := sort.Search(len(arr), func(i int) bool { return !arr[i].At.Before(from) })
	var ds []time.Duration
	for _, a := range arr[i:] {
		if !to.IsZero() && !a.At.Before(to) {
			break
		}
		ds = append(ds, a.At.Sub(a.Created))
	}
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[(len(ds)-1)/2], ds[(len(ds)-1)*99/100]
}

// longestStall is the longest any of parts partitions went, within [from,
// to), without a record arriving for the first time: duplicates (a new
// owner copying again from older progress) do not end a stall, and a
// partition with nothing new up to to stalled from from to to.
func longestStall(arr []Arrival, parts int, from, to time.Time) (d time.Duration, slowest int) {
	last := make([]time.Time, parts)
	for p := range last {
		last[p] = from
	}
	seen := map[[2]int64]bool{}
	for _, a := range arr {
		k := [2]int64{int64(a.Partition), a.Seq}
		if seen[k] || a.Partition >= parts {
			continue
		}
		seen[k] = true
		if a.At.Before(from) || !a.At.Before(to) {
			continue
		}
		if g := a.At.Sub(last[a.Partition]); g > d {
			d, slowest = g, a.Partition
		}
		last[a.Partition] = a.At
	}
	for p, t := range last {
		if g := to.Sub(t); g > d {
			d, slowest = g, p
		}
	}
	return d, slowest
}

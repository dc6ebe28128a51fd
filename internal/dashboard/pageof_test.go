package dashboard

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/metrics"
)

// TestPageOfGolden pins every field of the pages pageOf returns: the
// order (with its tie-breaks), the paging, and each row's view and
// histories, in testdata/pageof-NAME.golden.
func TestPageOfGolden(t *testing.T) {
	fs := pagedFlows()
	// Ties: C->A has partitions of equal rank and lag (LagSeconds and then
	// the name decide) and a state without a rank.
	fs = append(fs, pagedFlows()[0])
	fs[2].Name = "C->A"
	fs[2].Partitions = []datapath.PartitionStatus{
		{Topic: "v", Partition: 2, Remote: "C.v", State: "lagging", Lag: 50, LagSeconds: 1},
		{Topic: "v", Partition: 1, Remote: "C.v", State: "lagging", Lag: 50, LagSeconds: 4},
		{Topic: "v", Partition: 0, Remote: "C.v", State: "lagging", Lag: 50, LagSeconds: 1},
		{Topic: "w", Partition: 0, Remote: "C.w", State: "draining", Lag: 2},
	}
	m := metrics.New()
	m.RecordsLost.WithLabelValues("A", "B", "t", "3").Add(4)
	m.ReplicationLatencyMs.WithLabelValues("A", "B", "A.u", "0").Set(12)
	d := New(Config{Source: fs, Metrics: m, Interval: time.Second})
	t0 := time.Unix(5000, 0).UTC()
	for i := range 4 {
		// A.u/0 copies 10 records of 100 bytes a second.
		m.RecordCount.WithLabelValues("A", "B", "A.u", "0").Add(10)
		m.ByteCount.WithLabelValues("A", "B", "A.u", "0").Add(1000)
		fs[0].Partitions[4].Done += 10
		d.Sample(t0.Add(time.Duration(i) * time.Second))
	}
	tests := []struct {
		name string
		q    PartitionQuery
	}{
		{"state", PartitionQuery{Sort: SortState, Size: DefaultPageSize}},
		{"lag", PartitionQuery{Sort: SortLag, Size: DefaultPageSize}},
		{"topic-page-1", PartitionQuery{Sort: SortTopic, Size: 3, Page: 1}},
		{"topic-past-the-end", PartitionQuery{Sort: SortTopic, Size: 5, Page: 9}},
		{"flow-and-state", PartitionQuery{Flow: "C->A", State: datapath.Lagging, Sort: SortState, Size: 2}},
		{"not-running", PartitionQuery{State: NotRunning, Sort: SortLag, Size: 4}},
		{"remote-substring", PartitionQuery{Q: "C.", Sort: SortTopic, Size: 10}},
		{"topic-substring-any-case", PartitionQuery{Q: "U", Sort: SortState, Size: 10}},
		{"no-match", PartitionQuery{Q: "nothing", Sort: SortState, Size: 10}},
		{"unknown-flow", PartitionQuery{Flow: "X->Y", Sort: SortLag, Size: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.mu.Lock()
			pg := d.pageOf(fs, tt.q)
			d.mu.Unlock()
			checkGolden(t, "pageof-"+tt.name, pg)
		})
	}
}

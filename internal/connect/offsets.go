package connect

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clients"
	"github.com/kmirror/kmirror/internal/internaltopic"
	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/wire"
)

// Offset is one entry of KIP-875's offsets list: MirrorSourceConnector's
// source partition and offset.
type Offset struct {
	Partition map[string]any `json:"partition"`
	Offset    map[string]any `json:"offset"`
}

// readOffsets returns the progress a source connector's flow saved.
func readOffsets(ctx context.Context, spec *Spec, log *slog.Logger) ([]Offset, error) {
	out := []Offset{}
	if spec.Heartbeats || spec.Checkpoints {
		return out, nil
	}
	f := spec.Flow
	opts, err := clients.Build(clients.ID(f.Name(), "connect-offsets"), clients.Consumer, f.TargetConsumer)
	if err != nil {
		return nil, err
	}
	saved, err := progress.Read(ctx, opts, f.OffsetStorageTopic, f.Source, log)
	if err != nil {
		return nil, fmt.Errorf("reading %s on %s: %w", f.OffsetStorageTopic, f.Target, err)
	}
	for tp, off := range saved {
		out = append(out, Offset{
			Partition: map[string]any{"cluster": f.Source, "topic": tp.Topic, "partition": tp.Partition},
			Offset:    map[string]any{"offset": off},
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Partition, out[j].Partition
		if a["topic"] != b["topic"] {
			return a["topic"].(string) < b["topic"].(string)
		}
		return a["partition"].(int32) < b["partition"].(int32)
	})
	return out, nil
}

// offsetChange is a source partition and its new offset (nil: reset).
type offsetChange struct {
	topic     string
	partition int32
	offset    *int64
}

// writeOffsets writes changes to the flow's offsets topic as the flow's
// progress records, so the next start resumes there.
func writeOffsets(ctx context.Context, spec *Spec, changes []offsetChange) error {
	f := spec.Flow
	cl, _, err := clients.New(clients.ID(f.Name(), "connect-offsets"), clients.Producer, f.TargetProducer,
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	parts, err := internaltopic.Partitions(ctx, adm, f.OffsetStorageTopic)
	if err != nil {
		return fmt.Errorf("offsets topic %s on %s: %w", f.OffsetStorageTopic, f.Target, err)
	}
	recs := make([]*kgo.Record, 0, len(changes))
	for _, c := range changes {
		key := wire.SourceOffsetKey(f.Source, c.topic, c.partition)
		r := &kgo.Record{Topic: f.OffsetStorageTopic, Key: key, Partition: wire.ConnectPartition(key, parts)}
		if c.offset != nil {
			r.Value = wire.OffsetValue(*c.offset)
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("writing %s on %s: %w", f.OffsetStorageTopic, f.Target, err)
	}
	return nil
}

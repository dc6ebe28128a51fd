package flow

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/progress"
	"github.com/kmirror/kmirror/internal/readlog"
	"github.com/kmirror/kmirror/internal/topicsync"
	"github.com/kmirror/kmirror/internal/wire"
)

// A partition without saved progress whose remote partition already holds
// records was copied before and lost its progress: the progress topic was
// deleted on the target while kmirror was down, or given a new name. It is
// not copied from the log start again; its position comes back from the
// last offset sync of the partition, (upstream U, downstream D): the
// source record U was acknowledged by the target at D, and every record
// before U was acknowledged before it (syncs follow acknowledgements in
// offset order), so copying goes on at U+1. The records copied after U
// are copied again (few: the sync is at most offset.lag.max records behind
// and every progress save publishes the newest one); none is skipped;
// in exactly-once mode none is copied twice either (recoverwalk.go). A
// sync is trusted only if D is below the remote partition's end and U
// below the source partition's end (one of the topics was re-created
// otherwise), and, in exactly-once mode, only if the record at D is
// committed (kmirror holds a sync until its transaction commits,
// offsetsync.Writer.HoldUntilFlush; older syncs or MM2's may not). Without
// a sync to trust, the partition is copied from its start, as before, and
// that is said (duplicates rather than loss). docs/operations.md,
// "Progress topic".

// recoverWalkers bounds the partitions whose recovered positions are
// worked out at once (each reads two partitions in exactly-once mode).
const recoverWalkers = 8

// candidate is a partition that starts without saved progress.
type candidate struct {
	tp     progress.TP
	remote string
	end    int64 // of the remote partition
}

// recoverPositions gives the partitions of ts that have no saved progress
// but whose remote partition holds records a position from the offset
// syncs (see above). Each partition is looked at once per run. In group
// mode it does nothing: a worker recovers only the partitions assigned
// to it, when they are (recoverAssigned). Another worker's partition may
// lack progress only for now (exactly-once: its first transaction is
// still open), and a position recovered for it, saved behind its owner's
// progress, would take the next owner back: records copied twice.
func (r *running) recoverPositions(ctx context.Context, ts []topicsync.Topic) error {
	if r.group != "" {
		return nil
	}
	var maybe []candidate
	var looked []progress.TP
	live := make(map[string]bool, len(ts))
	for _, t := range ts {
		live[t.Name] = true
	}
	for tp := range r.looked {
		if !live[tp.Topic] {
			delete(r.looked, tp) // a topic no longer replicated
		}
	}
	for _, t := range ts {
		for p := int32(0); p < t.Hosted; p++ {
			tp := progress.TP{Topic: t.Name, Partition: p}
			if r.looked[tp] {
				continue
			}
			looked = append(looked, tp)
			if _, ok := r.store.Get(tp); !ok {
				maybe = append(maybe, candidate{tp: tp, remote: t.Remote})
			}
		}
	}
	if len(maybe) > 0 {
		if err := r.recover(ctx, maybe); err != nil {
			return err // looked at again at the next refresh
		}
	}
	for _, tp := range looked {
		r.looked[tp] = true
	}
	return nil
}

// recoverAssigned is datapath.Group.Recover: the partitions assigned to
// this worker without progress, once their previous owner is fenced and
// the saved progress read.
func (r *running) recoverAssigned(ctx context.Context, tps []progress.TP) error {
	maybe := make([]candidate, 0, len(tps))
	for _, tp := range tps {
		maybe = append(maybe, candidate{tp: tp, remote: r.hooks.remote(tp.Topic)})
	}
	return r.recover(ctx, maybe)
}

func (r *running) recover(ctx context.Context, maybe []candidate) error {
	cs, err := r.holdingRecords(ctx, maybe)
	if err != nil || len(cs) == 0 {
		return err
	}
	syncs, err := r.lastSyncs(ctx, cs)
	if err != nil {
		r.f.log.Warn("reading the offset syncs to recover positions failed", "topic", r.c.OffsetSyncsTopic(), "err", err)
	}
	trusted, err := r.trustedSyncs(ctx, cs, syncs)
	if err != nil {
		return err
	}
	c := r.c
	seed := make(map[progress.TP]int64)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, recoverWalkers)
	for _, k := range cs {
		if s, ok := trusted[k.tp]; ok {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				at := r.recoveredAt(ctx, k, s)
				mu.Lock()
				seed[k.tp] = at
				mu.Unlock()
			}()
			continue
		}
		from := "log-start"
		if r.plan.StartAtEnd {
			from = "log-end"
		}
		r.f.m.Progress.Recovered.WithLabelValues(c.Source, c.Target, from).Inc()
		r.f.log.Warn("no saved progress and no offset sync to trust for a partition whose remote topic already holds records: copied from the "+
			map[string]string{"log-start": "log start again, so its records are duplicated on the target", "log-end": "log end (auto.offset.reset = latest)"}[from],
			"topic", k.tp.Topic, "partition", k.tp.Partition, "remote", k.remote, "remote_end", k.end, "progress_topic", r.store.Topic())
	}
	wg.Wait()
	if len(seed) == 0 {
		return nil
	}
	if err := r.store.Save(ctx, seed); err != nil {
		return fmt.Errorf("saving recovered positions: %w", err)
	}
	return nil
}

// recoveredAt returns the position of k recovered from its trusted sync s,
// and says so: s's upstream offset, or in exactly-once mode the last
// record paired after it (walkOn).
func (r *running) recoveredAt(ctx context.Context, k candidate, s wire.OffsetSync) int64 {
	c := r.c
	r.f.m.Progress.Recovered.WithLabelValues(c.Source, c.Target, "offset-syncs").Inc()
	log := r.f.log.With("topic", k.tp.Topic, "partition", k.tp.Partition, "remote", k.remote, "remote_end", k.end,
		"sync_upstream", s.UpstreamOffset, "sync_downstream", s.DownstreamOffset, "progress_topic", r.store.Topic())
	if !c.ExactlyOnce || r.plan.AddOrigin {
		log.Warn("no saved progress for a partition whose remote topic already holds records: position recovered from its last offset sync; records copied after it are copied again, none is skipped",
			"from", s.UpstreamOffset+1)
		return s.UpstreamOffset
	}
	at, err := r.walkOn(ctx, k, s)
	if err != nil {
		log.Warn("reading the records after the last offset sync failed; copying goes on after the sync, so the records copied after it are copied again", "err", err)
	}
	log.Warn("no saved progress for a partition whose remote topic already holds records: position recovered from its last offset sync and the committed records after it on the target; none is copied twice, none is skipped",
		"from", at+1, "paired_after_sync", at-s.UpstreamOffset)
	return at
}

// holdingRecords returns the candidates whose remote partition has held
// records (an end offset above 0).
func (r *running) holdingRecords(ctx context.Context, maybe []candidate) ([]candidate, error) {
	remotes := make(map[string]bool)
	for _, k := range maybe {
		remotes[k.remote] = true
	}
	ends, err := r.tgtAdm.ListEndOffsets(ctx, keys(remotes)...)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of remote topics on %s: %w", r.c.Target, err)
	}
	var out []candidate
	for _, k := range maybe {
		if o, ok := ends.Lookup(k.remote, k.tp.Partition); ok && o.Err == nil && o.Offset > 0 {
			k.end = o.Offset
			out = append(out, k)
		}
	}
	return out, nil
}

// lastSyncs reads the flow's offset-syncs topic and returns the last sync
// of each candidate partition.
func (r *running) lastSyncs(ctx context.Context, cs []candidate) (map[progress.TP]wire.OffsetSync, error) {
	want := make(map[progress.TP]bool, len(cs))
	for _, k := range cs {
		want[k.tp] = true
	}
	conn := r.tgtConn
	if r.c.OffsetSyncsTopicLocation == "source" {
		conn = r.srcConn
	}
	last := make(map[progress.TP]wire.OffsetSync)
	err := readlog.ToEnd(ctx, conn, r.c.OffsetSyncsTopic(), func(rec *kgo.Record) {
		s, err := wire.DecodeOffsetSync(rec.Key, rec.Value)
		if err != nil || s.UpstreamOffset < 0 || s.DownstreamOffset < 0 {
			return
		}
		if tp := (progress.TP{Topic: s.Topic, Partition: s.Partition}); want[tp] {
			last[tp] = s
		}
	})
	return last, err
}

// trustedSyncs keeps the syncs that describe the remote and source
// partitions as they are now (see the comment at the top).
func (r *running) trustedSyncs(ctx context.Context, cs []candidate, syncs map[progress.TP]wire.OffsetSync) (map[progress.TP]wire.OffsetSync, error) {
	if len(syncs) == 0 {
		return nil, nil
	}
	topics := make(map[string]bool)
	for tp := range syncs {
		topics[tp.Topic] = true
	}
	srcEnds, err := r.srcAdm.ListEndOffsets(ctx, keys(topics)...)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of source topics on %s: %w", r.c.Source, err)
	}
	out := make(map[progress.TP]wire.OffsetSync)
	var check []candidate
	for _, k := range cs {
		s, ok := syncs[k.tp]
		if !ok {
			continue
		}
		se, ok := srcEnds.Lookup(k.tp.Topic, k.tp.Partition)
		if !ok || se.Err != nil || !syncFits(s, se.Offset, k.end) {
			r.f.log.Warn("offset sync not trusted to recover a position: it is beyond the end of the source or remote partition (a topic was re-created)",
				"topic", k.tp.Topic, "partition", k.tp.Partition, "upstream", s.UpstreamOffset, "downstream", s.DownstreamOffset,
				"source_end", se.Offset, "remote_end", k.end)
			continue
		}
		out[k.tp] = s
		check = append(check, k)
	}
	if !r.c.ExactlyOnce || len(check) == 0 {
		return out, nil
	}
	for _, k := range check {
		ok, err := r.committedAt(ctx, k.remote, k.tp.Partition, out[k.tp].DownstreamOffset)
		if err != nil || !ok {
			r.f.log.Warn("offset sync not trusted to recover a position: its record on the target is not committed (exactly-once)",
				"topic", k.tp.Topic, "partition", k.tp.Partition, "downstream", out[k.tp].DownstreamOffset, "err", err)
			delete(out, k.tp)
		}
	}
	return out, nil
}

// syncFits reports whether sync can describe the partitions as they are
// now: its upstream offset below the source partition's end, its
// downstream offset below the remote partition's end. Either beyond means
// the topic was re-created since (or the sync is another's).
func syncFits(s wire.OffsetSync, srcEnd, remoteEnd int64) bool {
	return s.UpstreamOffset >= 0 && s.DownstreamOffset >= 0 && s.UpstreamOffset < srcEnd && s.DownstreamOffset < remoteEnd
}

// committedAt reports whether a read_committed reader of the remote
// partition finds a record at offset off (not one of an aborted or open
// transaction, nor removed by retention).
func (r *running) committedAt(ctx context.Context, remote string, partition int32, off int64) (bool, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, r.tgtConn...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{remote: {partition: kgo.NewOffset().At(off)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NoResetOffset()))...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, remote)
	if err != nil {
		return false, err
	}
	if o, ok := lso.Lookup(remote, partition); !ok || o.Err != nil || off >= o.Offset {
		return false, nil // not stable yet
	}
	fctx, cancel := context.WithTimeout(ctx, committedWait)
	defer cancel()
	for fctx.Err() == nil {
		fs := cl.PollFetches(fctx)
		if err := fs.Err0(); err != nil && fctx.Err() == nil {
			return false, err
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0].Offset == off, nil
		}
	}
	return false, fmt.Errorf("no record read at %s-%s offset %d within %s", remote, strconv.Itoa(int(partition)), off, committedWait)
}

// committedWait bounds the read of one record in committedAt.
const committedWait = 15 * time.Second

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

package passthrough

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/progress"
)

// Fetch sessions (KIP-227): a lane's broker keeps the partitions of the
// lane's session with the offset each was last asked from, so a fetch
// lists only the partitions that joined or whose offset, leader epoch or
// size limit changed, and names in ForgottenTopics those that must not be
// fetched now; the answer holds only partitions with news. The broker
// never moves a session partition's offset by itself: the offset kept
// here for it (sessPart) is what the broker fetches it from.
//
// A partition is in at most one lane's session (fetcher.sessOf): one that
// moves to another lane joins the new session once the old one forgot it.
//
// The sets below keep a pass of the request loop in proportion to the
// partitions that changed, not to those assigned: fetcher.dirty holds
// the partitions whose fetch state changed since the last pass
// (touchLocked), fetcher.waiting those whose retryAt is ahead.

// laneState is one lane: the partitions it carries, those that may fetch
// now, and its fetch session on the broker.
type laneState struct {
	l         lane
	members   map[*partition]struct{} // assigned, not stopped or revoked, led on this lane
	partBytes int32                   // partitionBytes(len(members)), as last applied
	want      map[progress.TP]*partition
	// pending holds the partitions of want that may differ from the
	// session and those of the session that may no longer be wanted.
	pending  map[progress.TP]struct{}
	sess     map[progress.TP]sessPart // what the broker's session holds
	id       int32                    // session ID; 0 none
	epoch    int32                    // of the next fetch; 0 starts a session (full fetch)
	noSess   bool                     // the broker has no fetch sessions (Fetch < v7)
	fetching bool                     // a fetch is in flight
	retryAt  time.Time                // after a failed fetch
	quiet    int                      // fetches in a row answered with no partition, up to idleFetches
}

// A lane whose last idleFetches fetches in a session were answered with
// no partition (nothing new at the source) asks the broker to wait up to
// idleFetchWait, if longer than Config.FetchMaxWait, before answering
// empty: records still come back at once, and an idle flow sends a fourth
// of the fetches. What a lane's next fetch would change (a partition
// assigned, one to forget) waits for the fetch in flight, up to that long.
const (
	idleFetches   = 4
	idleFetchWait = 2 * time.Second
)

// fetchWait is the MaxWait of ls's next fetch.
func (f *fetcher) fetchWait(ls *laneState) time.Duration {
	if ls.quiet >= idleFetches {
		return max(f.maxWait, idleFetchWait)
	}
	return f.maxWait
}

// sessPart is a partition as a fetch session holds it.
type sessPart struct {
	p        *partition
	topicID  [16]byte
	offset   int64
	epoch    int32
	maxBytes int32
	gen      int
}

func (ls *laneState) entry(p *partition) sessPart {
	return sessPart{p: p, topicID: p.srcID, offset: p.next, epoch: p.srcEpoch, maxBytes: ls.partBytes, gen: p.gen}
}

// laneLocked returns the state of lane l, made on first use.
func (f *fetcher) laneLocked(l lane) *laneState {
	ls := f.lanes[l]
	if ls == nil {
		ls = &laneState{l: l, members: map[*partition]struct{}{}, want: map[progress.TP]*partition{},
			pending: map[progress.TP]struct{}{}, sess: map[progress.TP]sessPart{}, partBytes: f.partitionBytes(0)}
		f.lanes[l] = ls
	}
	return ls
}

// touchLocked has the next pass look at p's fetch state again. Call it,
// with pl.mu held, whenever what decides whether and how p fetches
// changes: position, leader, errors, queued bytes, stop or revocation. It
// takes fetcher.mu.
func (pl *Pipeline) touchLocked(p *partition) {
	f := &pl.fetcher
	f.mu.Lock()
	f.dirty[p] = struct{}{}
	f.mu.Unlock()
}

// quiet reports whether no partition waits to be looked at and no lane
// waits for a retry time or a pass to fetch (paused: fetches wait).
func (f *fetcher) quiet(now time.Time, paused bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.dirty)+len(f.waiting) > 0 {
		return false
	}
	for _, ls := range f.lanes {
		if now.Before(ls.retryAt) || !paused && !ls.fetching && len(ls.want) > 0 {
			return false
		}
	}
	return true
}

// learnNames notes the source topics' IDs of a metadata answer.
func (f *fetcher) learnNames(topics map[string]*kmsg.MetadataResponseTopic) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, t := range topics {
		f.srcNames[t.TopicID] = name
	}
}

// settleLocked brings the lanes' sets up to date with the partitions
// touched since the last pass and those whose retry time came. pl.mu
// and fetcher.mu are held.
func (pl *Pipeline) settleLocked(now time.Time) {
	f := &pl.fetcher
	for p := range f.waiting {
		if !now.Before(p.retryAt) {
			delete(f.waiting, p)
			f.dirty[p] = struct{}{}
		}
	}
	if len(f.dirty) == 0 {
		return
	}
	for p := range f.dirty {
		var m *laneState
		if pl.parts[p.tp] == p && !p.stopped && !p.revoked && p.srcLeader >= 0 {
			m = f.laneLocked(lane{p.srcLeader, p.lane})
		}
		if m != p.member {
			if p.member != nil {
				delete(p.member.members, p)
			}
			if m != nil {
				m.members[p] = struct{}{}
			}
			p.member = m
		}
	}
	// A lane's share of a fetch per partition follows the number of
	// partitions it carries.
	for _, ls := range f.lanes {
		if b := f.partitionBytes(len(ls.members)); b != ls.partBytes {
			ls.partBytes = b
			for p := range ls.members {
				f.dirty[p] = struct{}{}
			}
		}
	}
	for p := range f.dirty {
		pl.placeLocked(p, now)
	}
	clear(f.dirty)
}

// placeLocked puts p in the want set of its lane if it may fetch now,
// and out of any other. pl.mu and fetcher.mu are held.
func (pl *Pipeline) placeLocked(p *partition, now time.Time) {
	var w *laneState
	if m := p.member; m != nil && p.stopAfter == nil && !p.outOfRange && p.next >= 0 && p.queued < 4*int64(m.partBytes) {
		if now.Before(p.retryAt) {
			pl.fetcher.waiting[p] = struct{}{}
		} else {
			w = m
		}
	}
	if o := p.wantIn; o != nil && o != w {
		if o.want[p.tp] == p {
			delete(o.want, p.tp)
		}
		o.pending[p.tp] = struct{}{}
	}
	p.wantIn = w
	if w != nil {
		w.want[p.tp] = p
		w.pending[p.tp] = struct{}{}
	}
}

// resetLocked ends ls's session on this side: the next fetch starts a
// new one (with the same ID, which makes the broker drop the old one) and
// lists every partition that may fetch.
func (f *fetcher) resetLocked(ls *laneState) {
	for tp := range ls.sess {
		if f.sessOf[tp] == ls {
			delete(f.sessOf, tp)
		}
	}
	clear(ls.sess)
	clear(ls.pending)
	ls.epoch = 0
}

// nextEpoch is the session epoch after e: 1 follows the largest int32.
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// closeSessions ends the lanes' fetch sessions on their brokers, which
// would otherwise keep them in their session caches until evicted. It
// runs once nothing else fetches.
func (f *fetcher) closeSessions() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	f.mu.Lock()
	for _, ls := range f.lanes {
		if ls.id == 0 || ls.noSess {
			continue
		}
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch = ls.id, -1
		req.MaxBytes, req.MinBytes, req.IsolationLevel = f.maxBytes, 1, 1
		f.resetLocked(ls)
		ls.id = 0
		br := f.sources[ls.l.client].Broker(int(ls.l.broker))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = br.Request(ctx, req) // the broker evicts it anyway
		}()
	}
	f.mu.Unlock()
	wg.Wait()
}

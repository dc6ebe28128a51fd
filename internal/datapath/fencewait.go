package datapath

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/internal/progress"
)

// fenceAttempt bounds one retry of Fence, during which the group's
// callbacks wait.
const fenceAttempt = 15 * time.Second

// holdLocked records the partitions of tps that failed (their previous
// owner could not be fenced) as waiting, with a backoff that starts at
// first and doubles per failed attempt, and returns the others, which may
// start. It logs and counts the failure, and starts the retry loop.
func (g *Group) holdLocked(ctx context.Context, tps []progress.TP, failed map[progress.TP]error, first time.Duration) []progress.TP {
	return g.waitLocked(ctx, tps, failed, first, false)
}

// holdUnreadLocked records tps as waiting because the progress other
// workers saved could not be read (exactly-once: started from older
// progress they would copy records again), retried like fencing.
func (g *Group) holdUnreadLocked(ctx context.Context, tps []progress.TP, err error) {
	failed := make(map[progress.TP]error, len(tps))
	for _, tp := range tps {
		failed[tp] = err
	}
	g.waitLocked(ctx, tps, failed, fenceRetryMin, true)
}

// waitLocked is holdLocked; unread says the failure was reading progress,
// not fencing.
func (g *Group) waitLocked(ctx context.Context, tps []progress.TP, failed map[progress.TP]error, first time.Duration, unread bool) []progress.TP {
	var ok []progress.TP
	var errs []error
	var delay time.Duration
	for _, tp := range tps {
		err, bad := failed[tp]
		if !bad {
			ok = append(ok, tp)
			continue
		}
		if g.waiting == nil {
			g.waiting = make(map[progress.TP]wait)
		}
		w, had := g.waiting[tp]
		if r, ok := g.retried[tp]; !had && ok && r.unread == unread {
			// Held again by the retry that took it out of waiting: the
			// wait doubles.
			w, had = r, true
		}
		d := first
		if had {
			d = min(2*w.delay, fenceRetryMax)
		}
		g.waiting[tp] = wait{delay: d, next: time.Now().Add(d), unread: unread}
		if unread {
			g.Table.Hold(Held{TP: tp, Remote: g.Remote(tp.Topic), State: Waiting,
				Why: "exactly-once: not copied until the progress other workers saved can be read (retried every " + d.String() + "): " + err.Error()})
		} else {
			g.Table.Hold(Held{TP: tp, Remote: g.Remote(tp.Topic), State: Fencing,
				Why: "exactly-once: not copied: the slot's transactional producer could not be initialised to fence the previous owner (retried every " + d.String() + "): " + err.Error()})
		}
		delay = max(delay, d)
		seen := false
		for _, e := range errs {
			seen = seen || e == err
		}
		if !seen {
			errs = append(errs, err)
		}
	}
	switch {
	case len(errs) > 0 && unread:
		g.Log.Error("exactly-once: the progress other workers saved could not be read; assigned partitions are not copied until it can be (from older progress they would copy records again)",
			"partitions", len(tps)-len(ok), "retry_in", delay, "err", errs[0])
	case len(errs) > 0:
		if g.Metrics != nil {
			g.Metrics.FenceFailures.WithLabelValues(g.SourceAlias, g.TargetAlias).Add(float64(len(errs)))
		}
		g.Log.Error("exactly-once: the previous owner of assigned partitions could not be fenced (their slot's InitProducerID failed); they are not copied until it succeeds",
			"partitions", len(tps)-len(ok), "retry_in", delay, "err", errs[0])
	}
	if len(errs) > 0 {
		if !g.retry {
			g.retry = true
			go g.retryLoop(ctx)
		}
	}
	g.exportLocked()
	return ok
}

// retryLoop fences the previous owners of waiting partitions again, each
// when its backoff ends, and starts those it could fence (those whose
// progress could not be read are fenced already: Fence skips the slots
// this worker holds), until none waits or ctx (the group client's) ends.
func (g *Group) retryLoop(ctx context.Context) {
	f := g.Engine.(Fencer)
	for {
		g.mu.Lock()
		if len(g.waiting) == 0 || ctx.Err() != nil {
			g.retry = false
			g.mu.Unlock()
			return
		}
		next := time.Time{}
		for _, w := range g.waiting {
			if next.IsZero() || w.next.Before(next) {
				next = w.next
			}
		}
		g.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
		g.mu.Lock()
		var due []progress.TP
		for tp, w := range g.waiting {
			if !w.next.After(time.Now()) {
				due = append(due, tp)
			}
		}
		if len(due) > 0 && ctx.Err() == nil {
			actx, cancel := context.WithTimeout(ctx, fenceAttempt)
			failed := f.Fence(actx, due)
			cancel()
			ok := g.holdLocked(ctx, due, failed, fenceRetryMin)
			g.retried = make(map[progress.TP]wait, len(ok))
			for _, tp := range ok {
				g.retried[tp] = g.waiting[tp]
				delete(g.waiting, tp)
			}
			if len(ok) > 0 {
				g.Log.Info("exactly-once: the previous owner of waiting partitions is fenced; they are copied once their progress is read", "partitions", len(ok))
				g.exportLocked()
				g.admitLocked(ctx, ok)
			}
			g.retried = nil
		}
		g.mu.Unlock()
	}
}

// exportLocked sets the gauge of partitions waiting for their fence.
func (g *Group) exportLocked() {
	if g.Metrics == nil {
		return
	}
	n := 0
	for _, w := range g.waiting {
		if !w.unread {
			n++
		}
	}
	g.Metrics.Unfenced.WithLabelValues(g.SourceAlias, g.TargetAlias).Set(float64(n))
}

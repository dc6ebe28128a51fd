package datapath

import (
	"context"

	"github.com/kmirror/kmirror/internal/progress"
)

// admitLocked has the engine start the partitions of tps that the target
// hosts and keeps the others back until Release finds them hosted.
func (g *Group) admitLocked(ctx context.Context, tps []progress.TP) {
	if g.Hosting != nil {
		ok := tps[:0:0]
		for _, tp := range tps {
			if wait, why := g.Hosting(tp); wait {
				if g.unhosted == nil {
					g.unhosted = make(map[progress.TP]bool)
				}
				g.unhosted[tp] = true
				g.Table.Hold(Held{TP: tp, Remote: g.Remote(tp.Topic), State: Waiting, Why: why})
				continue
			}
			ok = append(ok, tp)
		}
		if n := len(tps) - len(ok); n > 0 {
			g.Log.Info("assigned partitions wait for the target to host their remote partitions; each is copied once it does", "partitions", n)
		}
		tps = ok
	}
	g.startLocked(ctx, tps)
}

// Release starts the assigned partitions that waited for the target to
// host them and now are hosted (Hosting); of the others it updates why
// they wait.
func (g *Group) Release(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ok []progress.TP
	for tp := range g.unhosted {
		wait, why := g.Hosting(tp)
		if wait {
			g.Table.Hold(Held{TP: tp, Remote: g.Remote(tp.Topic), State: Waiting, Why: why})
			continue
		}
		ok = append(ok, tp)
		delete(g.unhosted, tp)
	}
	if len(ok) > 0 {
		g.Log.Info("the target hosts assigned partitions now; they are copied", "partitions", len(ok))
		g.startLocked(ctx, ok)
	}
}

// Unhosted reports whether assigned partitions wait for the target to
// host them.
func (g *Group) Unhosted() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.unhosted) > 0
}

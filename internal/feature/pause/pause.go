// Package pause is the pause feature (App.Pause, App.Resume): an engine.Gate that holds the
// queues paused cluster-wide, as read from a PauseSource (the outbox's Pauses table) before
// the first fetch and then every PauseCheck. A node starts no batch of a paused queue; the
// driver leaves it out of its fetches, and a batch fetched before the node saw the pause is
// given back unrun; running batches finish, and publishing goes on.
package pause

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/internal/engine"
)

// Gate is the engine.Gate of paused queues, with the loop that reads them.
type Gate struct {
	src   engine.PauseSource
	every time.Duration
	e     *engine.Engine
	// paused is the set last read; read without a lock (once per fetched batch).
	paused atomic.Pointer[map[string]bool]
}

// New returns the gate reading src every every (default 1 s).
func New(src engine.PauseSource, every time.Duration) *Gate {
	if every <= 0 {
		every = time.Second
	}
	return &Gate{src: src, every: every}
}

// Attach implements engine.Attacher.
func (g *Gate) Attach(e *engine.Engine) { g.e = e }

// Prepare reads the paused queues once before the first fetch (engine.Preparer), so a
// paused queue is not fetched at start.
func (g *Gate) Prepare(ctx context.Context) { g.read(ctx) }

// Loop reads the paused queues every PauseCheck until ctx ends (engine.Looper). A failed
// read keeps the last known set (a queue is not resumed because the database is
// unreachable).
func (g *Gate) Loop(ctx context.Context) {
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		g.read(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gate) read(stop context.Context) {
	ctx, cancel := context.WithTimeout(stop, g.every+time.Second)
	defer cancel()
	names, err := g.src.Paused(ctx)
	if err != nil {
		if stop.Err() == nil {
			g.e.Logger().Warn("txmq: reading paused queues failed; keeping the last known set", "error", err)
		}
		return
	}
	set := make(map[string]bool, len(names))
	for _, q := range names {
		set[q] = true
	}
	old := g.paused.Swap(&set)
	changed := old == nil && len(set) > 0 || old != nil && len(*old) != len(set)
	for q := range set {
		if old == nil || !(*old)[q] {
			changed = true
		}
	}
	if changed {
		g.e.Logger().Info("txmq: paused queues", "queues", names)
		g.e.Wake() // a fetch in flight may include a queue paused now, or leave out one resumed
	}
}

// Held reports whether queue is paused (engine.Gate). It takes no lock.
func (g *Gate) Held(queue string) bool {
	m := g.paused.Load()
	return m != nil && (*m)[queue]
}

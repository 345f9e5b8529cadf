package engine

import (
	"context"
	"time"
)

// pauseLoop reads the paused queues every PauseCheck until the node stops. A failed read keeps
// the last known set (a queue is not resumed because the database is unreachable).
func (n *Engine) pauseLoop() {
	defer n.loops.Done()
	t := time.NewTicker(n.opts.PauseCheck)
	defer t.Stop()
	for {
		n.readPaused()
		select {
		case <-n.stopCtx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Engine) readPaused() {
	ctx, cancel := context.WithTimeout(n.stopCtx, n.opts.PauseCheck+time.Second)
	defer cancel()
	names, err := n.opts.Pauses.Paused(ctx)
	if err != nil {
		if n.stopCtx.Err() == nil {
			n.log.Warn("txmq: reading paused queues failed; keeping the last known set", "error", err)
		}
		return
	}
	set := make(map[string]bool, len(names))
	for _, q := range names {
		set[q] = true
	}
	old := n.paused.Swap(&set)
	changed := old == nil && len(set) > 0 || old != nil && len(*old) != len(set)
	for q := range set {
		if old == nil || !(*old)[q] {
			changed = true
		}
	}
	if changed {
		n.log.Info("txmq: paused queues", "queues", names)
		n.cancelFetch() // a fetch in flight may include a queue paused now
		n.signal()      // or leave out one resumed now
	}
}

// isPaused reports whether queue is paused. It takes no lock: it runs once per fetched batch.
func (n *Engine) isPaused(queue string) bool {
	m := n.paused.Load()
	return m != nil && (*m)[queue]
}

package txmq

import (
	"context"
	"time"
)

// PauseSource tells nodes which queues are paused cluster-wide. The outbox's *outbox.Pauses
// implements it with a table in the app database (Pauses.Pause, Pauses.Resume); txmq.Open sets
// it to Store.Pauses() when the app has a database.
type PauseSource interface {
	// Paused returns the names of the paused queues.
	Paused(ctx context.Context) ([]string, error)
}

// pauseLoop reads the paused queues every PauseCheck until the node stops. A failed read keeps
// the last known set (a queue is not resumed because the database is unreachable).
func (n *Node) pauseLoop() {
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

func (n *Node) readPaused() {
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
func (n *Node) isPaused(queue string) bool {
	m := n.paused.Load()
	return m != nil && (*m)[queue]
}

// Pause pauses queue on every node of the app (those opened on the same app database): no node
// starts a new batch of it once it has seen the pause, within NodeOptions.PauseCheck (1 s) plus
// one fetch; running batches finish, and publishing goes on. by says who paused it, for
// operators. It needs the app database (TXMQ_DATABASE_URL): without one it returns an error
// wrapping ErrNoDatabase.
func (a *App) Pause(ctx context.Context, queue, by string) error {
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	return a.Store.Pauses().Pause(ctx, queue, by)
}

// Resume resumes a paused queue on every node of the app, within NodeOptions.PauseCheck plus
// one fetch.
func (a *App) Resume(ctx context.Context, queue string) error {
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	return a.Store.Pauses().Resume(ctx, queue)
}

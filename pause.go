package txmq

import (
	"context"
)

// PauseSource tells nodes which queues are paused cluster-wide. The outbox's *outbox.Pauses
// implements it with a table in the app database (Pauses.Pause, Pauses.Resume); txmq.Open sets
// it to Store.Pauses() when the app has a database.
type PauseSource interface {
	// Paused returns the names of the paused queues.
	Paused(ctx context.Context) ([]string, error)
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

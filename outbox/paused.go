package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pauses are the app's queue pause marks, in the store's schema (table txmq_paused): what
// App.Pause, `txmq queue pause` and the dashboard write, and what every node of the app reads
// (it implements txmq.PauseSource; txmq.Open sets NodeOptions.Pauses to it). Get them with
// Store.Pauses. The methods of a nil *Pauses (a nil Store's) return ErrNoDatabase. Safe for
// concurrent use. On a store of another dialect they are that database's table
// (ControlDialect).
type Pauses struct {
	pool  *pgxpool.Pool
	table string     // quoted
	tab   PauseTable // set on a store of another dialect: pool and table are unset
}

// Pauses returns the store's pause marks; nil for a nil Store.
func (s *Store) Pauses() *Pauses {
	if s == nil {
		return nil
	}
	return s.pauses
}

// newPauses returns the pause marks of schema on pool.
func newPauses(pool *pgxpool.Pool, schema string) *Pauses {
	return &Pauses{pool: pool, table: pgx.Identifier{schema, "txmq_paused"}.Sanitize()}
}

// PausedQueue is one paused queue.
type PausedQueue struct {
	// Queue is the queue name.
	Queue string
	// PausedAt is when it was paused, by the database clock.
	PausedAt time.Time
	// PausedBy says who paused it (free text given to Pause).
	PausedBy string
}

// Pause marks queue paused for every node of the app that reads these marks
// (NodeOptions.Pauses, set by txmq.Open): they start no new batch of it once they have seen the
// mark (within their PauseCheck), and running batches finish. by says who paused it, for
// operators. Pausing a paused queue keeps its first mark.
func (p *Pauses) Pause(ctx context.Context, queue, by string) error {
	if p == nil {
		return errNoStore("Pauses().Pause")
	}
	if p.tab != nil {
		if err := p.tab.Pause(ctx, queue, by); err != nil {
			return fmt.Errorf("txmq outbox: pausing queue %q: %w", queue, err)
		}
		return nil
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO `+p.table+` (queue, paused_by) VALUES ($1, $2) ON CONFLICT (queue) DO NOTHING`, queue, by)
	if err != nil {
		return fmt.Errorf("txmq outbox: pausing queue %q: %w", queue, err)
	}
	return nil
}

// Resume removes queue's pause mark; nodes start its batches again once they have seen it.
// Resuming a queue that is not paused does nothing.
func (p *Pauses) Resume(ctx context.Context, queue string) error {
	if p == nil {
		return errNoStore("Pauses().Resume")
	}
	if p.tab != nil {
		if err := p.tab.Resume(ctx, queue); err != nil {
			return fmt.Errorf("txmq outbox: resuming queue %q: %w", queue, err)
		}
		return nil
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM `+p.table+` WHERE queue = $1`, queue); err != nil {
		return fmt.Errorf("txmq outbox: resuming queue %q: %w", queue, err)
	}
	return nil
}

// PausedQueues returns the paused queues, by name.
func (p *Pauses) PausedQueues(ctx context.Context) (map[string]PausedQueue, error) {
	if p == nil {
		return nil, errNoStore("Pauses().PausedQueues")
	}
	var list []PausedQueue
	var err error
	if p.tab != nil {
		list, err = p.tab.PausedQueues(ctx)
	} else {
		list, err = p.pgPausedQueues(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: reading paused queues: %w", err)
	}
	out := make(map[string]PausedQueue, len(list))
	for _, q := range list {
		out[q.Queue] = q
	}
	return out, nil
}

// pgPausedQueues reads the marks on PostgreSQL.
func (p *Pauses) pgPausedQueues(ctx context.Context) ([]PausedQueue, error) {
	rows, err := p.pool.Query(ctx, `SELECT queue, paused_at, paused_by FROM `+p.table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PausedQueue, error) {
		var q PausedQueue
		err := r.Scan(&q.Queue, &q.PausedAt, &q.PausedBy)
		return q, err
	})
}

// Paused returns the names of the paused queues. It implements txmq.PauseSource.
func (p *Pauses) Paused(ctx context.Context) ([]string, error) {
	ps, err := p.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ps))
	for q := range ps {
		names = append(names, q)
	}
	return names, nil
}

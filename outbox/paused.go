package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PausedQueue is one paused queue.
type PausedQueue struct {
	// Queue is the queue name.
	Queue string
	// PausedAt is when it was paused, by the database clock.
	PausedAt time.Time
	// PausedBy says who paused it (free text given to Pause).
	PausedBy string
}

func (s *Store) pausedTable() string {
	return pgx.Identifier{s.o.Schema, "txmq_paused"}.Sanitize()
}

// Pause marks queue paused for every node of the app that reads this store (NodeOptions.Pauses,
// set by txmq.Open): they start no new batch of it once they have seen the mark (within their
// PauseCheck), and running batches finish. by says who paused it, for operators. Pausing a paused
// queue keeps its first mark.
func (s *Store) Pause(ctx context.Context, queue, by string) error {
	if s == nil {
		return errNoStore("Pause")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.pausedTable()+` (queue, paused_by) VALUES ($1, $2) ON CONFLICT (queue) DO NOTHING`, queue, by)
	if err != nil {
		return fmt.Errorf("txmq outbox: pausing queue %q: %w", queue, err)
	}
	return nil
}

// Resume removes queue's pause mark; nodes start its batches again once they have seen it.
// Resuming a queue that is not paused does nothing.
func (s *Store) Resume(ctx context.Context, queue string) error {
	if s == nil {
		return errNoStore("Resume")
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM `+s.pausedTable()+` WHERE queue = $1`, queue); err != nil {
		return fmt.Errorf("txmq outbox: resuming queue %q: %w", queue, err)
	}
	return nil
}

// PausedQueues returns the paused queues, by name.
func (s *Store) PausedQueues(ctx context.Context) (map[string]PausedQueue, error) {
	if s == nil {
		return nil, errNoStore("PausedQueues")
	}
	rows, err := s.pool.Query(ctx, `SELECT queue, paused_at, paused_by FROM `+s.pausedTable())
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: reading paused queues: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PausedQueue, error) {
		var p PausedQueue
		err := r.Scan(&p.Queue, &p.PausedAt, &p.PausedBy)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: reading paused queues: %w", err)
	}
	out := make(map[string]PausedQueue, len(list))
	for _, p := range list {
		out[p.Queue] = p
	}
	return out, nil
}

// Paused returns the names of the paused queues. It implements txmq.PauseSource.
func (s *Store) Paused(ctx context.Context) ([]string, error) {
	ps, err := s.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ps))
	for q := range ps {
		names = append(names, q)
	}
	return names, nil
}

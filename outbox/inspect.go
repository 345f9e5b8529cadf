package outbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxFilter selects outbox rows. Zero fields select everything.
type OutboxFilter struct {
	// Queue selects one queue; empty means every queue.
	Queue string
	// AfterID selects ids greater than it (keyset paging: pass the last id seen).
	AfterID int64
	// Limit caps the rows; default 100.
	Limit int
}

// OutboxRow is one outbox row: a batch not yet published.
type OutboxRow struct {
	// ID is the row id.
	ID int64
	// Queue is the batch's queue.
	Queue string
	// BatchID is the batch id.
	BatchID string
	// Body is the encoded batch (envelope.Decode reads it).
	Body []byte
	// NotBefore is the batch's earliest delivery time, zero for none.
	NotBefore time.Time
	// Exclusive is the queue's Exclusive setting.
	Exclusive bool
	// CreatedAt is when the row was inserted.
	CreatedAt time.Time
	// Attempts counts failed publishes.
	Attempts int
	// NextAttemptAt is when the row is due; zero means after the recovery age (CreatedAt +
	// Options.RecoveryAge).
	NextAttemptAt time.Time
	// LastError is the last publish error, empty if none.
	LastError string
}

// Backlog summarizes one queue's outbox rows.
type Backlog struct {
	// Rows is the number of rows (batches).
	Rows int64
	// Failing is the number of rows with at least one failed publish.
	Failing int64
	// Oldest is the creation time of the oldest row.
	Oldest time.Time
	// OldestAge is how old the oldest row is, by the database clock.
	OldestAge time.Duration
}

// ListOutbox returns the outbox rows f selects, by ascending id.
func (s *Store) ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error) {
	if s == nil {
		return nil, errNoStore("ListOutbox")
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if in, ok := s.db.(InspectDialect); ok && s.pg == nil {
		out, err := in.ListOutbox(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: listing outbox rows (queue %q) from %s: %w", f.Queue, s.outbox, err)
		}
		return out, nil
	}
	if err := s.needsPG("ListOutbox", ""); err != nil {
		return nil, err
	}
	args := []any{f.AfterID}
	where := "id > $1"
	if f.Queue != "" {
		args = append(args, f.Queue)
		where += " AND queue = $2"
	}
	args = append(args, f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT id, queue, batch_id, body, not_before, exclusive, created_at, attempts,
		next_attempt_at, coalesce(last_error, '') FROM `+s.outbox+` WHERE `+where+
		` ORDER BY id LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: listing outbox rows (queue %q) from %s: %w", f.Queue, s.outbox, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxRow, error) {
		var o OutboxRow
		var nb, next *time.Time
		err := r.Scan(&o.ID, &o.Queue, &o.BatchID, &o.Body, &nb, &o.Exclusive, &o.CreatedAt, &o.Attempts, &next, &o.LastError)
		if nb != nil {
			o.NotBefore = *nb
		}
		if next != nil {
			o.NextAttemptAt = *next
		}
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: listing outbox rows (queue %q) from %s: %w", f.Queue, s.outbox, err)
	}
	return out, nil
}

// Backlog returns, per queue with outbox rows, their count and the oldest row's age.
func (s *Store) Backlog(ctx context.Context) (map[string]Backlog, error) {
	if s == nil {
		return nil, errNoStore("Backlog")
	}
	if in, ok := s.db.(InspectDialect); ok && s.pg == nil {
		out, err := in.Backlog(ctx)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: reading the outbox backlog from %s: %w", s.outbox, err)
		}
		return out, nil
	}
	if err := s.needsPG("Backlog", ""); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT queue, count(*), count(*) FILTER (WHERE attempts > 0), min(created_at),
		extract(epoch FROM now() - min(created_at))::float8 FROM `+s.outbox+` GROUP BY queue`)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: reading the outbox backlog from %s: %w", s.outbox, err)
	}
	out := map[string]Backlog{}
	for rows.Next() {
		var q string
		var b Backlog
		var age float64
		if err := rows.Scan(&q, &b.Rows, &b.Failing, &b.Oldest, &age); err != nil {
			rows.Close()
			return nil, fmt.Errorf("txmq outbox: reading the outbox backlog: %w", err)
		}
		b.OldestAge = time.Duration(age * float64(time.Second))
		out[q] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("txmq outbox: reading the outbox backlog: %w", err)
	}
	return out, nil
}

// DeadLetterCounts returns, per queue, how many dead letters are dead now (not replayed). A
// queue whose dead letters were all replayed is in the map with 0: its batches went back to
// the backend.
func (s *Store) DeadLetterCounts(ctx context.Context) (map[string]int64, error) {
	if s == nil {
		return nil, errNoStore("DeadLetterCounts")
	}
	if in, ok := s.db.(InspectDialect); ok && s.pg == nil {
		out, err := in.DeadLetterCounts(ctx)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: counting dead letters in %s: %w", s.dead, err)
		}
		return out, nil
	}
	if err := s.needsPG("DeadLetterCounts", ""); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT queue, count(*) FILTER (WHERE replayed_at IS NULL) FROM `+s.dead+` GROUP BY queue`)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: counting dead letters in %s: %w", s.dead, err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("txmq outbox: counting dead letters: %w", err)
		}
		out[q] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("txmq outbox: counting dead letters: %w", err)
	}
	return out, nil
}

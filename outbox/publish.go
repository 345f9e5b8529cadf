package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// row is one outbox row on its way to the backend.
type row struct {
	id       int64
	attempts int
	batch    core.OutgoingBatch
}

// How a row was published, for hooks and logs.
const (
	viaCommit = "commit"
	viaRelay  = "relay"
	viaSweep  = "sweep"
)

// maxErrorText caps the last_error stored per row.
const maxErrorText = 2000

// publishLocked publishes rows that tx holds locked, deletes the published ones in one
// statement and records failures, all in tx (the caller commits). It stops at the first error
// wrapping core.ErrBackendUnavailable, without counting an attempt, and returns that error as
// stop. err is a database error: the caller rolls back (published rows are then published
// again later: at-least-once).
func (s *Store) publishLocked(ctx context.Context, tx pgx.Tx, rows []row, via string) (published int, stop, err error) {
	ok := make([]int64, 0, len(rows))
	for _, r := range rows {
		perr := s.backend.Publish(ctx, r.batch)
		if perr == nil {
			ok = append(ok, r.id)
			s.safeHook(func() {
				if s.o.Hooks != nil && s.o.Hooks.Published != nil {
					s.o.Hooks.Published(r.batch.Queue, via)
				}
			})
			continue
		}
		unavailable := errors.Is(perr, core.ErrBackendUnavailable)
		s.safeHook(func() {
			if s.o.Hooks != nil && s.o.Hooks.PublishFailed != nil {
				s.o.Hooks.PublishFailed(r.batch.Queue, via, unavailable)
			}
		})
		if unavailable {
			stop = fmt.Errorf("txmq outbox: publishing row %d (batch %s) of queue %q: %w; stopped, no attempt counted: the rows stay and are retried by the next sweep",
				r.id, r.batch.ID, r.batch.Queue, perr)
			break
		}
		attempts := r.attempts + 1
		delay := backoff(s.o.BackoffBase, s.o.BackoffMax, attempts)
		msg := perr.Error()
		if len(msg) > maxErrorText {
			msg = msg[:maxErrorText]
		}
		s.log.Warn("txmq outbox: publish failed, row scheduled again",
			"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "via", via, "attempts", attempts, "retry_in", delay, "error", perr)
		if _, err := tx.Exec(ctx, `UPDATE `+s.outbox+` SET attempts = attempts + 1, last_error = $2,
			next_attempt_at = now() + $3 * interval '1 microsecond' WHERE id = $1`,
			r.id, msg, delay.Microseconds()); err != nil {
			return 0, stop, fmt.Errorf("txmq outbox: recording the failed publish of row %d (queue %q): %w", r.id, r.batch.Queue, err)
		}
	}
	if len(ok) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.outbox+` WHERE id = ANY($1)`, ok); err != nil {
			return 0, stop, fmt.Errorf("txmq outbox: deleting %d published row(s): %w; they will be published again (at-least-once)", len(ok), err)
		}
	}
	return len(ok), stop, nil
}

// publishCommitted publishes the rows a RunInTx transaction just committed. It claims them
// with SKIP LOCKED so that a sweep running at the same moment never publishes them twice.
// Failures stay in the table for the sweep; they are logged, never returned (the app's
// transaction committed).
func (s *Store) publishCommitted(parent context.Context, rows []row) {
	if len(rows) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.o.PublishTimeout)
	defer cancel()
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		locked, err := tx.Query(ctx, `SELECT id FROM `+s.outbox+` WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(locked, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		mine := make(map[int64]bool, len(got))
		for _, id := range got {
			mine[id] = true
		}
		claimed := rows[:0:0]
		for _, r := range rows {
			if mine[r.id] {
				claimed = append(claimed, r)
			}
		}
		_, stop, err := s.publishLocked(ctx, tx, claimed, viaCommit)
		if stop != nil {
			s.log.Warn("txmq outbox: backend unavailable after commit; the recovery sweep will publish the rows", "error", stop)
		}
		return err
	})
	if err != nil {
		s.log.Error("txmq outbox: publishing rows after commit failed; they stay in the outbox for the recovery sweep",
			"rows", len(rows), "error", err)
	}
}

// SweepOnce publishes every row that is due now: rows with a next-attempt time in the past,
// and rows without one that are older than Options.RecoveryAge. It claims keyset pages of
// Options.SweepPageSize rows with FOR UPDATE SKIP LOCKED (so concurrent sweepers, on this node
// or others, never publish the same row), publishes each page inside the transaction that
// locked it and deletes the published rows in one statement. A failed row counts an attempt
// and is scheduled with backoff; a backend reported unavailable (core.ErrBackendUnavailable)
// stops the sweep at once, and the returned error wraps it. ctx is checked between pages; each
// page runs detached from ctx, bounded by Options.PublishTimeout.
func (s *Store) SweepOnce(ctx context.Context) (published int, err error) {
	return s.sweep(ctx, viaSweep)
}

func (s *Store) sweep(ctx context.Context, via string) (published int, err error) {
	var after int64
	for {
		if err := ctx.Err(); err != nil {
			return published, err
		}
		n, last, full, err := s.sweepPage(ctx, after, via)
		published += n
		if err != nil || !full {
			return published, err
		}
		after = last
	}
}

// sweepPage claims and publishes one page of due rows with ids above after. full reports a
// complete page (there may be more).
func (s *Store) sweepPage(parent context.Context, after int64, via string) (published int, last int64, full bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), s.o.PublishTimeout)
	defer cancel()
	var stop error
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rs, err := tx.Query(ctx, `SELECT id, queue, batch_id, body, not_before, exclusive, attempts FROM `+s.outbox+`
			WHERE id > $1 AND (next_attempt_at <= now()
				OR (next_attempt_at IS NULL AND created_at <= now() - $2 * interval '1 microsecond'))
			ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`,
			after, s.o.RecoveryAge.Microseconds(), s.o.SweepPageSize)
		if err != nil {
			return err
		}
		var page []row
		for rs.Next() {
			var r row
			var nb *time.Time
			if err := rs.Scan(&r.id, &r.batch.Queue, &r.batch.ID, &r.batch.Body, &nb, &r.batch.Exclusive, &r.attempts); err != nil {
				rs.Close()
				return err
			}
			if nb != nil {
				r.batch.NotBefore = *nb
			}
			page = append(page, r)
		}
		if err := rs.Err(); err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		last = page[len(page)-1].id
		full = len(page) == s.o.SweepPageSize
		published, stop, err = s.publishLocked(ctx, tx, page, via)
		return err
	})
	if err != nil {
		return 0, last, false, fmt.Errorf("txmq outbox: %s of table %s (rows after id %d) failed and was rolled back; rows stay for the next sweep: %w", via, s.outbox, after, err)
	}
	if stop != nil {
		return published, last, false, stop
	}
	return published, last, full, nil
}

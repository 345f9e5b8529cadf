package appdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// deadLetterStmt inserts a dead letter; a batch already there keeps its row while it is still
// dead (the upsert's WHERE is false: no change), and one replayed since is updated and dead
// again, unless the batch's replay generation (the last argument) is below the row's replay
// count: the original, or an earlier replay, coming back (see core.DeadLetter.Replays). A new
// row's replay count starts at the generation (a batch replayed before its row was purged),
// and an update raises it to the generation.
const deadLetterStmt = `INSERT INTO ` + deadTable + ` (queue, batch_id, body, exclusive, reason, last_error,
		attempts, messages, first_failed_at, last_failed_at, replay_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (queue, batch_id) WHERE batch_id <> '' DO UPDATE SET
		body = excluded.body, exclusive = excluded.exclusive, reason = excluded.reason,
		last_error = excluded.last_error, attempts = excluded.attempts, messages = excluded.messages,
		last_failed_at = max(last_failed_at, excluded.last_failed_at), replayed_at = NULL,
		replay_count = max(replay_count, excluded.replay_count)
	WHERE replayed_at IS NOT NULL AND replay_count <= ?`

func deadLetterArgs(dl *core.DeadLetter) []any {
	at := dl.At.UnixMicro()
	return []any{dl.Queue, dl.BatchID, dl.Body, dl.Exclusive, dl.Reason, dl.Error, dl.Attempts, dl.Messages, at, at, dl.Replays, dl.Replays}
}

// DeadLetter implements outbox.Dialect: the statement's change count is 1 for an insert or
// an update, 0 for a row left as it was.
func (d *Dialect) DeadLetter(ctx context.Context, dl *core.DeadLetter) (bool, error) {
	var n int64
	err := d.write(ctx, "storing a dead letter", func(c *sql.Conn) error {
		res, err := c.ExecContext(ctx, deadLetterStmt, deadLetterArgs(dl)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

const deadCols = `id, queue, batch_id, body, exclusive, reason, last_error, attempts, messages,
	first_failed_at, last_failed_at, replay_count, replayed_at`

type scanner interface{ Scan(dest ...any) error }

func scanDead(r scanner) (outbox.DeadLetterRow, error) {
	var dl outbox.DeadLetterRow
	var first, last int64
	var replayed sql.NullInt64
	err := r.Scan(&dl.ID, &dl.Queue, &dl.BatchID, &dl.Body, &dl.Exclusive, &dl.Reason, &dl.LastError, &dl.Attempts,
		&dl.Messages, &first, &last, &dl.ReplayCount, &replayed)
	dl.FirstFailedAt, dl.LastFailedAt = time.UnixMicro(first), time.UnixMicro(last)
	if replayed.Valid {
		dl.ReplayedAt = time.UnixMicro(replayed.Int64)
	}
	return dl, err
}

func question(int) string { return "?" }

// ListDeadLetters implements outbox.Dialect.
func (d *Dialect) ListDeadLetters(ctx context.Context, f outbox.DLQFilter) ([]outbox.DeadLetterRow, error) {
	where, args := f.SQL(question)
	rs, err := d.db.QueryContext(ctx, `SELECT `+deadCols+` FROM `+deadTable+` WHERE `+where+` ORDER BY id LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, classify("listing dead letters", err)
	}
	defer rs.Close()
	var out []outbox.DeadLetterRow
	for rs.Next() {
		dl, err := scanDead(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, dl)
	}
	return out, classify("listing dead letters", rs.Err())
}

// GetDeadLetter implements outbox.Dialect.
func (d *Dialect) GetDeadLetter(ctx context.Context, id int64) (*outbox.DeadLetterRow, error) {
	dl, err := scanDead(d.db.QueryRowContext(ctx, `SELECT `+deadCols+` FROM `+deadTable+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, outbox.ErrNotFound
	}
	if err != nil {
		return nil, classify("reading a dead letter", err)
	}
	return &dl, nil
}

// replayLease is how long a replay in progress keeps other replays of the same dead letter
// away when ctx has no deadline (else until ctx's deadline and leaseMargin).
const replayLease = time.Minute

// ReplayDeadLetter implements outbox.Dialect. The dead letter is not locked while fn
// publishes it (that would hold the file's write lock, and a backend in the same file could
// not write): a first transaction marks a replay in progress (replaying_until), fn runs, and
// a second one marks the row replayed, or clears the mark when fn failed. A concurrent replay
// of the same id meanwhile is refused with outbox.ErrAlreadyReplayed, so it is published once.
func (d *Dialect) ReplayDeadLetter(ctx context.Context, id int64, fn func(*outbox.DeadLetterRow) error) error {
	var dl outbox.DeadLetterRow
	var inProgress bool
	at := now()
	until := at + replayLease.Microseconds()
	if dead, ok := ctx.Deadline(); ok {
		until = dead.Add(leaseMargin).UnixMicro()
	}
	err := d.write(ctx, "reading a dead letter to replay", func(c *sql.Conn) error {
		var err error
		var replaying sql.NullInt64
		dl, err = scanDead(c.QueryRowContext(ctx, `SELECT `+deadCols+` FROM `+deadTable+` WHERE id = ?`, id))
		if err != nil {
			return err
		}
		if err := c.QueryRowContext(ctx, `SELECT replaying_until FROM `+deadTable+` WHERE id = ?`, id).Scan(&replaying); err != nil {
			return err
		}
		if inProgress = replaying.Valid && replaying.Int64 > at; inProgress || !dl.Dead() {
			return nil
		}
		_, err = c.ExecContext(ctx, `UPDATE `+deadTable+` SET replaying_until = ? WHERE id = ?`, until, id)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return outbox.ErrNotFound
	case err != nil:
		return err
	case inProgress:
		return fmt.Errorf("sqlite appdb: dead letter %d (queue %q) is being replayed by another call (until %s at the latest): %w",
			id, dl.Queue, time.UnixMicro(until).Format(time.RFC3339), outbox.ErrAlreadyReplayed)
	}
	if !dl.Dead() {
		return fn(&dl) // refused by fn (already replayed)
	}
	fnErr := fn(&dl)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if fnErr != nil {
		_ = d.write(sctx, "clearing a replay in progress", func(c *sql.Conn) error {
			_, err := c.ExecContext(sctx, `UPDATE `+deadTable+` SET replaying_until = NULL WHERE id = ?`, id)
			return err
		})
		return fnErr
	}
	err = d.write(sctx, "marking a dead letter replayed", func(c *sql.Conn) error {
		_, err := c.ExecContext(sctx, `UPDATE `+deadTable+` SET replay_count = replay_count + 1, replayed_at = ?, replaying_until = NULL WHERE id = ?`, now(), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %w", outbox.ErrMarkReplayed, err)
	}
	return nil
}

// PurgeDeadLetters implements outbox.Dialect.
func (d *Dialect) PurgeDeadLetters(ctx context.Context, f outbox.DLQFilter) (int64, error) {
	where, args := f.SQL(question)
	q := `DELETE FROM ` + deadTable + ` WHERE ` + where
	if f.Limit > 0 {
		q = `DELETE FROM ` + deadTable + ` WHERE id IN (SELECT id FROM ` + deadTable + ` WHERE ` + where + ` ORDER BY id LIMIT ?)`
		args = append(args, f.Limit)
	}
	var n int64
	err := d.write(ctx, "purging dead letters", func(c *sql.Conn) error {
		res, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

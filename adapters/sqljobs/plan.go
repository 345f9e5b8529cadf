package sqljobs

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// sqlPlanGuard is sent before every statement that reads or writes the jobs table, in the
// same implicit transaction (one pipelined round trip), so the statement is planned with
// sequential scans of the jobs table priced out: whatever the table's statistics say (empty
// at the last ANALYZE, or 5M rows), every claim, settle, extend, reaper and depth statement is
// an index access. The setting is local to that transaction and never reaches the app's
// sessions. TestStatementPlans checks each statement's custom and generic plans at several
// sizes.
const sqlPlanGuard = `SELECT set_config('enable_seqscan', 'off', true)`

// querier is what a guarded statement runs on: the pool or a transaction.
type querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// query runs sql behind the plan guard on q and returns its rows; closing the rows ends the
// pipeline. Rows.Err reports a failure of either statement.
func query(ctx context.Context, q querier, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(sqlPlanGuard)
	b.Queue(sql, args...)
	br := q.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		return nil, errors.Join(err, br.Close())
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &guardedRows{Rows: rows, br: br}, nil
}

// guardedRows closes the batch when its rows are closed.
type guardedRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

// Close closes the rows and then the batch.
func (r *guardedRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = errors.Join(r.Rows.Err(), r.br.Close())
}

// Err returns the rows' error, or after Close the first error of the rows or the batch.
func (r *guardedRows) Err() error {
	if r.closed {
		return r.err
	}
	return r.Rows.Err()
}

// queryRow runs sql behind the plan guard and scans its one row into dest.
func queryRow(ctx context.Context, q querier, sql string, args []any, dest ...any) error {
	rows, err := query(ctx, q, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// execGuarded runs sql behind the plan guard, discarding its result.
func execGuarded(ctx context.Context, q querier, sql string, args ...any) error {
	rows, err := query(ctx, q, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

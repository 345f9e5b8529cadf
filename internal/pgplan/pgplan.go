// Package pgplan runs PostgreSQL statements behind a plan guard: enable_seqscan off in the
// statement's own implicit transaction (one pipelined round trip), so that whatever a table's
// statistics say the statement is planned as an index access. SQL jobs and the ledger use it.
package pgplan

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Guard is sent before a guarded statement, in the same implicit transaction, so the statement
// is planned with sequential scans priced out. The setting is local to that transaction and
// never reaches the app's sessions.
const Guard = `SELECT set_config('enable_seqscan', 'off', true)`

// Querier is what a guarded statement runs on: a pool, a connection or a transaction.
type Querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Query runs sql behind the plan guard on q and returns its rows; closing the rows ends the
// pipeline. Rows.Err reports a failure of either statement.
func Query(ctx context.Context, q Querier, sql string, args ...any) (pgx.Rows, error) {
	return QueryBehind(ctx, q, Guard, sql, args...)
}

// QueryBehind is Query with guard (a statement that sets transaction-local settings, such as
// Guard) sent before sql instead of Guard.
func QueryBehind(ctx context.Context, q Querier, guard, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(guard)
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

// QueryRow runs sql behind the plan guard and scans its one row into dest.
func QueryRow(ctx context.Context, q Querier, sql string, args []any, dest ...any) error {
	rows, err := Query(ctx, q, sql, args...)
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

// Exec runs sql behind the plan guard, discarding its result.
func Exec(ctx context.Context, q Querier, sql string, args ...any) error {
	rows, err := Query(ctx, q, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// Rows returns rows that close br (the batch they came from) when closed: for a caller that
// queues statements of its own around the guard. Err reports a failure of either.
func Rows(rows pgx.Rows, br pgx.BatchResults) pgx.Rows { return &guardedRows{Rows: rows, br: br} }

// ExecTag runs sql behind the plan guard and returns its command tag.
func ExecTag(ctx context.Context, q Querier, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(Guard)
	b.Queue(sql, args...)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return br.Exec()
}

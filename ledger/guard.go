package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// planGuard makes the planner take an index access wherever one exists, for the rest of the
// transaction: the ledger's tables grow to millions of rows while their statistics may say
// otherwise (a table analyzed young), and a sequential scan of them would hold up every
// write. Every statement of the ledger runs behind it (TestStatementPlans checks that each
// has an index access to take).
const planGuard = `SELECT set_config('enable_seqscan', 'off', true)`

// guardedRows are the rows of a statement sent behind the plan guard; Close ends the batch.
type guardedRows struct {
	pgx.Rows
	br pgx.BatchResults
}

// Close closes the rows and the batch.
func (g guardedRows) Close() {
	g.Rows.Close()
	_ = g.br.Close()
}

// query runs sql behind the plan guard (one round trip, one implicit transaction).
func (l *Ledger) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(planGuard)
	b.Queue(sql, args...)
	br := l.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return guardedRows{Rows: rows, br: br}, nil
}

// guardedRow is the first row of a guarded query, as pgx.Row.
type guardedRow struct {
	rows pgx.Rows
	err  error
}

// Scan scans the first row, or returns pgx.ErrNoRows.
func (r guardedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// queryRow runs sql behind the plan guard and returns its first row.
func (l *Ledger) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := l.query(ctx, sql, args...)
	return guardedRow{rows: rows, err: err}
}

// exec runs sql behind the plan guard.
func (l *Ledger) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(planGuard)
	b.Queue(sql, args...)
	br := l.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return br.Exec()
}

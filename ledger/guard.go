package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txmq/txmq/internal/pgplan"
)

// planGuard runs before every ledger statement, in its transaction: the ledger's tables are
// read and written by index only, whatever their statistics say (package pgplan, the guard
// SQL jobs uses too). TestStatementPlans checks each statement.
const planGuard = pgplan.Guard

// query runs sql behind the plan guard on the ledger's pool.
func (l *Ledger) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return pgplan.Query(ctx, l.pool, sql, args...)
}

// guardedRow is one row of a statement run behind the plan guard when scanned.
type guardedRow struct {
	l    *Ledger
	ctx  context.Context
	sql  string
	args []any
}

// Scan runs the statement and scans its one row into dest (pgx.ErrNoRows when none).
func (r guardedRow) Scan(dest ...any) error {
	return pgplan.QueryRow(r.ctx, r.l.pool, r.sql, r.args, dest...)
}

// queryRow returns sql's row behind the plan guard, run when scanned.
func (l *Ledger) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return guardedRow{l: l, ctx: ctx, sql: sql, args: args}
}

// exec runs sql behind the plan guard on the ledger's pool and returns its command tag.
func (l *Ledger) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return pgplan.ExecTag(ctx, l.pool, sql, args...)
}

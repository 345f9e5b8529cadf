package sqljobs

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/internal/pgplan"
)

// sqlPlanGuard is sent before every statement that reads or writes the jobs table, in the
// same implicit transaction (one pipelined round trip), so the statement is planned with
// sequential scans of the jobs table priced out: whatever the table's statistics say (empty
// at the last ANALYZE, or 5M rows), every claim, settle, extend, reaper and depth statement is
// an index access (package pgplan). TestStatementPlans checks each statement's custom and
// generic plans at several sizes.
const sqlPlanGuard = pgplan.Guard

// querier is what a guarded statement runs on: the pool or a transaction.
type querier = pgplan.Querier

// query runs sql behind the plan guard on q (pgplan.Query).
func query(ctx context.Context, q querier, sql string, args ...any) (pgx.Rows, error) {
	return pgplan.Query(ctx, q, sql, args...)
}

// queryRow runs sql behind the plan guard and scans its one row into dest (pgplan.QueryRow).
func queryRow(ctx context.Context, q querier, sql string, args []any, dest ...any) error {
	return pgplan.QueryRow(ctx, q, sql, args, dest...)
}

// execGuarded runs sql behind the plan guard, discarding its result (pgplan.Exec).
func execGuarded(ctx context.Context, q querier, sql string, args ...any) error {
	return pgplan.Exec(ctx, q, sql, args...)
}

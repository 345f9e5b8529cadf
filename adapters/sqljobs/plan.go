package sqljobs

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/internal/pgplan"
)

// sqlPlanGuard is sent before every statement that reads or writes the jobs table, in the
// same implicit transaction (one pipelined round trip), so the statement is planned with
// sequential scans of the jobs table priced out: whatever the table's statistics say (empty
// at the last ANALYZE, or 5M rows), every claim, settle, extend, reaper and depth statement is
// an index access (package pgplan). TestStatementPlans checks each statement's custom and
// generic plans at several sizes.
//
// A pool whose every session already plans that way (see SessionPlanGuard) needs no guard
// per statement: the Backend then sends each statement alone, one statement per round trip
// instead of two.
const sqlPlanGuard = pgplan.Guard

// planGuardParam is the run-time parameter, sent in a connection's startup message, that
// makes its whole session plan as the guard does.
const planGuardParam = "enable_seqscan"

// SessionPlanGuard sets enable_seqscan=off in the startup parameters of cfg's connections, so
// every session of the pool plans the jobs-table statements as index accesses by itself
// (see the package doc's "Plans"). A Backend made by New on such a pool sends each claim,
// settle and extension as one statement, without the per-statement guard; Open does this for
// the pool it opens (unless Options.PgBouncer). Use it only for a pool given to the Backend
// alone: the setting applies to every statement on the pool. Not for a pool that goes through
// a transaction pooler, which does not keep startup parameters.
func SessionPlanGuard(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams[planGuardParam] = "off"
}

// sessionGuarded reports whether every session of pool plans with enable_seqscan off (the
// pool's startup parameters say so) and the pool does not go through a transaction pooler.
func sessionGuarded(pool *pgxpool.Pool, pgBouncer bool) bool {
	if pgBouncer {
		return false
	}
	return pool.Config().ConnConfig.RuntimeParams[planGuardParam] == "off"
}

// querier is what a guarded statement runs on: the pool or a transaction.
type querier = pgplan.Querier

// sessionQuerier is a pool or a transaction, which can also run a statement alone.
type sessionQuerier interface {
	querier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// preGuarded is a querier whose sessions already plan with enable_seqscan off: query,
// queryRow and execGuarded send the statement alone.
type preGuarded struct{ sessionQuerier }

// on returns what the Backend's guarded statements run on q with: q itself (the guard is
// sent with each statement), or q marked as needing none when the pool's sessions carry it.
func (be *Backend) on(q sessionQuerier) querier {
	if be.sessionGuard {
		return preGuarded{q}
	}
	return q
}

// query runs sql behind the plan guard on q (pgplan.Query), or alone on a preGuarded q.
func query(ctx context.Context, q querier, sql string, args ...any) (pgx.Rows, error) {
	if p, ok := q.(preGuarded); ok {
		return p.Query(ctx, sql, args...)
	}
	return pgplan.Query(ctx, q, sql, args...)
}

// queryRow runs sql behind the plan guard and scans its one row into dest (pgplan.QueryRow),
// or alone on a preGuarded q.
func queryRow(ctx context.Context, q querier, sql string, args []any, dest ...any) error {
	if p, ok := q.(preGuarded); ok {
		return p.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	return pgplan.QueryRow(ctx, q, sql, args, dest...)
}

// execGuarded runs sql behind the plan guard, discarding its result (pgplan.Exec), or alone
// on a preGuarded q.
func execGuarded(ctx context.Context, q querier, sql string, args ...any) error {
	if p, ok := q.(preGuarded); ok {
		_, err := p.Exec(ctx, sql, args...)
		return err
	}
	return pgplan.Exec(ctx, q, sql, args...)
}

// queueGuard queues the plan guard in b unless q's sessions carry it, and returns how many
// statements it queued (0 or 1).
func queueGuard(b *pgx.Batch, q querier) int {
	if _, ok := q.(preGuarded); ok {
		return 0
	}
	b.Queue(sqlPlanGuard)
	return 1
}

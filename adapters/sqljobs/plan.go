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
// an index access (package pgplan). It also sets plan_cache_mode to force_generic_plan for
// that transaction, so a statement the connection has prepared reuses its generic plan instead
// of being planned again (as SessionPlanGuard does for a whole session; through a transaction
// pooler, where statements are not prepared, it changes nothing). TestStatementPlans checks
// each statement's custom and generic plans at several sizes.
//
// A pool whose every session already plans that way (see SessionPlanGuard) needs no guard
// per statement: the Backend then sends each statement alone, one statement per round trip
// instead of two.
const sqlPlanGuard = `SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`

// planGuardParam is the run-time parameter, sent in a connection's startup message, that
// makes its whole session plan as the guard does.
const planGuardParam = "enable_seqscan"

// planCacheParam is the run-time parameter SessionPlanGuard sets to force_generic_plan: a
// session plans each of the Backend's prepared statements once and reuses that plan, instead
// of planning the claim statement anew at every execution (Postgres' "auto" mode keeps
// choosing custom plans for it: about a sixth of the server's time per claim round).
// TestStatementPlans checks the generic plans as it does the custom ones.
const planCacheParam = "plan_cache_mode"

// SessionPlanGuard sets enable_seqscan=off in the startup parameters of cfg's connections, so
// every session of the pool plans the jobs-table statements as index accesses by itself
// (see the package doc's "Plans"), and plan_cache_mode=force_generic_plan (unless cfg names
// plan_cache_mode), so each session plans each prepared statement once instead of at every
// execution. A Backend made by New on such a pool sends each claim, settle and extension as
// one statement, without the per-statement guard; Open does this for the pool it opens
// (unless Options.PgBouncer). Use it only for a pool given to the Backend alone: the settings
// apply to every statement on the pool. Not for a pool that goes through a transaction
// pooler, which does not keep startup parameters.
func SessionPlanGuard(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams[planGuardParam] = "off"
	if _, named := cfg.ConnConfig.RuntimeParams[planCacheParam]; !named {
		cfg.ConnConfig.RuntimeParams[planCacheParam] = "force_generic_plan"
	}
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

// query runs sql behind sqlPlanGuard on q (pgplan.QueryBehind), or alone on a preGuarded q.
func query(ctx context.Context, q querier, sql string, args ...any) (pgx.Rows, error) {
	if p, ok := q.(preGuarded); ok {
		return p.Query(ctx, sql, args...)
	}
	return pgplan.QueryBehind(ctx, q, sqlPlanGuard, sql, args...)
}

// queryRow runs sql behind the plan guard and scans its one row into dest, or alone on a
// preGuarded q.
func queryRow(ctx context.Context, q querier, sql string, args []any, dest ...any) error {
	if p, ok := q.(preGuarded); ok {
		return p.QueryRow(ctx, sql, args...).Scan(dest...)
	}
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

// execGuarded runs sql behind the plan guard, discarding its result, or alone on a
// preGuarded q.
func execGuarded(ctx context.Context, q querier, sql string, args ...any) error {
	if p, ok := q.(preGuarded); ok {
		_, err := p.Exec(ctx, sql, args...)
		return err
	}
	rows, err := query(ctx, q, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
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

package sqljobs

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/pgplan"
)

// Cluster-wide limits (core.ClusterLimiter). A queue with a limit (core.QueueSlots.Limit, and
// per fairness key KeyLimit) is claimed in a claim of its own, as a fair queue is, in one
// implicit transaction and one round trip:
//
//   - sqlLockLimit takes a transaction-level advisory lock on the queue, so the claims of one
//     limited queue, from every node, run one at a time (claims of other queues do not wait);
//   - the claim statement (sqlClaim, sqlClaimPrio or sqlClaimFair with the limits applied, see
//     limited) starts after the lock is granted, so under READ COMMITTED its snapshot sees
//     every claim an earlier holder of the lock committed. It counts the queue's running
//     leases, rows with a lease token and run_at > now() (an expired lease no longer counts,
//     a settled one is gone or has no token), and claims at most Limit minus that; with a
//     KeyLimit it counts each fairness key's the same way, passes over the keys at their limit
//     in the walk of the turn, and takes at most KeyLimit minus the key's count of each key.
//
// Nothing is kept beside the rows: a lease that ends, whatever ended it (Ack, Retry, Drop,
// Split, a crashed or paused node that stopped extending), releases its slot by itself. The
// claim and the extensions of a limited queue's batches commit synchronously (see
// syncCommit), as an Exclusive queue's do. An Ack or Drop of a limited queue's batch wakes
// the nodes waiting for the queue (NOTIFY), as releasing an Exclusive lock does.
//
// Cost: the count reads the queue's rows with run_at > now() (in flight and delayed) through
// the (queue, run_at) INCLUDE (lease_token) index, index-only; the count per key reads a
// key's such rows through (queue, fair_key, run_at). A claim of a limited queue also waits
// for the claims of that queue from other nodes, which are short single statements.

var _ core.ClusterLimiter = (*Backend)(nil)

// LimitsClaims implements core.ClusterLimiter: the jobs table enforces QueueSlots.Limit and
// KeyLimit.
func (be *Backend) LimitsClaims() error { return nil }

// sqlLockLimit serialises the claims of one limited queue for the rest of their implicit
// transaction. $1 queue; a hash collision only serialises two queues' claims.
const sqlLockLimit = `SELECT pg_advisory_xact_lock(hashtextextended('limit/' || $1::text, 7311))`

// running counts the in-flight rows of queue expression q (and fairness key expression k,
// when not empty).
func running(q, k string) string {
	s := `(SELECT count(*) FROM {{s}}.txmq_jobs b WHERE b.queue = ` + q
	if k != "" {
		s += ` AND b.fair_key = ` + k
	}
	return s + ` AND b.lease_token IS NOT NULL AND b.run_at > now())`
}

// limited returns claim statement stmt (sqlClaim, sqlClaimPrio, sqlClaimFair or
// sqlClaimFairPrio) with a queue's limits applied: $lim is the queue's Limit (0: none),
// $keyLim (fair only) its KeyLimit.
func limited(stmt string, lim int, keyLim int) string {
	p := "$" + strconv.Itoa(lim) + "::int"
	room := `CASE WHEN ` + p + ` > 0 THEN least(r.lim, greatest(` + p + ` - ` + running("r.q", "") + `, 0))::int ELSE r.lim END AS lim`
	out := replaceOnce(stmt, "SELECT r.q, r.lim, r.excl", "SELECT r.q, "+room+", r.excl")
	if keyLim == 0 {
		return out
	}
	kp := "$" + strconv.Itoa(keyLim) + "::int"
	keyRoom := func(q, k string) string {
		return `(CASE WHEN ` + kp + ` > 0 THEN greatest(` + kp + ` - ` + running(q, k) + `, 0) ELSE 2147483647 END)`
	}
	out = replaceOnce(out, "j.fair_key = g.k AND j.run_at <= now()) THEN 1", "j.fair_key = g.k AND j.run_at <= now()) AND "+keyRoom("g.q", "g.k")+" > 0 THEN 1")
	return replaceOnce(out, "\n\t\t\tLIMIT r.lim\n", "\n\t\t\tLIMIT least(r.lim, "+keyRoom("g.q", "g.k")+")\n")
}

// replaceOnce replaces the one occurrence of old in s, and panics when there is not exactly
// one: the statement it rewrites changed.
func replaceOnce(s, old, new string) string {
	if strings.Count(s, old) != 1 {
		panic("sqljobs: a claim statement changed; update limited: " + old)
	}
	return strings.Replace(s, old, new, 1)
}

// The claim statements of a limited queue: sqlClaim, sqlClaimFair and sqlClaimFairPrio with
// $8 the Limit (and $9 the KeyLimit), sqlClaimPrio with $9 the Limit.
var (
	sqlClaimLimited     = limited(sqlClaim, 8, 0)
	sqlClaimPrioLimited = limited(sqlClaimPrio, 9, 0)
	sqlClaimFairLimited = limited(sqlClaimFair, 8, 9)

	sqlClaimFairPrioLimited = limited(sqlClaimFairPrio, 8, 9)
)

// queryLimited runs a limited queue's claim sql behind the plan guard (unless q's sessions
// carry it) and the queue's lock (sqlLockLimit), in one implicit transaction and one round
// trip, and returns its rows; closing them ends the pipeline.
func queryLimited(ctx context.Context, q querier, queue, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	n := queueGuard(b, q) + 1
	b.Queue(sqlLockLimit, queue)
	b.Queue(sql, args...)
	br := q.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			return nil, errors.Join(err, br.Close())
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return pgplan.Rows(rows, br), nil
}

// wakeLimited tells the nodes waiting for queue that one of its limited slots is free (after
// an Ack or Drop; a Retry notifies by itself). Best effort: a lost wake-up costs a waiting
// node its next timer or poll.
func (be *Backend) wakeLimited(ctx context.Context, queue string) {
	if err := be.attempt(ctx, func(ctx context.Context) error {
		_, err := be.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, be.channel, queue)
		return err
	}); err != nil {
		be.o.Logger.Debug("sqljobs: waking the nodes waiting for a limited queue failed; they claim at their next timer", "queue", queue, "error", err)
	}
}

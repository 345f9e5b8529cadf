package mysql

import (
	"context"
	"database/sql"
	"slices"

	"github.com/txmq/txmq/core"
)

// Cluster-wide limits (core.ClusterLimiter; QueueConfig.ClusterLimit). A limited queue
// (core.QueueSlots.Limit) is claimed as sqljobs claims one, inside the claim transaction
// (READ COMMITTED), before its rows are picked:
//
//   - sqlLimitLock locks the queue's row of txmq_jobs_exclusive (made once per queue and
//     Backend, as an Exclusive queue's lock row is; the columns are not used), so the claims
//     of one limited queue, from every node, take turns until their transaction commits;
//     claims of other queues do not wait. The rows are locked in queue order, before any
//     Exclusive lock is taken, so two claims never wait on each other in a cycle.
//   - sqlLimitCount, a consistent read whose snapshot starts after the lock was granted (READ
//     COMMITTED takes one per statement), so it sees every lease an earlier holder committed,
//     counts the queue's live leases: rows with a lease token and run_at (the lease's end)
//     after now. An expired lease no longer counts; a settled one is gone or has no token.
//   - The queue's pick takes at most Limit minus that.
//
// Nothing is kept beside the rows: a lease that ends, whatever ended it (Ack, Retry, Drop,
// a split, a crashed or paused node that stopped extending), frees its slot by itself. A
// settle of a limited batch signals this process's waiting fetches at once; other processes
// find the free slot at their next poll (Options.PollInterval), as for Exclusive.
//
// KeyLimit (a fair queue's cap per fairness key) is enforced in the fair queue's pick, under
// the queue's turn row lock: it counts each key's live leases and passes over the keys at
// their limit (fair.go).
//
// Cost: a limited queue's claim adds a locking read of one row and an index-only count of
// the queue's rows with run_at after now (in flight and delayed) through
// txmq_jobs_claim_idx, which carries lease_token; queues without a limit pay nothing.

var _ core.ClusterLimiter = (*Backend)(nil)

// LimitsClaims implements core.ClusterLimiter: the claim enforces QueueSlots.Limit.
func (be *Backend) LimitsClaims() error { return nil }

// sqlLimitLock serialises the claims of one limited queue for the rest of their transaction.
const sqlLimitLock = `SELECT queue FROM {{s}}txmq_jobs_exclusive FORCE INDEX (PRIMARY) WHERE queue = ? FOR UPDATE`

// sqlLimitCount counts a queue's live leases.
const sqlLimitCount = `SELECT COUNT(*) FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND run_at > {{now}} AND lease_token IS NOT NULL`

// applyLimits locks and counts each limited queue of p (in queue order) in tx and returns p
// with those queues' scan limits cut to the room left (0: the queue is not picked).
func (be *Backend) applyLimits(ctx context.Context, tx *sql.Tx, p claimParams) (claimParams, error) {
	if p.lim == nil {
		return p, nil
	}
	limits := append([]int(nil), p.limits...)
	for i, q := range p.queues {
		if p.lim[i] <= 0 {
			continue
		}
		var name string
		if err := tx.QueryRowContext(ctx, be.sql.limitLock, q).Scan(&name); err != nil {
			return p, err
		}
		var running int
		if err := tx.QueryRowContext(ctx, be.sql.limitCount, q).Scan(&running); err != nil {
			return p, err
		}
		limits[i] = max(min(limits[i], p.lim[i]-running), 0)
	}
	p.limits = limits
	return p, nil
}

// limited reports whether queue was requested with a cluster-wide limit.
func (p claimParams) limited(queue string) bool {
	if p.lim == nil {
		return false
	}
	i, ok := slices.BinarySearch(p.queues, queue) // sorted by claimParamsOf
	return ok && p.lim[i] > 0
}

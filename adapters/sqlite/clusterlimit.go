package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/txmq/txmq/core"
)

var _ core.ClusterLimiter = (*Backend)(nil)

// Cluster-wide limits (core.ClusterLimiter). A claim is one BEGIN IMMEDIATE transaction, which
// holds the file's write lock: no other claim, settle or extension of any process on the file
// runs meanwhile. So the claim of a queue with a limit (core.QueueSlots.Limit) counts the
// queue's running leases in that transaction (sqlRunning: rows with a lease token and
// run_at > now; an expired lease no longer counts, a settled one is gone or has no token)
// and picks at most the limit minus that: the count and the claim are atomic with nothing
// beside the rows, and a lease that ends, whatever ended it (Ack, Retry, Drop, a crashed or
// paused node that stopped extending), gives its slot back by itself. The Ack or Drop of a
// limited queue's batch wakes this process's fetches waiting for the queue, as releasing an
// Exclusive lock does (a Retry always does); other processes find the slot at their next poll.
//
// KeyLimit (a fair queue's cap per fairness key) is enforced in the fair queue's pick, in the
// same transaction: it reads the fairness keys of the queue's unexpired leases and passes over
// the keys at their limit, which keep their place in the turn (fair.go).
//
// Cost: one count per limited queue in its claim, a range scan of the claim index (it holds
// lease_token) over the queue's rows with run_at > now, stopped after Limit leased rows; none
// on other queues. A node whose limited queue is full and has ready batches takes the write
// lock at each poll to find that out.

// LimitsClaims implements core.ClusterLimiter: the claim transaction enforces QueueSlots.Limit.
func (be *Backend) LimitsClaims() error { return nil }

// sqlRunning counts a queue's unexpired leases, up to :limit (enough to know the room left).
const sqlRunning = `SELECT count(*) FROM (SELECT 1 FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :queue AND run_at > :now AND run_at < 9223372036854775807 AND lease_token IS NOT NULL
LIMIT :limit)`

// withRoom returns p with each limited queue's scan limit cut to the room its limit leaves,
// counted in tx (the claim's transaction) at now; p itself is unchanged, as a claim may run
// again with it.
func (p claimParams) withRoom(ctx context.Context, tx execer, now int64) (claimParams, error) {
	if p.lim == nil {
		return p, nil
	}
	limits := slices.Clone(p.limits)
	for i, lim := range p.lim {
		if lim <= 0 {
			continue
		}
		var running int
		err := tx.QueryRowContext(ctx, sqlRunning, sql.Named("queue", p.queues[i]), sql.Named("now", now), sql.Named("limit", lim)).Scan(&running)
		if err != nil {
			return p, err
		}
		limits[i] = min(limits[i], max(lim-running, 0))
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

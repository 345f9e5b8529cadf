package sqljobs

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

// KeepsUnique implements core.UniqueKeeper: every mode, in the transaction that stores the
// batch (txmq_jobs_unique, see migration 0007).
func (be *Backend) KeepsUnique(core.UniqueMode) error { return nil }

// sqlUniqueTake inserts the key's row for a batch not stored yet (job_id 0), or does nothing
// when the key has a row; true when it inserted. $1 queue, $2 key, $3 batch id.
const sqlUniqueTake = `
INSERT INTO {{s}}.txmq_jobs_unique (queue, ukey, batch_id, job_id, body_md5, expires_at)
VALUES ($1, $2, $3, 0, '', now())
ON CONFLICT (queue, ukey) DO NOTHING
RETURNING true`

// sqlUniqueHolder locks the key's row and reads its holder: the batch id, the job row and
// whether the window is still running, then the job row's state: stored, and started (claimed
// once: a lease or deliveries; or rewritten by a retry: its body is not the one stored).
// $1 queue, $2 key.
const sqlUniqueHolder = `
SELECT u.batch_id, u.job_id, u.expires_at > now(), j.id IS NOT NULL,
	COALESCE(j.lease_token IS NOT NULL OR j.deliveries > 0 OR md5(j.body) <> u.body_md5, false)
FROM {{s}}.txmq_jobs_unique u
LEFT JOIN LATERAL (
	SELECT id, lease_token, deliveries, body FROM {{s}}.txmq_jobs WHERE id = u.job_id OFFSET 0
) j ON true
WHERE u.queue = $1 AND u.ukey = $2
FOR UPDATE OF u`

// sqlUniqueMove gives the key to the batch just stored (the job row currval names), held for
// $4 µs from now for UniqueWindow (0 otherwise). $1 queue, $2 key, $3 batch id, $5 its body.
const sqlUniqueMove = `
UPDATE {{s}}.txmq_jobs_unique SET batch_id = $3, job_id = currval({{idseq}}), body_md5 = md5($5::bytea),
	expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE queue = $1 AND ukey = $2`

// sqlUniqueReplace deletes a debounce's earlier batch if it is still unclaimed. $1 job id.
const sqlUniqueReplace = `DELETE FROM {{s}}.txmq_jobs WHERE id = $1 AND lease_token IS NULL AND deliveries = 0`

// sqlPruneUnique deletes up to $1 key rows whose window passed and whose batch is gone.
const sqlPruneUnique = `
DELETE FROM {{s}}.txmq_jobs_unique WHERE ctid = ANY(ARRAY(
	SELECT u.ctid FROM {{s}}.txmq_jobs_unique u
	WHERE u.expires_at <= now()
		AND NOT EXISTS (SELECT 1 FROM {{s}}.txmq_jobs j WHERE j.id = u.job_id OFFSET 0)
	ORDER BY u.expires_at LIMIT $1
))`

// publishUnique stores b, a unique batch, in one transaction with its key: it takes the key's
// row (inserting it, or locking the one there and judging its holder by b's mode), stores the
// batch (removing the unstarted one a debounce replaces) and moves the key to it. A key held
// by another batch is a *core.UniqueError; one held by b itself (a retried publish) is nil.
func (be *Backend) publishUnique(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	u := b.Unique
	err := pgx.BeginFunc(ctx, be.pool, func(tx pgx.Tx) error {
		q := be.on(tx)
		var (
			fresh              bool
			batchID            string
			jobID              int64
			inWindow, live, st bool
		)
		for try := 0; ; try++ { // the reaper may delete the key's row between the two
			err := queryRow(ctx, q, be.sql.uniqueTake, []any{b.Queue, u.Key, b.ID}, &fresh)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if fresh {
				break
			}
			err = queryRow(ctx, q, be.sql.uniqueHolder, []any{b.Queue, u.Key}, &batchID, &jobID, &inWindow, &live, &st)
			if errors.Is(err, pgx.ErrNoRows) && try < 3 {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
		if !fresh {
			h := core.UniqueHolder{Batch: batchID, InWindow: inWindow, Live: live, Started: st}
			switch h.Judge(u.Mode, b.ID) {
			case core.UniqueSelf:
				return &core.UniqueStop{Self: true}
			case core.UniqueHeld:
				return &core.UniqueStop{Kept: batchID}
			case core.UniqueReplace:
				if err := execGuarded(ctx, q, be.sql.uniqueReplace, jobID); err != nil {
					return err
				}
			}
		}
		if b.Key != "" {
			rows, err := queryKeyed(ctx, q, b.Queue, b.Key, be.sql.publishKeyed, b.Queue, b.ID, body, delayUs, b.Messages, be.channel, b.Key, prio(b), micros(b.Lead), b.FairKey)
			if err != nil {
				return err
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		} else if _, err := tx.Exec(ctx, be.sql.publish, b.Queue, b.ID, body, delayUs, b.Messages, be.channel, prio(b), micros(b.Lead), b.FairKey); err != nil {
			return err
		}
		window := int64(0)
		if u.Mode == core.UniqueWindow {
			window = micros(u.Window)
		}
		return execGuarded(ctx, q, be.sql.uniqueMove, b.Queue, u.Key, b.ID, window, body)
	})
	return core.UniqueOutcome(b.Queue, u, err)
}

// pruneUnique deletes the key rows no batch holds any more, in pages of ReapBatch.
func (be *Backend) pruneUnique(ctx context.Context) (int64, error) {
	return reaper.InPages(ctx, be.o.ReapBatch, func(ctx context.Context) (int64, error) {
		var n int64
		err := be.run(ctx, "reaper: deleting unique keys no batch holds", func(ctx context.Context) error {
			rows, err := query(ctx, be.on(be.pool), be.sql.pruneUnique, be.o.ReapBatch)
			if err != nil {
				return err
			}
			rows.Close()
			n = rows.CommandTag().RowsAffected()
			return rows.Err()
		})
		return n, err
	})
}

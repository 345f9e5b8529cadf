package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

var _ core.UniqueKeeper = (*Backend)(nil)

// KeepsUnique implements core.UniqueKeeper: every mode, in the transaction that stores the
// batch (txmq_jobs_unique, migration 0003).
func (be *Backend) KeepsUnique(core.UniqueMode) error { return nil }

// sqlUniqueTake makes the key's row when it has none (no holder: job 0, window ended) and
// locks it either way: two publishes of one key take turns here. $1 queue, $2 key.
const sqlUniqueTake = `
INSERT INTO {{s}}txmq_jobs_unique (queue, ukey, batch_id, job_id, body_sum, expires_at) VALUES (?, ?, '', 0, '', 0)
ON DUPLICATE KEY UPDATE job_id = job_id`

// sqlUniqueHolder reads the key's holder (its row locked by sqlUniqueTake): its batch id and
// job row, whether the window still runs, then the job row: stored, and started (claimed once:
// a lease or deliveries; or rewritten by a retry: its body's SHA-256 is not the one stored).
// $1 queue, $2 key.
const sqlUniqueHolder = `
SELECT u.batch_id, u.job_id, u.expires_at > {{now}}, j.id IS NOT NULL,
	COALESCE(j.lease_token IS NOT NULL OR j.deliveries > 0 OR SHA2(j.body, 256) <> u.body_sum, 0)
FROM {{s}}txmq_jobs_unique u FORCE INDEX (PRIMARY)
LEFT JOIN {{s}}txmq_jobs j FORCE INDEX (PRIMARY) ON j.id = u.job_id
WHERE u.queue = ? AND u.ukey = ?`

// sqlUniqueReplace deletes a debounce's earlier batch if it is still unclaimed. $1 job id.
const sqlUniqueReplace = `DELETE FROM {{s}}txmq_jobs WHERE id = ? AND lease_token IS NULL AND deliveries = 0`

// sqlUniqueMove gives the key to the batch just stored (LAST_INSERT_ID: the job row the
// publish inserted), held $4 µs from now for UniqueWindow (0 otherwise). $1 batch id, $2 body
// sum, $3 window, $4 queue, $5 key.
const sqlUniqueMove = `
UPDATE {{s}}txmq_jobs_unique SET batch_id = ?, job_id = LAST_INSERT_ID(), body_sum = ?, expires_at = {{now}} + ?
WHERE queue = ? AND ukey = ?`

// sqlPruneUnique deletes up to $1 key rows whose window passed and whose batch is gone.
const sqlPruneUnique = `
DELETE FROM {{s}}txmq_jobs_unique
WHERE expires_at <= {{now}} AND NOT EXISTS (SELECT 1 FROM {{s}}txmq_jobs j WHERE j.id = txmq_jobs_unique.job_id)
ORDER BY expires_at LIMIT ?`

// publishUnique stores b, a unique batch, in one transaction with its key: it makes or locks
// the key's row, judges the holder by b's mode, removes the unstarted batch a debounce
// replaces, stores the batch and moves the key to it. A key held by another batch is a
// *core.UniqueError; one held by b itself (a retried publish) is nil.
func (be *Backend) publishUnique(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	u := b.Unique
	sum := sha256.Sum256(body)
	err := inTx(ctx, be.db, readCommitted, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, be.sql.uniqueTake, b.Queue, u.Key); err != nil {
			return err
		}
		var (
			batchID            string
			jobID              int64
			inWindow, live, st bool
		)
		if err := tx.QueryRowContext(ctx, be.sql.uniqueHolder, b.Queue, u.Key).Scan(&batchID, &jobID, &inWindow, &live, &st); err != nil {
			return err
		}
		h := core.UniqueHolder{Batch: batchID, InWindow: inWindow, Live: live, Started: st}
		switch h.Judge(u.Mode, b.ID) {
		case core.UniqueSelf:
			return &core.UniqueStop{Self: true}
		case core.UniqueHeld:
			return &core.UniqueStop{Kept: batchID}
		case core.UniqueReplace:
			if _, err := tx.ExecContext(ctx, be.sql.uniqueReplace, jobID); err != nil {
				return err
			}
		}
		if b.Key != "" {
			if err := be.publishKeyed(ctx, tx, b, body, delayUs); err != nil {
				return err
			}
		} else if _, err := tx.ExecContext(ctx, be.sql.publish, b.Queue, b.ID, body, delayUs, b.Messages, prio(b), micros(b.Lead), b.FairKey); err != nil {
			return err
		}
		window := int64(0)
		if u.Mode == core.UniqueWindow {
			window = micros(u.Window)
		}
		_, err := tx.ExecContext(ctx, be.sql.uniqueMove, b.ID, hex.EncodeToString(sum[:]), window, b.Queue, u.Key)
		return err
	})
	return core.UniqueOutcome(b.Queue, u, err)
}

// pruneUnique deletes the key rows no batch holds any more, in pages of ReapBatch.
func (be *Backend) pruneUnique(ctx context.Context) (int64, error) {
	return reaper.InPages(ctx, be.o.ReapBatch, func(ctx context.Context) (int64, error) {
		var n int64
		err := be.run(ctx, "reaper: deleting unique keys no batch holds", func(ctx context.Context) error {
			var err error
			n, err = affected(ctx, be.db, be.sql.pruneUnique, be.o.ReapBatch)
			return err
		})
		return n, err
	})
}

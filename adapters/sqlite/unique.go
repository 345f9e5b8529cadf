package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

var _ core.UniqueKeeper = (*Backend)(nil)

// KeepsUnique implements core.UniqueKeeper: every mode, in the transaction that stores the
// batch (txmq_jobs_unique, migration 0002).
func (be *Backend) KeepsUnique(core.UniqueMode) error { return nil }

// sqlUniqueHolder reads the key's holder: its batch id and job row, whether the window still
// runs and the body sum it was stored with, then the job row (NULLs when it is gone): claimed
// once (a lease or deliveries) and its body now.
const sqlUniqueHolder = `
SELECT u.batch_id, u.job_id, u.expires_at > :now, u.body_sum, j.id IS NOT NULL,
	COALESCE(j.lease_token IS NOT NULL OR j.deliveries > 0, 0), j.body
FROM txmq_jobs_unique u LEFT JOIN txmq_jobs j ON j.id = u.job_id
WHERE u.queue = :queue AND u.ukey = :ukey`

// sqlUniqueReplace deletes a debounce's earlier batch if it is still unclaimed.
const sqlUniqueReplace = `DELETE FROM txmq_jobs WHERE id = :id AND lease_token IS NULL AND deliveries = 0`

// sqlUniqueMove gives the key to the batch just stored (last_insert_rowid, the job row the
// publish inserted), held until :until for UniqueWindow (:now otherwise).
const sqlUniqueMove = `
INSERT INTO txmq_jobs_unique (queue, ukey, batch_id, job_id, body_sum, expires_at)
VALUES (:queue, :ukey, :batch, last_insert_rowid(), :sum, :until)
ON CONFLICT (queue, ukey) DO UPDATE SET batch_id = excluded.batch_id, job_id = excluded.job_id,
	body_sum = excluded.body_sum, expires_at = excluded.expires_at`

// sqlPruneUnique deletes up to :limit key rows whose window passed and whose batch is gone.
const sqlPruneUnique = `DELETE FROM txmq_jobs_unique WHERE rowid IN (
SELECT u.rowid FROM txmq_jobs_unique u INDEXED BY txmq_jobs_unique_expires_idx
WHERE u.expires_at <= :now AND NOT EXISTS (SELECT 1 FROM txmq_jobs j WHERE j.id = u.job_id)
ORDER BY u.expires_at LIMIT :limit)`

// publishUnique stores b, a unique batch, in one transaction with its key: it reads the key's
// holder and judges it by b's mode, removes the unstarted batch a debounce replaces, stores the
// batch and moves the key to it. A key held by another batch is a *core.UniqueError; one held
// by b itself (a retried publish) is nil.
func (be *Backend) publishUnique(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	u := b.Unique
	sum := sha256.Sum256(body)
	err := be.inTx(ctx, func(tx execer) error {
		now := nowArg()
		var (
			batchID            string
			jobID              int64
			inWindow, live, st bool
			stored, jbody      []byte
		)
		err := tx.QueryRowContext(ctx, sqlUniqueHolder, now, sql.Named("queue", b.Queue), sql.Named("ukey", u.Key)).
			Scan(&batchID, &jobID, &inWindow, &stored, &live, &st, &jbody)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if live && !st {
				js := sha256.Sum256(jbody)
				st = !bytes.Equal(js[:], stored) // a retry rewrote it: it ran
			}
			h := core.UniqueHolder{Batch: batchID, InWindow: inWindow, Live: live, Started: st}
			switch h.Judge(u.Mode, b.ID) {
			case core.UniqueSelf:
				return &core.UniqueStop{Self: true}
			case core.UniqueHeld:
				return &core.UniqueStop{Kept: batchID}
			case core.UniqueReplace:
				if _, err := tx.ExecContext(ctx, sqlUniqueReplace, sql.Named("id", jobID)); err != nil {
					return err
				}
			}
		}
		if b.Key != "" {
			if err := be.publishKeyed(ctx, tx, b, body, delayUs); err != nil {
				return err
			}
		} else if _, err := tx.ExecContext(ctx, sqlPublish, publishArgs(b, body, delayUs)...); err != nil {
			return err
		}
		until := now.Value.(int64)
		if u.Mode == core.UniqueWindow {
			until += micros(u.Window)
		}
		_, err = tx.ExecContext(ctx, sqlUniqueMove, sql.Named("queue", b.Queue), sql.Named("ukey", u.Key), sql.Named("batch", b.ID),
			sql.Named("sum", sum[:]), sql.Named("until", until))
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
			n, err = be.exec(ctx, sqlPruneUnique, nowArg(), sql.Named("limit", be.o.ReapBatch))
			return err
		})
		return n, err
	})
}

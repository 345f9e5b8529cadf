package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlinspect"
)

var (
	_ core.BatchInspector = (*Backend)(nil)
	_ core.BatchEditor    = (*Backend)(nil)
)

// inspectPage is how many rows one page of InspectBatches reads.
const inspectPage = 200

// sqlInspectQueues lists the queues with stored rows: a loose index scan of the claim index
// (a recursive query that probes the index once per queue for the next queue name), never a
// read of the whole table.
const sqlInspectQueues = `
WITH RECURSIVE qs(queue) AS (
	SELECT (SELECT MIN(queue) FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx)
	UNION ALL
	SELECT (SELECT MIN(queue) FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx WHERE queue > qs.queue)
	FROM qs WHERE qs.queue IS NOT NULL
)
SELECT queue FROM qs WHERE queue IS NOT NULL`

// sqlInspectPage reads one page of a queue's rows in (run_at, id) order after a keyset
// position.
const sqlInspectPage = `
SELECT id, batch_id, body, deliveries, run_at, due_at, lease_token IS NOT NULL
FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :queue AND (run_at, id) > (:at, :id)
ORDER BY run_at, id LIMIT :limit`

// sqlInspectFind finds the row of batch :batch of queue :queue: its id, ordering key,
// whether it is held behind its key, and whether it is claimed under a live lease.
const sqlInspectFind = `
SELECT id, order_key, run_at = 9223372036854775807, lease_token IS NOT NULL AND run_at > :now
FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :queue AND batch_id = :batch`

// sqlReplaceBody replaces the body of row :id.
const sqlReplaceBody = `UPDATE txmq_jobs SET body = :body WHERE id = :id`

// sqlRemoveRow deletes row :id.
const sqlRemoveRow = `DELETE FROM txmq_jobs WHERE id = :id`

// InspectBatches implements core.BatchInspector, for looking messages up without a ledger: it
// calls fn for each stored batch of the named queues (every queue with rows when queues is
// nil), in due order, reading pages of 200 rows through the claim index. It reads a moving
// queue: a batch settled or claimed meanwhile may be missed or reported in its old state. It
// is an operator's tool, not for the hot path.
func (be *Backend) InspectBatches(ctx context.Context, queues []string, fn func(core.StoredBatch) bool) error {
	if err := be.usable("inspect batches"); err != nil {
		return err
	}
	if queues == nil {
		err := be.run(ctx, "inspect batches: list queues", func(ctx context.Context) error {
			queues = queues[:0]
			var q string
			rows, err := be.db.QueryContext(ctx, sqlInspectQueues)
			return eachRow(rows, err, []any{&q}, func() error { queues = append(queues, q); return nil })
		})
		if err != nil {
			return err
		}
	}
	for _, q := range queues {
		more, err := be.inspectQueue(ctx, q, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// inspectQueue calls fn for each row of queue q, page by page; false means fn asked to stop.
func (be *Backend) inspectQueue(ctx context.Context, q string, fn func(core.StoredBatch) bool) (bool, error) {
	return sqlinspect.Walk(q, inspectPage, func(afterAt, afterID int64) ([]sqlinspect.Row, error) {
		var page []sqlinspect.Row
		err := be.run(ctx, fmt.Sprintf("inspect batches of queue %q", q), func(ctx context.Context) error {
			page = page[:0]
			var r sqlinspect.Row
			now := time.Now().UnixMicro()
			rows, err := be.db.QueryContext(ctx, sqlInspectPage, sql.Named("queue", q), sql.Named("at", afterAt), sql.Named("id", afterID), sql.Named("limit", inspectPage))
			return eachRow(rows, err, []any{&r.ID, &r.Batch.ID, &r.Batch.Body, &r.Batch.Deliveries, &r.RunAt, &r.DueAt, &r.Leased}, func() error {
				r.Now = now
				page = append(page, r)
				return nil
			})
		})
		return page, err
	}, fn)
}

// errRunning ends ReplaceBatch's transaction when the batch is claimed under a live lease.
var errRunning = errors.New("sqlite: batch running")

// ReplaceBatch implements core.BatchEditor: it replaces the body of the unclaimed batch id of
// queue (its deliveries and due time unchanged), or deletes the batch when body is nil; a
// deleted head of an ordering key lets the key's next batch become due, as an ack does. A
// batch claimed under a live lease is not changed (core.ErrNotCancellable), nor one that is
// gone (core.ErrMessageNotFound). It runs in one BEGIN IMMEDIATE transaction.
func (be *Backend) ReplaceBatch(ctx context.Context, queue, id string, body []byte) error {
	op := fmt.Sprintf("replace batch %s of queue %q", id, queue)
	if body == nil {
		op = fmt.Sprintf("remove batch %s of queue %q", id, queue)
	}
	if err := be.usable(op); err != nil {
		return err
	}
	promoted := false
	err := be.run(ctx, op, func(ctx context.Context) error {
		promoted = false
		return be.inTx(ctx, func(tx execer) error {
			var (
				rowID         int64
				key           sql.NullString
				held, running bool
			)
			now := time.Now().UnixMicro()
			err := tx.QueryRowContext(ctx, sqlInspectFind, sql.Named("queue", queue), sql.Named("batch", id), sql.Named("now", now)).Scan(&rowID, &key, &held, &running)
			if err != nil {
				return err
			}
			if running {
				return errRunning
			}
			if body != nil {
				_, err := tx.ExecContext(ctx, sqlReplaceBody, sql.Named("body", body), sql.Named("id", rowID))
				return err
			}
			if _, err := tx.ExecContext(ctx, sqlRemoveRow, sql.Named("id", rowID)); err != nil {
				return err
			}
			if key.Valid && !held {
				promoted, err = promoteNext(ctx, tx, queue, key.String, rowID, now)
				return err
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: sqlite: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case errors.Is(err, errRunning):
		return fmt.Errorf("%w: sqlite: batch %s of queue %q is running; a running batch is not interrupted", core.ErrNotCancellable, id, queue)
	case err != nil:
		return err
	}
	if promoted {
		be.wake.Signal(queue)
	}
	return nil
}

package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
// (one probe per queue), never a read of the whole table.
const sqlInspectQueues = `SELECT DISTINCT queue FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)`

// sqlInspectPage reads one page of a queue's rows in (run_at, id) order after a keyset
// position, with the database's now to tell their states apart. $1 queue, $2 and $3 run_at
// and $4 id of the last row read (the smallest BIGINT and 0 at first), $5 limit.
const sqlInspectPage = `
SELECT id, batch_id, body, deliveries, run_at, due_at, lease_token IS NOT NULL, {{now}}
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND (run_at > ? OR run_at = ? AND id > ?)
ORDER BY run_at, id LIMIT ?`

// sqlInspectFind finds the row of batch $2 of queue $1: its id, ordering key, whether it is
// held behind its key, and whether it is claimed under a live lease. ReplaceBatch reads it
// once to learn the key, and again with FOR UPDATE after the key's lock.
const sqlInspectFind = `
SELECT id, order_key, run_at = 9223372036854775807, lease_token IS NOT NULL AND run_at > {{now}}
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND batch_id = ?`

// sqlReplaceBody replaces the body of row $2. $1 body.
const sqlReplaceBody = `UPDATE {{s}}txmq_jobs FORCE INDEX (PRIMARY) SET body = ? WHERE id = ?`

// sqlRemoveRow deletes row $1.
const sqlRemoveRow = `DELETE j FROM {{s}}txmq_jobs j FORCE INDEX (PRIMARY) WHERE j.id = ?`

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
			rows, err := be.db.QueryContext(ctx, be.sql.inspectQueues)
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
			rows, err := be.db.QueryContext(ctx, be.sql.inspectPage, q, afterAt, afterAt, afterID, inspectPage)
			return eachRow(rows, err, []any{&r.ID, &r.Batch.ID, &r.Batch.Body, &r.Batch.Deliveries, &r.RunAt, &r.DueAt, &r.Leased, &r.Now}, func() error {
				page = append(page, r)
				return nil
			})
		})
		return page, err
	}, fn)
}

// errRunning ends ReplaceBatch's transaction when the batch is claimed under a live lease.
var errRunning = errors.New("mysql: batch running")

// ReplaceBatch implements core.BatchEditor: it replaces the body of the unclaimed batch id of
// queue (its deliveries and due time unchanged), or deletes the batch when body is nil; a
// deleted head of an ordering key lets the key's next batch become due, as an ack does. A
// batch claimed under a live lease is not changed (core.ErrNotCancellable), nor one that is
// gone (core.ErrMessageNotFound).
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
		return inTx(ctx, be.db, readCommitted, func(tx *sql.Tx) error {
			var (
				rowID         int64
				key           sql.NullString
				held, running bool
			)
			find := func(lock string) error {
				return tx.QueryRowContext(ctx, be.sql.inspectFind+lock, queue, id).Scan(&rowID, &key, &held, &running)
			}
			if err := find(""); err != nil {
				return err
			}
			if key.Valid && body == nil { // behind the key's lock, as publish and ack of a keyed row
				if err := be.lockKeys(ctx, tx, []queueKey{{queue, key.String}}); err != nil {
					return err
				}
			}
			if err := find(" FOR UPDATE"); err != nil {
				return err
			}
			if running {
				return errRunning
			}
			if body != nil {
				_, err := tx.ExecContext(ctx, be.sql.replaceBody, body, rowID)
				return err
			}
			if _, err := tx.ExecContext(ctx, be.sql.removeRow, rowID); err != nil {
				return err
			}
			if key.Valid && !held {
				var err error
				promoted, err = be.promoteNext(ctx, tx, queue, key.String, rowID)
				return err
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: mysql: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case errors.Is(err, errRunning):
		return fmt.Errorf("%w: mysql: batch %s of queue %q is running; a running batch is not interrupted", core.ErrNotCancellable, id, queue)
	case err != nil:
		return err
	}
	if promoted {
		be.wake.Signal(queue)
	}
	return nil
}

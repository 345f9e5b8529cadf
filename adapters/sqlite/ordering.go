package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/txmq/txmq/core"
)

var (
	_ core.KeyOrderer = (*Backend)(nil)
	_ core.KeyHolder  = (*Backend)(nil)
)

// sqlKeyHead finds the first row of a queue's key, if any: whether a new batch of the key
// must be held behind it.
const sqlKeyHead = `
SELECT id FROM txmq_jobs INDEXED BY txmq_jobs_order_key_idx
WHERE queue = :queue AND order_key = :key ORDER BY id LIMIT 1`

// sqlPublishKeyed stores one batch of an ordered queue: the first row of its key is scheduled
// as any row; a row behind others of its key is held (run_at the largest INTEGER, counted as
// delayed) with its own due time in due_at.
const sqlPublishKeyed = `
INSERT INTO txmq_jobs (queue, batch_id, body, run_at, messages, created_at, order_key, due_at, priority, lead_us, fair_key)
VALUES (:queue, :batch, :body, CASE WHEN :held THEN 9223372036854775807 ELSE :now + :delay END,
	:messages, :now, :key, CASE WHEN :delay > 0 THEN :now + :delay END, :prio, :lead, :fair)`

// sqlNextOfKey finds the row after :id of a queue's key: the one an ack of :id makes due.
const sqlNextOfKey = `
SELECT id, run_at FROM txmq_jobs INDEXED BY txmq_jobs_order_key_idx
WHERE queue = :queue AND order_key = :key AND id > :id ORDER BY id LIMIT 1`

// sqlMakeDue makes a held row due at its own due time, or now.
const sqlMakeDue = `UPDATE txmq_jobs SET run_at = COALESCE(due_at, :now) WHERE id = :id AND run_at = 9223372036854775807`

// sqlHoldsKey reports whether the table holds any row of one queue and ordering key.
const sqlHoldsKey = `
SELECT EXISTS (SELECT 1 FROM txmq_jobs INDEXED BY txmq_jobs_order_key_idx
WHERE queue = :queue AND order_key = :key)`

// OrdersKeys reports that the Backend enforces per-key order (core.KeyOrderer): always nil.
// See the package doc's "Ordering".
func (be *Backend) OrdersKeys() error { return nil }

// HoldsKey implements core.KeyHolder: whether the jobs table holds any row of queue with
// ordering key key (ready, delayed, held behind the key's first row or in flight), one index
// access. A drain wrapper asks it of its old backend (package drain).
func (be *Backend) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	if err := be.usable("holds key"); err != nil {
		return false, err
	}
	var holds bool
	err := be.run(ctx, fmt.Sprintf("does queue %q hold batches of ordering key %q", queue, key), func(ctx context.Context) error {
		return be.db.QueryRowContext(ctx, sqlHoldsKey, sql.Named("queue", queue), sql.Named("key", key)).Scan(&holds)
	})
	return holds, err
}

// publishKeyed stores a batch of an ordered queue in tx (a BEGIN IMMEDIATE transaction: the
// write lock serialises it with every other publish, ack and cancel of the key): held when the
// key has rows already.
func (be *Backend) publishKeyed(ctx context.Context, tx execer, b core.OutgoingBatch, body []byte, delayUs int64) error {
	var head int64
	err := tx.QueryRowContext(ctx, sqlKeyHead, sql.Named("queue", b.Queue), sql.Named("key", b.Key)).Scan(&head)
	held := err == nil
	if err != nil && err != sql.ErrNoRows {
		return err
	}
	args := append(publishArgs(b, body, delayUs), sql.Named("held", held), sql.Named("key", b.Key))
	_, err = tx.ExecContext(ctx, sqlPublishKeyed, args...)
	return err
}

// promoteNext makes the row after id of a queue's key due when it was held (after id was
// deleted, in the same transaction); true when it did.
func promoteNext(ctx context.Context, tx execer, queue, key string, id, now int64) (bool, error) {
	var next, runAt int64
	err := tx.QueryRowContext(ctx, sqlNextOfKey, sql.Named("queue", queue), sql.Named("key", key), sql.Named("id", id)).Scan(&next, &runAt)
	if err == sql.ErrNoRows || err == nil && runAt != heldAt {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = tx.ExecContext(ctx, sqlMakeDue, sql.Named("id", next), sql.Named("now", now))
	return err == nil, err
}

package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/txmq/txmq/core"
)

var (
	_ core.KeyOrderer = (*Backend)(nil)
	_ core.KeyHolder  = (*Backend)(nil)
)

// sqlLockKeys locks ordering keys for the rest of the transaction: MySQL has no
// transaction-scoped advisory lock, so each (queue, key) has a row in txmq_job_keys that the
// publish, ack, drop and cancel of its batches lock (an insert, or the duplicate's update).
const sqlLockKeys = `INSERT INTO {{s}}txmq_job_keys (queue, order_key) VALUES {{in}} ON DUPLICATE KEY UPDATE order_key = order_key`

// sqlKeyHead locks the first row of a queue's key, if any: whether a new batch of the key
// must be held behind it. $1 queue, $2 key.
const sqlKeyHead = `
SELECT id FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_order_key_idx)
WHERE queue = ? AND order_key = ? ORDER BY id LIMIT 1 FOR UPDATE`

// sqlPublishKeyed stores one batch of an ordered queue, after the key's lock: the first row
// of its key is scheduled as any row; a row behind others of its key is held (run_at the
// largest BIGINT, counted as delayed) with its own due time in due_at.
// $1 queue, $2 batch id, $3 body, $4 held, $5 delay µs, $6 messages, $7 key, $8 and $9 delay µs,
// $10 priority, $11 lead µs, $12 fairness key.
const sqlPublishKeyed = `
INSERT INTO {{s}}txmq_jobs (queue, batch_id, body, run_at, messages, created_at, order_key, due_at, priority, lead_us, fair_key)
VALUES (?, ?, ?, IF(?, 9223372036854775807, {{now}} + ?), ?, {{now}}, ?, IF(? > 0, {{now}} + ?, NULL), ?, ?, ?)`

// sqlNextOfKey locks the row after $3 of queue $1's key $2: the one an ack of $3 makes due.
const sqlNextOfKey = `
SELECT id, run_at FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_order_key_idx)
WHERE queue = ? AND order_key = ? AND id > ? ORDER BY id LIMIT 1 FOR UPDATE`

// sqlMakeDue makes a held row due at its own due time, or now. $1 id.
const sqlMakeDue = `UPDATE {{s}}txmq_jobs FORCE INDEX (PRIMARY) SET run_at = COALESCE(due_at, {{now}}) WHERE id = ? AND run_at = 9223372036854775807`

// sqlHoldsKey reports whether the table holds any row of one queue and ordering key.
const sqlHoldsKey = `
SELECT COUNT(*) FROM (SELECT id FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_order_key_idx)
WHERE queue = ? AND order_key = ? LIMIT 1) k`

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
	var n int
	err := be.run(ctx, fmt.Sprintf("does queue %q hold batches of ordering key %q", queue, key), func(ctx context.Context) error {
		return be.db.QueryRowContext(ctx, be.sql.holdsKey, queue, key).Scan(&n)
	})
	return n > 0, err
}

// queueKey is one ordering key of one queue.
type queueKey struct{ queue, key string }

// keysOf returns the distinct keys of a group's ordered claims.
func keysOf(reqs []*groupReq) []queueKey {
	var out []queueKey
	for _, q := range reqs {
		if q.h.key != "" {
			out = append(out, queueKey{q.h.queue, q.h.key})
		}
	}
	return out
}

// lockKeys takes the keys' locks (sqlLockKeys) in one statement, in a fixed order so that two
// transactions never wait for each other's keys.
func (be *Backend) lockKeys(ctx context.Context, tx *sql.Tx, keys []queueKey) error {
	if len(keys) == 0 {
		return nil
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].queue != keys[j].queue {
			return keys[i].queue < keys[j].queue
		}
		return keys[i].key < keys[j].key
	})
	var args []any
	for i, k := range keys {
		if i > 0 && k == keys[i-1] {
			continue
		}
		args = append(args, k.queue, k.key)
	}
	values := strings.TrimSuffix(strings.Repeat("(?, ?),", len(args)/2), ",")
	_, err := tx.ExecContext(ctx, strings.Replace(be.sql.lockKeys, "{{in}}", values, 1), args...)
	return err
}

// publishKeyed stores a batch of an ordered queue in tx, behind its key's lock: held when the
// key has rows already.
func (be *Backend) publishKeyed(ctx context.Context, tx *sql.Tx, b core.OutgoingBatch, body []byte, delayUs int64) error {
	if err := be.lockKeys(ctx, tx, []queueKey{{b.Queue, b.Key}}); err != nil {
		return err
	}
	var head int64
	err := tx.QueryRowContext(ctx, be.sql.keyHead, b.Queue, b.Key).Scan(&head)
	held := err == nil
	if err != nil && err != sql.ErrNoRows {
		return err
	}
	_, err = tx.ExecContext(ctx, be.sql.publishKeyed, b.Queue, b.ID, body, held, delayUs, b.Messages, b.Key, delayUs, delayUs, prio(b), micros(b.Lead), b.FairKey)
	return err
}

// promoteNext makes the row after id of a queue's key due when it was held (after id was
// deleted, under the key's lock); true when it did.
func (be *Backend) promoteNext(ctx context.Context, tx *sql.Tx, queue, key string, id int64) (bool, error) {
	var next, runAt int64
	err := tx.QueryRowContext(ctx, be.sql.nextOfKey, queue, key, id).Scan(&next, &runAt)
	if err == sql.ErrNoRows || err == nil && runAt != heldAt {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = tx.ExecContext(ctx, be.sql.makeDue, next)
	return err == nil, err
}

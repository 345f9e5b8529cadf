package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/txmq/txmq/core"
)

var (
	_ core.BatchInspector = (*Backend)(nil)
	_ core.BatchEditor    = (*Backend)(nil)
)

// inspectPage is how many rows one page of InspectBatches reads.
const inspectPage = 200

// sqlInspectQueues lists the queues with stored rows: a loose index scan of (queue, run_at),
// one index probe per queue, never a read of the whole table.
const sqlInspectQueues = `
WITH RECURSIVE q(name) AS (
	(SELECT j.queue FROM {{s}}.txmq_jobs j ORDER BY j.queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM {{s}}.txmq_jobs j WHERE j.queue > q.name ORDER BY j.queue LIMIT 1)
	FROM q WHERE q.name IS NOT NULL
)
SELECT name FROM q WHERE name IS NOT NULL`

// sqlInspectPage reads one page of a queue's rows in (run_at, id) order after a keyset
// position, with the database's now() to tell their states apart (see the migration's state
// table). $1 queue, $2 run_at and $3 id of the last row read ('-infinity', 0 at first), $4 limit.
const sqlInspectPage = `
SELECT j.id, j.batch_id, j.body, j.deliveries, j.run_at, j.due_at, j.lease_token IS NOT NULL, now()
FROM {{s}}.txmq_jobs j
WHERE j.queue = $1 AND (j.run_at, j.id) > ($2::timestamptz, $3::bigint)
ORDER BY j.run_at, j.id LIMIT $4`

// sqlInspectFind finds the row of batch $2 of queue $1: its id, ordering key and whether it
// is claimed under a live lease.
const sqlInspectFind = `
SELECT j.id, j.order_key, j.lease_token IS NOT NULL AND j.run_at > now()
FROM {{s}}.txmq_jobs j WHERE j.queue = $1 AND j.batch_id = $2`

// sqlReplaceBody replaces the body of row $1 unless it is claimed under a live lease (a claim
// that committed meanwhile is seen: the row is re-checked after its lock). $2 body.
const sqlReplaceBody = `
UPDATE {{s}}.txmq_jobs j SET body = $2
WHERE j.id = $1 AND NOT (j.lease_token IS NOT NULL AND j.run_at > now())
RETURNING j.id`

// sqlRemoveUnclaimed deletes row $1 unless it is claimed under a live lease and, when it was
// the head of an ordering key (not held), makes the key's next row due, as an ack would, and
// wakes waiting nodes. $2 channel. A row comes back when the row was deleted.
const sqlRemoveUnclaimed = `
WITH d AS (
	DELETE FROM {{s}}.txmq_jobs j
	WHERE j.id = $1 AND NOT (j.lease_token IS NOT NULL AND j.run_at > now())
	RETURNING j.id, j.queue, j.order_key, j.run_at = 'infinity' AS held
),
nx AS (
	SELECT n.id FROM d CROSS JOIN LATERAL (
		SELECT j.id FROM {{s}}.txmq_jobs j
		WHERE j.queue = d.queue AND j.order_key = d.order_key AND j.id > d.id
		ORDER BY j.id LIMIT 1
	) n
	WHERE d.order_key IS NOT NULL AND NOT d.held
),
p AS (
	UPDATE {{s}}.txmq_jobs j SET run_at = COALESCE(j.due_at, now())
	WHERE j.id = ANY(ARRAY(SELECT id FROM nx)) AND j.run_at = 'infinity'
	RETURNING 1
)
SELECT d.id, (SELECT count(*) FROM p), pg_notify($2, d.queue) FROM d`

// InspectBatches implements core.BatchInspector, for looking messages up without a ledger: it
// calls fn for each stored batch of the named queues (every queue with rows when queues is
// nil), in due order, reading pages of 200 rows through the (queue, run_at) index. It reads a
// moving queue: a batch settled or claimed meanwhile may be missed or reported in its old
// state. It is an operator's tool, not for the hot path: a lookup by message id reads the
// queue's rows until it finds the message.
func (be *Backend) InspectBatches(ctx context.Context, queues []string, fn func(core.StoredBatch) bool) error {
	if err := be.usable("inspect batches"); err != nil {
		return err
	}
	if queues == nil {
		err := be.run(ctx, "inspect batches: list queues", func(ctx context.Context) error {
			rows, err := query(ctx, be.on(be.pool), be.sql.inspectQueues)
			if err != nil {
				return err
			}
			queues, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
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
	afterAt := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	afterID := int64(0)
	for {
		var page []core.StoredBatch
		op := fmt.Sprintf("inspect batches of queue %q", q)
		err := be.run(ctx, op, func(ctx context.Context) error {
			page = page[:0]
			rows, err := query(ctx, be.on(be.pool), be.sql.inspectPage, q, afterAt, afterID, inspectPage)
			if err != nil {
				return err
			}
			var (
				id     int64
				b      core.StoredBatch
				runAt  pgtype.Timestamptz // 'infinity' for a row held behind its key
				now    time.Time
				dueAt  *time.Time
				leased bool
				scan   = []any{&id, &b.ID, &b.Body, &b.Deliveries, &runAt, &dueAt, &leased, &now}
			)
			_, err = pgx.ForEachRow(rows, scan, func() error {
				s := core.StoredBatch{Queue: q, ID: b.ID, Body: append([]byte(nil), b.Body...), Deliveries: b.Deliveries, State: core.BatchReady}
				held := runAt.InfinityModifier == pgtype.Infinity
				switch {
				case leased && !held && runAt.Time.After(now):
					s.State = core.BatchInFlight
				case held || runAt.Time.After(now):
					s.State = core.BatchDelayed
					if dueAt != nil {
						s.Due = *dueAt
					} else if !held {
						s.Due = runAt.Time
					}
				}
				page = append(page, s)
				afterAt, afterID = runAt, id
				return nil
			})
			return err
		})
		if err != nil {
			return false, err
		}
		for _, s := range page {
			if !fn(s) {
				return false, nil
			}
		}
		if len(page) < inspectPage {
			return true, nil
		}
	}
}

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
	var (
		rowID   int64
		key     *string
		running bool
		changed bool
	)
	err := be.run(ctx, op, func(ctx context.Context) error {
		changed = false
		if err := queryRow(ctx, be.on(be.pool), be.sql.inspectFind, []any{queue, id}, &rowID, &key, &running); err != nil {
			return err
		}
		if running {
			return nil
		}
		if body != nil {
			rows, err := query(ctx, be.on(be.pool), be.sql.replaceBody, rowID, body)
			if err != nil {
				return err
			}
			changed = rows.Next()
			rows.Close()
			return rows.Err()
		}
		var rows pgx.Rows
		var err error
		if key != nil { // behind the key's lock, as publish and ack of a keyed row
			rows, err = queryKeyed(ctx, be.on(be.pool), queue, *key, be.sql.removeUnclaimed, rowID, be.channel)
		} else {
			rows, err = query(ctx, be.on(be.pool), be.sql.removeUnclaimed, rowID, be.channel)
		}
		if err != nil {
			return err
		}
		changed = rows.Next()
		rows.Close()
		return rows.Err()
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: sqljobs: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case err != nil:
		return err
	case running || !changed:
		return fmt.Errorf("%w: sqljobs: batch %s of queue %q is running; a running batch is not interrupted", core.ErrNotCancellable, id, queue)
	}
	return nil
}

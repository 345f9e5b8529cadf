package sqljobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/pgplan"
)

var _ core.KeyOrderer = (*Backend)(nil)

// OrdersKeys reports that the Backend enforces per-key order (core.KeyOrderer): always nil.
// See the package doc's "Ordering".
func (be *Backend) OrdersKeys() error { return nil }

var _ core.KeyHolder = (*Backend)(nil)

// HoldsKey implements core.KeyHolder: whether the jobs table holds any row of queue with
// ordering key key (ready, delayed, held behind the key's first row or in flight), one index
// access. A drain wrapper asks it of its old backend (package drain).
func (be *Backend) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	if err := be.usable("holds key"); err != nil {
		return false, err
	}
	var held bool
	err := be.run(ctx, "holds key", func(ctx context.Context) error {
		rows, err := query(ctx, be.on(be.pool), be.sql.holdsKey, queue, key)
		if err != nil {
			return err
		}
		held, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqljobs: does queue %q hold batches of ordering key %q: %w", queue, key, err)
	}
	return held, nil
}

// queryKeyed runs sql behind the plan guard (unless q's sessions carry it) and the key's lock (sqlLockKey), in one implicit
// transaction and one round trip, and returns its rows; closing them ends the pipeline.
func queryKeyed(ctx context.Context, q querier, queue, key, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	n := queueGuard(b, q) + 1
	b.Queue(sqlLockKey, queue, key)
	b.Queue(sql, args...)
	br := q.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			return nil, errors.Join(err, br.Close())
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return pgplan.Rows(rows, br), nil
}

// publishKeyed stores a batch of an ordered queue (see sqlPublishKeyed).
func (be *Backend) publishKeyed(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	rows, err := queryKeyed(ctx, be.on(be.pool), b.Queue, b.Key, be.sql.publishKeyed, b.Queue, b.ID, body, delayUs, b.Messages, be.channel, b.Key, prio(b), micros(b.Lead), b.FairKey)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// deleteKeyed acks or drops h's row of an ordered queue in a group of such settles and makes
// the next row of its key due (see sqlAckKeyed); true means the lease held and the row is gone.
func (be *Backend) deleteKeyed(ctx context.Context, h *handle) (bool, error) {
	req := &groupReq{h: h}
	if err := be.keyedDeletes.Do(ctx, req); err != nil {
		return false, err
	}
	return req.ok, nil
}

// execKeyedDeletes runs the keyed Ack/Drop statement for a group of claims behind the locks of
// their keys, in one round trip. A claim whose row it deleted is marked settled only once the
// statement succeeded as a whole.
func (be *Backend) execKeyedDeletes(ctx context.Context, reqs []*groupReq) error {
	ids, tokens := make([]int64, len(reqs)), make([]int64, len(reqs))
	queues, keys := make([]string, len(reqs)), make([]string, len(reqs))
	for i, q := range reqs {
		ids[i], tokens[i], queues[i], keys[i] = q.h.id, q.h.token, q.h.queue, q.h.key
	}
	b := &pgx.Batch{}
	n := queueGuard(b, be.on(be.pool)) + 1
	b.Queue(sqlLockKeys, queues, keys)
	b.Queue(be.sql.ackKeyed, ids, tokens, be.channel)
	br := be.pool.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			return errors.Join(err, br.Close())
		}
	}
	rows, err := br.Query()
	if err != nil {
		return errors.Join(err, br.Close())
	}
	held := make(map[[2]int64]bool, len(reqs))
	var id, token, notified int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &token, &notified}, func() error {
		held[[2]int64{id, token}] = true
		return nil
	}); err != nil {
		return errors.Join(err, br.Close())
	}
	if err := br.Close(); err != nil {
		return err
	}
	for _, q := range reqs {
		if held[[2]int64{q.h.id, q.h.token}] {
			q.ok = true
			q.h.MarkSettled()
		}
	}
	return nil
}

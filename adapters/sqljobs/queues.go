package sqljobs

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// sqlHeartbeatQueues lists the queues some node fetched (the reaper's heartbeat table: one
// row per queue, read by its primary key order).
const sqlHeartbeatQueues = `SELECT queue FROM {{s}}.txmq_jobs_queues`

// Queues lists the queues the jobs tables know (core.QueueLister): those with stored batches,
// found by a loose index scan of the (queue, run_at) index (one probe per queue, never a read
// of the whole table), and those a node fetched (the heartbeat table), sorted.
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := be.usable("queues"); err != nil {
		return nil, err
	}
	var out []string
	err := be.run(ctx, "queues", func(ctx context.Context) error {
		rows, err := query(ctx, be.on(be.pool), be.sql.inspectQueues)
		if err != nil {
			return err
		}
		stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		rows, err = be.pool.Query(ctx, be.sql.heartbeatQueues)
		if err != nil {
			return err
		}
		fetched, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		out = append(stored, fetched...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

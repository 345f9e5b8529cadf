package sqlite

import (
	"context"
	"slices"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// sqlListQueues lists the queues the jobs tables know: those with stored rows (sqlInspectQueues,
// a loose index scan of the claim index that TestStatementPlans checks) and those some node
// fetched (the heartbeat table, read whole: it holds one row per queue, so reading it is the
// listing itself). UNION ALL: Queues sorts and compacts the names, so SQLite builds no
// temporary B-tree.
const sqlListQueues = sqlInspectQueues + `
UNION ALL SELECT queue FROM txmq_jobs_queues`

// Queues lists the queues the jobs tables know (core.QueueLister), sorted: every queue with
// stored batches and every queue a node fetched. It is an operator's tool (txmq status, txmq
// ui, the command line's unknown-queue check), never called on the hot path.
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := be.usable("queues"); err != nil {
		return nil, err
	}
	var out []string
	err := be.run(ctx, "list queues", func(ctx context.Context) error {
		out = out[:0]
		var q string
		rows, err := be.db.QueryContext(ctx, sqlListQueues)
		return eachRow(rows, err, []any{&q}, func() error { out = append(out, q); return nil })
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

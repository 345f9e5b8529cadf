package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/txmqtest/backendtest"
)

// TestGroupedPublishesEachStored publishes many plain batches at once (they share INSERTs),
// to two queues, with priorities, fairness keys and a delay: each call returns nil, every
// batch is stored with its own columns, and the delayed one is not due.
func TestGroupedPublishesEachStored(t *testing.T) {
	t.Parallel()
	be := newWorld(t).backend(&Options{SettleWindow: 50 * time.Millisecond})
	backendtest.GroupedPublishes(t, be, nil, func() ([]backendtest.GroupedRow, error) {
		return backendtest.SQLGroupedRows(be.DB().QueryContext(context.Background(), `SELECT batch_id, queue, body, messages, priority, lead_us, fair_key FROM txmq_jobs`))
	})
}

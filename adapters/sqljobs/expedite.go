package sqljobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

var _ core.BatchExpediter = (*Backend)(nil)

// sqlExpedite makes row $1 due now with body $2 when it waits unclaimed (lease_token NULL,
// run_at in the future): a delayed or retrying row gets run_at now; a row held behind its
// ordering key (run_at 'infinity') keeps waiting for its key with its own due time (due_at)
// now. It wakes waiting nodes on channel $3. A row comes back when the row was changed.
const sqlExpedite = `
WITH u AS (
	UPDATE {{s}}.txmq_jobs j
	SET body = $2,
		run_at = CASE WHEN j.run_at = 'infinity' THEN j.run_at ELSE now() END,
		due_at = CASE WHEN j.run_at = 'infinity' THEN now() ELSE j.due_at END
	WHERE j.id = $1 AND j.lease_token IS NULL AND j.run_at > now()
	RETURNING j.queue
)
SELECT pg_notify($3, u.queue) FROM u`

// ExpediteBatch implements core.BatchExpediter: the unclaimed row of batch id of queue,
// delayed or waiting to retry, takes body and becomes due now (a row held behind its ordering
// key gets its own due time set to now and still waits for its key). A ready row is left as
// it is; one claimed under a live lease is not changed (core.ErrNotCancellable), nor one that
// is gone (core.ErrMessageNotFound).
func (be *Backend) ExpediteBatch(ctx context.Context, queue, id string, body []byte) error {
	op := fmt.Sprintf("expedite batch %s of queue %q", id, queue)
	if err := be.usable(op); err != nil {
		return err
	}
	var (
		rowID   int64
		key     *string
		running bool
	)
	err := be.run(ctx, op, func(ctx context.Context) error {
		if err := queryRow(ctx, be.pool, be.sql.inspectFind, []any{queue, id}, &rowID, &key, &running); err != nil {
			return err
		}
		if running {
			return nil
		}
		rows, err := query(ctx, be.pool, be.sql.expedite, rowID, body, be.channel)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: sqljobs: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case err != nil:
		return err
	case running:
		return fmt.Errorf("%w: sqljobs: batch %s of queue %q is running", core.ErrNotCancellable, id, queue)
	}
	return nil
}

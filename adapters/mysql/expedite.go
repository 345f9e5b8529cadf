package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/txmq/txmq/core"
)

var _ core.BatchExpediter = (*Backend)(nil)

// sqlExpedite makes row $2 due now with body $1 when it waits unclaimed (lease_token NULL,
// run_at in the future): a delayed or retrying row gets run_at now; a row held behind its
// ordering key (run_at heldAt) keeps waiting for its key with its own due time (due_at) now.
// By primary key, as every statement that edits one row.
const sqlExpedite = `UPDATE {{s}}txmq_jobs FORCE INDEX (PRIMARY)
SET body = ?,
	due_at = CASE WHEN run_at = 9223372036854775807 THEN {{now}} ELSE due_at END,
	run_at = CASE WHEN run_at = 9223372036854775807 THEN run_at ELSE {{now}} END
WHERE id = ? AND lease_token IS NULL AND run_at > {{now}}`

// ExpediteBatch implements core.BatchExpediter: the unclaimed row of batch id of queue,
// delayed or waiting to retry, takes body and becomes due now (a row held behind its ordering
// key gets its own due time set to now and still waits for its key). A ready row is left as
// it is; one claimed under a live lease is not changed (core.ErrNotCancellable), nor one that
// is gone (core.ErrMessageNotFound). This process's waiting fetches are woken at once; other
// processes find the row at their next poll (Options.PollInterval).
func (be *Backend) ExpediteBatch(ctx context.Context, queue, id string, body []byte) error {
	op := fmt.Sprintf("expedite batch %s of queue %q", id, queue)
	if err := be.usable(op); err != nil {
		return err
	}
	stmt := render(be.o.Schema, sqlExpedite)
	running := false
	err := be.run(ctx, op, func(ctx context.Context) error {
		var (
			rowID int64
			key   sql.NullString
			held  bool
		)
		if err := be.db.QueryRowContext(ctx, be.sql.inspectFind, queue, id).Scan(&rowID, &key, &held, &running); err != nil {
			return err
		}
		if running {
			return nil
		}
		_, err := be.db.ExecContext(ctx, stmt, body, rowID)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: mysql: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case err != nil:
		return err
	case running:
		return fmt.Errorf("%w: mysql: batch %s of queue %q is running", core.ErrNotCancellable, id, queue)
	}
	be.wake.Signal(queue)
	return nil
}

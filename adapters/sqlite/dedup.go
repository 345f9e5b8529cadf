package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

var _ core.IDDeduper = (*Backend)(nil)

// DedupIDs implements core.IDDeduper: exact, any window, per message id, in the transaction
// that stores the batch (see publishDedup).
func (be *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupSupport{}, nil }

// sqlTakeExpiredIDs takes over the expired rows of a batch's ids for this publish.
const sqlTakeExpiredIDs = `
UPDATE txmq_job_ids SET expires_at = :now + :window, token = :token
WHERE queue = :queue AND id IN ({{in}}) AND expires_at <= :now`

// sqlInsertIDs records the ids that have no row yet; a duplicate (held, or just taken over
// by this publish) is left as it is.
const sqlInsertIDs = `INSERT INTO txmq_job_ids (queue, id, expires_at, token) VALUES {{in}} ON CONFLICT DO NOTHING`

// sqlHeldIDs returns the ids of a batch that another publish holds.
const sqlHeldIDs = `SELECT id FROM txmq_job_ids WHERE queue = :queue AND token <> :token AND id IN ({{in}})`

// sqlPruneIDs deletes up to :limit expired id rows, oldest first, by the expires_at index.
const sqlPruneIDs = `DELETE FROM txmq_job_ids WHERE rowid IN (
SELECT rowid FROM txmq_job_ids INDEXED BY txmq_job_ids_expires_idx
WHERE expires_at <= :now ORDER BY expires_at LIMIT :limit)`

// errHeld rolls back publishDedup's transaction when an id is held.
var errHeld = errors.New("sqlite: message ids held")

// publishDedup stores b and records its ids in one transaction, or, when some id is held,
// rolls back and returns a *core.DuplicateError naming those ids. Each publish marks the rows
// it takes with a random token, so it tells them from other publishes' rows exactly.
func (be *Backend) publishDedup(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	ids := slices.Clone(b.DedupIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	token := newToken()
	window := micros(b.DedupWindow)
	var taken []string
	err := be.inTx(ctx, func(tx execer) error {
		taken = taken[:0]
		now := nowArg()
		common := []any{now, sql.Named("queue", b.Queue), sql.Named("token", token), sql.Named("window", window)}
		idArgs := listArgs("i", ids)
		if _, err := tx.ExecContext(ctx, withList(sqlTakeExpiredIDs, "i", len(ids)), append(slices.Clone(common), idArgs...)...); err != nil {
			return err
		}
		values := make([]string, len(ids))
		for i := range ids {
			values[i] = fmt.Sprintf("(:queue, :i%d, :now + :window, :token)", i)
		}
		if _, err := tx.ExecContext(ctx, strings.Replace(sqlInsertIDs, "{{in}}", strings.Join(values, ", "), 1), append(slices.Clone(common), idArgs...)...); err != nil {
			return err
		}
		var id string
		rows, err := tx.QueryContext(ctx, withList(sqlHeldIDs, "i", len(ids)), append(slices.Clone(common), idArgs...)...)
		if err := eachRow(rows, err, []any{&id}, func() error { taken = append(taken, id); return nil }); err != nil {
			return err
		}
		if len(taken) > 0 {
			return errHeld
		}
		if b.Key != "" {
			return be.publishKeyed(ctx, tx, b, body, delayUs)
		}
		_, err = tx.ExecContext(ctx, sqlPublish, publishArgs(b, body, delayUs)...)
		return err
	})
	if errors.Is(err, errHeld) {
		return &core.DuplicateError{Queue: b.Queue, IDs: taken}
	}
	return err
}

// pruneIDs deletes expired id rows in pages of ReapBatch until none is left (or ctx ends).
func (be *Backend) pruneIDs(ctx context.Context) (int64, error) {
	return reaper.InPages(ctx, be.o.ReapBatch, func(ctx context.Context) (int64, error) {
		var n int64
		err := be.run(ctx, "reaper: deleting expired message ids", func(ctx context.Context) error {
			var err error
			n, err = be.exec(ctx, sqlPruneIDs, nowArg(), sql.Named("limit", be.o.ReapBatch))
			return err
		})
		return n, err
	})
}

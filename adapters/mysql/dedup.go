package mysql

import (
	"context"
	"database/sql"
	"errors"
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
// $1 window µs, $2 token, $3 queue, then the ids.
const sqlTakeExpiredIDs = `
UPDATE {{s}}txmq_job_ids FORCE INDEX (PRIMARY) SET expires_at = {{now}} + ?, token = ?
WHERE queue = ? AND id IN ({{in}}) AND expires_at <= {{now}}`

// sqlInsertIDs records the ids that have no row yet; a duplicate (held, or just taken over
// by this publish) is left as it is. The primary key serialises two publishes of one id: the
// second waits for the first's commit and finds its row.
const sqlInsertIDs = `INSERT INTO {{s}}txmq_job_ids (queue, id, expires_at, token) VALUES {{in}} ON DUPLICATE KEY UPDATE token = token`

// sqlHeldIDs returns the ids of a batch that another publish holds (a locking read: the
// latest committed rows). $1 queue, $2 token, then the ids.
const sqlHeldIDs = `SELECT id FROM {{s}}txmq_job_ids FORCE INDEX (PRIMARY) WHERE queue = ? AND token <> ? AND id IN ({{in}}) FOR UPDATE`

// sqlPruneIDs deletes up to $1 expired id rows, oldest first, by the expires_at index.
const sqlPruneIDs = `DELETE FROM {{s}}txmq_job_ids WHERE expires_at <= {{now}} ORDER BY expires_at LIMIT ?`

// errHeld rolls back publishDedup's transaction when an id is held.
var errHeld = errors.New("mysql: message ids held")

// publishDedup stores b and records its ids in one transaction, or, when some id is held,
// rolls back and returns a *core.DuplicateError naming those ids. Each publish marks the rows
// it takes with a random token, so it tells them from other publishes' rows exactly.
func (be *Backend) publishDedup(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	ids := slices.Clone(b.DedupIDs)
	slices.Sort(ids) // rows are locked in one order by every publish
	idArgs := make([]any, len(ids))
	for i, id := range ids {
		idArgs[i] = id
	}
	token := newToken()
	window := micros(b.DedupWindow)
	var taken []string
	err := inTx(ctx, be.db, isolation(b.Key != ""), func(tx *sql.Tx) error {
		taken = taken[:0]
		args := append([]any{window, token, b.Queue}, idArgs...)
		if _, err := tx.ExecContext(ctx, withMarks(be.sql.takeExpiredIDs, len(ids)), args...); err != nil {
			return err
		}
		values := strings.TrimSuffix(strings.Repeat("(?, ?, "+sqlNow+" + ?, ?),", len(ids)), ",")
		args = make([]any, 0, 4*len(ids))
		for _, id := range ids {
			args = append(args, b.Queue, id, window, token)
		}
		if _, err := tx.ExecContext(ctx, strings.Replace(be.sql.insertIDs, "{{in}}", values, 1), args...); err != nil {
			return err
		}
		var id string
		rows, err := tx.QueryContext(ctx, withMarks(be.sql.heldIDs, len(ids)), append([]any{b.Queue, token}, idArgs...)...)
		if err := eachRow(rows, err, []any{&id}, func() error { taken = append(taken, id); return nil }); err != nil {
			return err
		}
		if len(taken) > 0 {
			return errHeld
		}
		if b.Key != "" {
			return be.publishKeyed(ctx, tx, b, body, delayUs)
		}
		_, err = tx.ExecContext(ctx, be.sql.publish, b.Queue, b.ID, body, delayUs, b.Messages, prio(b), micros(b.Lead), b.FairKey)
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
			n, err = affected(ctx, be.db, be.sql.pruneIDs, be.o.ReapBatch)
			return err
		})
		return n, err
	})
}

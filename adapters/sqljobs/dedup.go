package sqljobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

// DedupIDs implements core.IDDeduper: exact, any window, per message id, in the transaction
// that stores the batch (see sqlHoldIDs).
func (be *Backend) DedupIDs() (core.DedupSupport, error) { return core.DedupSupport{}, nil }

// sqlHoldIDs records a batch's ids for the window, replacing expired rows; it returns the
// ids it recorded, so an id missing from the result is held by an earlier publish (or by a
// concurrent one, which ON CONFLICT waits for). $1 queue, $2 ids, $3 window in µs.
const sqlHoldIDs = `
INSERT INTO {{s}}.txmq_job_ids AS t (queue, id, expires_at)
SELECT $1, i, clock_timestamp() + $3::bigint * interval '1 microsecond' FROM unnest($2::text[]) AS i
ON CONFLICT (queue, id) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE t.expires_at <= now()
RETURNING id`

// sqlPruneIDs deletes up to $1 expired id rows, oldest first, by the expires_at index.
const sqlPruneIDs = `
DELETE FROM {{s}}.txmq_job_ids WHERE (queue, id) IN (
	SELECT queue, id FROM {{s}}.txmq_job_ids WHERE expires_at <= now() ORDER BY expires_at LIMIT $1
)`

// publishDedup stores b and records its ids in one transaction, or, when some id is held,
// rolls back and returns a *core.DuplicateError naming those ids.
func (be *Backend) publishDedup(ctx context.Context, b core.OutgoingBatch, body []byte, delayUs int64) error {
	var taken []string
	err := pgx.BeginFunc(ctx, be.pool, func(tx pgx.Tx) error {
		rows, err := query(ctx, be.on(tx), be.sql.holdIDs, b.Queue, b.DedupIDs, micros(b.DedupWindow))
		if err != nil {
			return err
		}
		got := make(map[string]bool, len(b.DedupIDs))
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { got[id] = true; return nil }); err != nil {
			return err
		}
		if len(got) < len(b.DedupIDs) {
			for _, id := range b.DedupIDs {
				if !got[id] {
					taken = append(taken, id)
				}
			}
			return errHeld
		}
		if b.Key != "" {
			rows, err := queryKeyed(ctx, be.on(tx), b.Queue, b.Key, be.sql.publishKeyed, b.Queue, b.ID, body, delayUs, b.Messages, be.channel, b.Key, prio(b), micros(b.Lead), b.FairKey)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}
		_, err = tx.Exec(ctx, be.sql.publish, b.Queue, b.ID, body, delayUs, b.Messages, be.channel, prio(b), micros(b.Lead), b.FairKey)
		return err
	})
	if err == errHeld {
		return &core.DuplicateError{Queue: b.Queue, IDs: taken}
	}
	return err
}

// errHeld rolls back publishDedup's transaction when an id is held.
var errHeld = fmt.Errorf("sqljobs: message ids held")

// pruneIDs deletes expired id rows in pages of ReapBatch until none is left (or ctx ends).
func (be *Backend) pruneIDs(ctx context.Context) (int64, error) {
	return reaper.InPages(ctx, be.o.ReapBatch, func(ctx context.Context) (int64, error) {
		var n int64
		err := be.run(ctx, "reaper: deleting expired message ids", func(ctx context.Context) error {
			rows, err := query(ctx, be.on(be.pool), be.sql.pruneIDs, be.o.ReapBatch)
			if err != nil {
				return err
			}
			rows.Close()
			n = rows.CommandTag().RowsAffected()
			return rows.Err()
		})
		return n, err
	})
}

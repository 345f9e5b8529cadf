package ledger

import (
	"context"
	"fmt"
	"time"
)

// pruneLoop runs Prune at start and every PruneInterval until Close.
func (l *Ledger) pruneLoop() {
	defer l.loops.Done()
	t := time.NewTicker(l.opts.PruneInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := l.Prune(ctx); err != nil {
			l.log.Warn("txmq ledger: pruning completed rows failed; trying again at the next period", "schema", l.opts.Schema, "error", err)
		}
		cancel()
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

// Prune deletes the messages completed or cancelled more than Retention ago and the rows of
// the batches completed that long ago (with their messages), and the rows of older batches
// that hold no message any more (their messages were replayed in another batch), about
// PruneBatch rows per statement until each deletes fewer, and returns how many messages it
// pruned. The pruner calls it every PruneInterval.
func (l *Ledger) Prune(ctx context.Context) (int64, error) {
	cutoff := time.Now().Add(-l.opts.Retention)
	pruneMsgs, pruneBatches, pruneOrphans := l.pruneSQL()
	var total int64
	more := func() bool {
		select {
		case <-l.stop:
			return false
		default:
			return true
		}
	}
	for more() {
		// The oldest completed batches, as many as hold about $2 messages (at least one), and
		// their messages (first: a message row the next loop deleted would be counted again).
		var batches, msgs int64
		err := l.queryRow(ctx, pruneBatches, cutoff, l.opts.PruneBatch).Scan(&batches, &msgs)
		if err != nil {
			return total, fmt.Errorf("txmq ledger: pruning completed batches from %s: %w", l.states, err)
		}
		total += msgs
		l.pruned.Add(msgs)
		if batches == 0 {
			break
		}
	}
	for more() {
		tag, err := l.exec(ctx, pruneMsgs, cutoff, l.opts.PruneBatch)
		if err != nil {
			return total, fmt.Errorf("txmq ledger: pruning completed and cancelled messages from %s: %w", l.table, err)
		}
		total += tag.RowsAffected()
		l.pruned.Add(tag.RowsAffected())
		if tag.RowsAffected() < int64(l.opts.PruneBatch) {
			break
		}
	}
	for more() {
		// Older batches that hold no message any more.
		tag, err := l.exec(ctx, pruneOrphans, cutoff, l.opts.PruneBatch)
		if err != nil {
			return total, fmt.Errorf("txmq ledger: pruning batches without messages from %s: %w", l.states, err)
		}
		if tag.RowsAffected() < int64(l.opts.PruneBatch) {
			break
		}
	}
	return total, nil
}

// pruneSQL returns Prune's statements ($1 the cutoff, $2 PruneBatch): the completed and
// cancelled messages without a batch, the oldest completed batches with their messages' rows
// (as many as hold about $2 messages, at least one; it returns how many batches and messages
// it pruned: the rows deleted and the ids without a row),
// and the older batches that hold no message any more (each of their messages has a row
// elsewhere or a newer batch: probes of the primary key and of the span index).
func (l *Ledger) pruneSQL() (messages, batches, orphans string) {
	// Rows are deleted by their ctid (a TID scan), found through an index in a subquery.
	return `DELETE FROM ` + l.table + ` WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM ` + l.table + ` WHERE state IN ('completed', 'cancelled') AND updated_at < $1
	ORDER BY updated_at LIMIT $2))`,
		`WITH gone AS (DELETE FROM ` + l.states + ` WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM (
		SELECT ctid, sum(coalesce(cardinality(ids), 0)) OVER (ORDER BY updated_at, queue, batch_id) - coalesce(cardinality(ids), 0) AS before
		FROM (SELECT ctid, * FROM ` + l.states + ` WHERE state = 'completed' AND updated_at < $1 ORDER BY updated_at LIMIT $2) AS s) AS s
	WHERE before < $2))
	RETURNING queue, batch_id, ids, updated_at),
d AS (DELETE FROM ` + l.table + ` AS m WHERE m.id = ANY(ARRAY(SELECT unnest(ids) FROM gone)) AND m.state <> 'cancelled'
	AND EXISTS (SELECT 1 FROM gone WHERE gone.queue = m.queue
		AND (gone.batch_id = m.batch_id OR (m.batch_id = '' AND m.updated_at <= gone.updated_at)))
	RETURNING 1),
r AS (SELECT m.queue, m.id FROM ` + l.table + ` AS m WHERE m.id = ANY(ARRAY(SELECT unnest(ids) FROM gone)))
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM d) + (SELECT coalesce(sum(cardinality(ids)), 0) FROM gone)
	- (SELECT count(*) FROM r WHERE EXISTS (SELECT 1 FROM gone WHERE gone.queue = r.queue AND r.id = ANY(gone.ids)))`,
		`DELETE FROM ` + l.states + ` WHERE ctid = ANY(ARRAY(
	SELECT s.ctid FROM ` + l.states + ` AS s WHERE s.updated_at < $1 AND s.state <> 'completed'
	AND NOT EXISTS (SELECT 1 FROM unnest(s.ids) AS x(id)
		WHERE NOT EXISTS (SELECT 1 FROM ` + l.table + ` AS m WHERE m.id = x.id AND m.queue = s.queue AND m.batch_id <> s.batch_id
				AND (m.state = 'cancelled' OR m.batch_id <> '' OR m.updated_at > s.updated_at))
			AND NOT EXISTS (SELECT 1 FROM ` + l.states + ` AS n WHERE ` + newerOverlapping + ` AND x.id = ANY(n.ids)))
	ORDER BY s.updated_at LIMIT $2))`
}

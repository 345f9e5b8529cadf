package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// merge folds events of the same message into one (a statement may change a row once): the
// newest state wins (the later one on a tie), the earliest publish time and the known batch id
// are kept.
func merge(events []core.MessageInfo) []core.MessageInfo {
	type key struct{ queue, id string }
	index := make(map[key]int, len(events))
	out := events[:0:0]
	for _, e := range events {
		if e.PublishedAt.IsZero() {
			e.PublishedAt = e.UpdatedAt
		}
		k := key{e.Queue, e.ID}
		i, ok := index[k]
		if !ok {
			index[k] = len(out)
			out = append(out, e)
			continue
		}
		prev := out[i]
		win := e
		if prev.State == core.StateCancelled && e.State != core.StateCompleted || e.UpdatedAt.Before(prev.UpdatedAt) {
			win = prev
		}
		if prev.PublishedAt.Before(e.PublishedAt) {
			win.PublishedAt = prev.PublishedAt
		} else {
			win.PublishedAt = e.PublishedAt
		}
		if win.BatchID == "" {
			win.BatchID = prev.BatchID
			if win.BatchID == "" {
				win.BatchID = e.BatchID
			}
		}
		out[i] = win
	}
	return out
}

// newer is the condition for a row to take an event's state: the event is not older than the
// row's, and a cancelled row takes only a completion.
const newer = `(l.updated_at <= excluded.updated_at AND (l.state <> 'cancelled' OR excluded.state = 'completed'))`

// write stores events as one multi-row statement. A row takes an event that is not older
// than it; a cancelled row takes only a completion.
func (l *Ledger) write(ctx context.Context, events []core.MessageInfo) error {
	var modeBatch pgx.Batch
	if l.opts.Mode {
		l.batchEvents(&modeBatch, events) // before merge: every batch's events count
	}
	events = merge(events)
	n := len(events)
	var (
		queues, ids, batches, states, nodes, errs, reasons = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		published, updated                                 = make([]time.Time, n), make([]time.Time, n)
		dues                                               = make([]*time.Time, n)
		runs                                               = make([]int32, n)
	)
	for i, e := range events {
		queues[i], ids[i], batches[i], states[i] = e.Queue, e.ID, e.BatchID, string(e.State)
		nodes[i], errs[i], reasons[i] = e.Node, e.Error, e.Reason
		published[i], updated[i], runs[i] = e.PublishedAt, e.UpdatedAt, int32(e.Runs)
		if !e.Due.IsZero() {
			d := e.Due
			dues[i] = &d
		}
	}
	upsert := `INSERT INTO ` + l.table + ` AS l (queue, id, batch_id, state, published_at, updated_at, due, node, runs, error, reason)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::text[], $9::int[], $10::text[], $11::text[])
ON CONFLICT (queue, id) DO UPDATE SET
	batch_id = CASE WHEN excluded.batch_id = '' THEN l.batch_id ELSE excluded.batch_id END,
	published_at = LEAST(l.published_at, excluded.published_at),
	state = CASE WHEN ` + newer + ` THEN excluded.state ELSE l.state END,
	updated_at = CASE WHEN ` + newer + ` THEN excluded.updated_at ELSE l.updated_at END,
	due = CASE WHEN ` + newer + ` THEN excluded.due ELSE l.due END,
	node = CASE WHEN ` + newer + ` AND excluded.node <> '' THEN excluded.node ELSE l.node END,
	runs = CASE WHEN ` + newer + ` THEN excluded.runs ELSE l.runs END,
	error = CASE WHEN ` + newer + ` AND excluded.error <> '' THEN excluded.error ELSE l.error END,
	reason = CASE WHEN ` + newer + ` THEN excluded.reason ELSE l.reason END
WHERE ` + newer + ` OR excluded.published_at < l.published_at`
	args := []any{queues, ids, batches, states, published, updated, dues, nodes, runs, errs, reasons}
	var err error
	if modeBatch.Len() == 0 {
		_, err = l.pool.Exec(ctx, upsert, args...)
	} else {
		// One round trip: the message rows, then the kept batches' deadlines and settles.
		b := &pgx.Batch{}
		b.Queue(upsert, args...)
		b.QueuedQueries = append(b.QueuedQueries, modeBatch.QueuedQueries...)
		err = l.pool.SendBatch(ctx, b).Close()
	}
	if err != nil {
		return fmt.Errorf("txmq ledger: writing %d events to %s: %w", n, l.table, err)
	}
	return nil
}

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

// Prune deletes completed and cancelled rows last updated more than Retention ago, PruneBatch
// rows per statement until one deletes fewer, and returns how many it deleted. The pruner
// calls it every PruneInterval.
func (l *Ledger) Prune(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := l.pool.Exec(ctx, `DELETE FROM `+l.table+` WHERE (queue, id) IN (
	SELECT queue, id FROM `+l.table+` WHERE state IN ('completed', 'cancelled') AND updated_at < $1
	ORDER BY updated_at LIMIT $2)`, time.Now().Add(-l.opts.Retention), l.opts.PruneBatch)
		if err != nil {
			return total, fmt.Errorf("txmq ledger: pruning %s: %w", l.table, err)
		}
		total += tag.RowsAffected()
		l.pruned.Add(tag.RowsAffected())
		if tag.RowsAffected() < int64(l.opts.PruneBatch) {
			return total, nil
		}
		select {
		case <-l.stop:
			return total, nil
		default:
		}
	}
}

package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// republishLockClass is the first key of the advisory lock a republish pass holds (the second
// is the hash of the kept table's name), so that one node of the cluster republishes at a time.
const republishLockClass = 0x7478_6d71 // "txmq"

// republishTimeout bounds one publish of a republish pass.
const republishTimeout = 10 * time.Second

// PublishFunc publishes one batch to the backend (a node's backend's Publish).
type PublishFunc = func(ctx context.Context, b core.OutgoingBatch) error

// RunRepublisher runs ledger mode's republisher until ctx ends: RepublishDue at once and then
// every Options.RepublishInterval. A node runs it (txmq.Node.Start, when its ledger is in
// mode); several may run, one pass runs at a time across the cluster. A no-op when the mode is
// off.
func (l *Ledger) RunRepublisher(ctx context.Context, publish PublishFunc) {
	if !l.opts.Mode {
		return
	}
	t := time.NewTicker(l.opts.RepublishInterval)
	defer t.Stop()
	for {
		if _, err := l.RepublishDue(ctx, publish); err != nil && ctx.Err() == nil {
			l.log.Warn("txmq ledger: republishing unsettled batches failed; trying again at the next period", "schema", l.opts.Schema, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

// RepublishDue publishes again, through publish, the kept batches whose deadline passed, in
// passes of at most Options.RepublishBatch batches (one transaction each, holding an advisory
// lock: when another node holds it, RepublishDue returns at once). A batch whose messages
// all completed, were cancelled or dead-lettered (its settle was lost, or a node acked it
// without a run because every message was cancelled) is settled instead. A republished batch's
// next deadline is Horizon times 2^(republishes so far); after MaxRepublish republishes the
// ledger stops keeping it (logged at error level). It stops at the first publish error wrapping
// core.ErrBackendUnavailable. It returns how many batches it published.
func (l *Ledger) RepublishDue(ctx context.Context, publish PublishFunc) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, full, err := l.republishPass(ctx, publish)
		total += n
		if err != nil || !full {
			return total, err
		}
	}
	return total, nil
}

// keptBatch is one kept batch a pass took.
type keptBatch struct {
	b           core.OutgoingBatch
	republished int
	ids         []string
	created     time.Time // the envelope's
}

// republishPass runs one pass; full reports that it took a whole page (there may be more).
func (l *Ledger) republishPass(parent context.Context, publish PublishFunc) (published int, full bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), time.Duration(l.opts.RepublishBatch)*republishTimeout+30*time.Second)
	defer cancel()
	var stop error
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, int32(republishLockClass), l.kept).Scan(&locked); err != nil {
			return err
		}
		if !locked {
			return nil // another node republishes now
		}
		page, err := l.duePage(ctx, tx)
		if err != nil || len(page) == 0 {
			return err
		}
		full = len(page) == l.opts.RepublishBatch
		done, err := l.terminalOf(ctx, tx, page)
		if err != nil {
			return err
		}
		var settle, again, gaveUp []keptBatch
		for _, k := range page {
			switch {
			case done(k):
				settle = append(settle, k)
			case k.republished >= l.opts.MaxRepublish:
				gaveUp = append(gaveUp, k)
				l.log.Error("txmq ledger: a kept batch is still unsettled after its last republish; the ledger stops keeping it (its messages' rows stay in the ledger)",
					"queue", k.b.Queue, "batch", k.b.ID, "messages", k.b.Messages, "republished", k.republished, "horizon", l.opts.Horizon)
			case stop != nil || parent.Err() != nil:
				// Stopped (a backend down, or the node closing): the rest wait for a next pass.
			default:
				// The publish ends with the node's context (Close does not wait for a pass);
				// the database work of the pass does not.
				pctx, pcancel := context.WithTimeout(parent, republishTimeout)
				perr := publish(pctx, k.b)
				pcancel()
				if perr != nil && parent.Err() != nil {
					continue // cut short by the node's stop: not a republish
				}
				if perr != nil && errors.Is(perr, core.ErrBackendUnavailable) {
					stop = fmt.Errorf("txmq ledger: republishing batch %s of queue %q: %w; the rest wait for the next pass", k.b.ID, k.b.Queue, perr)
					continue
				}
				if perr != nil {
					l.log.Warn("txmq ledger: republishing a kept batch failed; it counts as one republish", "queue", k.b.Queue, "batch", k.b.ID, "error", perr)
				} else {
					published++
					l.log.Warn("txmq ledger: batch unsettled past the horizon; published again from the ledger", "queue", k.b.Queue, "batch", k.b.ID, "messages", k.b.Messages, "republished", k.republished+1)
				}
				again = append(again, k)
			}
		}
		return l.afterPass(ctx, tx, settle, gaveUp, again)
	})
	if err != nil {
		return 0, false, fmt.Errorf("txmq ledger: republish pass on %s (rolled back; its batches are taken again by the next pass): %w", l.kept, err)
	}
	l.mode.republished.Add(int64(published))
	return published, full && stop == nil, stop
}

// duePage locks the due kept batches (skipping ones another transaction holds).
func (l *Ledger) duePage(ctx context.Context, tx pgx.Tx) ([]keptBatch, error) {
	rows, err := tx.Query(ctx, `SELECT queue, batch_id, body, exclusive, order_key, messages,
	GREATEST(coalesce(extract(epoch FROM due - now()), 0), 0)::float8, republished
FROM `+l.kept+` WHERE deadline <= now() ORDER BY deadline LIMIT $1 FOR UPDATE SKIP LOCKED`, l.opts.RepublishBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []keptBatch
	for rows.Next() {
		var (
			k     keptBatch
			delay float64
			msgs  int32
		)
		if err := rows.Scan(&k.b.Queue, &k.b.ID, &k.b.Body, &k.b.Exclusive, &k.b.Key, &msgs, &delay, &k.republished); err != nil {
			return nil, err
		}
		k.b.Messages, k.b.Delay = int(msgs), time.Duration(delay*float64(time.Second))
		if env, err := envelope.Decode(k.b.Body); err == nil {
			k.ids, k.created = env.MessageIDs, env.Created
			k.b.Priority, k.b.Lead = env.Priority, time.Duration(env.LeadMicros)*time.Microsecond
			k.b.FairKey = env.FairKey
			if env.UniqueMode != 0 { // a unique batch asks for its check again (its own id passes)
				k.b.Unique = core.Unique{Key: env.UniqueKey, Mode: core.UniqueMode(env.UniqueMode), Window: time.Duration(env.UniqueMillis) * time.Millisecond}
			}
		}
		page = append(page, k)
	}
	return page, rows.Err()
}

// terminalOf reads the states of the page's messages and returns whether a kept batch's
// messages are all completed, cancelled or dead, or cancelled in that batch (a later publish
// of a cancelled id may be running: the cancel still covers the kept batch); a batch whose
// ids are unknown never is.
func (l *Ledger) terminalOf(ctx context.Context, tx pgx.Tx, page []keptBatch) (func(keptBatch) bool, error) {
	var (
		queues, ids []string
		times       []*time.Time
	)
	for _, k := range page {
		for _, id := range k.ids {
			queues, ids, times = append(queues, k.b.Queue), append(ids, id), append(times, idTime(id))
		}
	}
	final := map[[2]string]bool{}
	if _, err := tx.Exec(ctx, planGuard); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, l.terminalSQL(), queues, ids, times)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var q, id string
		if err := rows.Scan(&q, &id); err != nil {
			return nil, err
		}
		final[[2]string{q, id}] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	cancels := map[[2]string]cancelScope{}
	if rows, err = tx.Query(ctx, l.cancelScopesSQL(), queues, ids); err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			q, id string
			sc    cancelScope
		)
		if err := rows.Scan(&q, &id, &sc.at, &sc.batch); err != nil {
			return nil, err
		}
		cancels[[2]string{q, id}] = sc
	}
	return func(k keptBatch) bool {
		if len(k.ids) == 0 {
			return false
		}
		for _, id := range k.ids {
			key := [2]string{k.b.Queue, id}
			if sc, ok := cancels[key]; !final[key] && !(ok && sc.covers(core.CancelCheck{Queue: k.b.Queue, BatchID: k.b.ID, Created: k.created})) {
				return false
			}
		}
		return true
	}, rows.Err()
}

// cancelScopesSQL reads the cancels of messages ($1 their queues, $2 their ids), as
// cancelledSQL does.
func (l *Ledger) cancelScopesSQL() string {
	return `SELECT m.queue, m.id, CASE WHEN m.cancel_at IS NULL THEN m.updated_at ELSE m.cancel_at END, CASE WHEN m.cancel_at IS NULL THEN m.batch_id ELSE coalesce(m.cancel_batch, '') END
FROM unnest($1::text[], $2::text[]) AS t(q, id) JOIN ` + l.table + ` AS m ON m.id = t.id AND m.queue = t.q
WHERE m.cancel_at IS NOT NULL OR m.state = 'cancelled'`
}

// afterPass deletes the settled and given-up batches and pushes the republished ones'
// deadlines (Horizon times 2^republishes) in tx.
func (l *Ledger) afterPass(ctx context.Context, tx pgx.Tx, settle, gaveUp, again []keptBatch) error {
	if gone := append(settle, gaveUp...); len(gone) > 0 {
		queues, ids := make([]string, len(gone)), make([]string, len(gone))
		for i, k := range gone {
			queues[i], ids[i] = k.b.Queue, k.b.ID
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+l.kept+` AS k USING unnest($1::text[], $2::text[]) AS t(q, id) WHERE k.queue = t.q AND k.batch_id = t.id`, queues, ids); err != nil {
			return err
		}
	}
	l.mode.gaveUp.Add(int64(len(gaveUp))) // counted before the commit: a rolled-back pass logs and counts them again
	if len(again) == 0 {
		return nil
	}
	queues, ids := make([]string, len(again)), make([]string, len(again))
	waits := make([]int64, len(again))
	for i, k := range again {
		queues[i], ids[i] = k.b.Queue, k.b.ID
		waits[i] = (l.opts.Horizon << min(k.republished+1, 10)).Microseconds() + k.b.Delay.Microseconds()
	}
	_, err := tx.Exec(ctx, `UPDATE `+l.kept+` AS k SET republished = k.republished + 1, deadline = now() + t.w * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(q, id, w) WHERE k.queue = t.q AND k.batch_id = t.id`, queues, ids, waits)
	return err
}

// terminalSQL is terminalOf's statement ($1 the queues, $2 the ids of the messages, $3 their
// times or NULLs).
func (l *Ledger) terminalSQL() string {
	return `SELECT v.queue, v.id FROM (` + l.resolve(`unnest($1::text[], $2::text[], $3::timestamptz[]) AS c(q, id, t)`) + `) AS v
	WHERE v.state IN ('completed', 'cancelled', 'dead')`
}

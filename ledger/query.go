package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

const columns = `queue, id, batch_id, state, published_at, updated_at, due, node, runs, error, reason`

// messages is the FROM clause of every read: a message row joined with its batch's row. The
// batch's row gives the state and its details, unless the message has no batch (staged, or
// left out of a run) or is cancelled (a cancelled message takes only its batch's completion:
// the batch was running when the cancel came, and the message with it).
func (l *Ledger) messages() string {
	pick := func(c string) string {
		return `CASE WHEN s.batch_id IS NULL THEN m.` + c + ` ELSE s.` + c + ` END AS ` + c
	}
	return `(SELECT m.queue, m.id, m.batch_id, ` + pick("state") + `, m.published_at, ` + pick("updated_at") + `, ` + pick("due") + `, ` +
		pick("node") + `, ` + pick("runs") + `, ` + pick("error") + `, ` + pick("reason") + `
	FROM ` + l.table + ` AS m LEFT JOIN ` + l.states + ` AS s ON m.batch_id <> '' AND s.queue = m.queue AND s.batch_id = m.batch_id
		AND (m.state <> 'cancelled' OR s.state = 'completed')) AS v`
}

func scanInfo(row pgx.Row) (core.MessageInfo, error) {
	var (
		m     core.MessageInfo
		state string
		due   *time.Time
	)
	err := row.Scan(&m.Queue, &m.ID, &m.BatchID, &state, &m.PublishedAt, &m.UpdatedAt, &due, &m.Node, &m.Runs, &m.Error, &m.Reason)
	m.State = core.MessageState(state)
	if due != nil {
		m.Due = *due
	}
	return m, err
}

// GetMessage returns the message with id (the most recently updated one when the id was used
// on several queues), after writing this process's buffered events; an unknown id is an error
// wrapping core.ErrMessageNotFound.
func (l *Ledger) GetMessage(ctx context.Context, id string) (core.MessageInfo, error) {
	if err := l.Flush(ctx); err != nil {
		return core.MessageInfo{}, err
	}
	m, err := scanInfo(l.queryRow(ctx, l.getSQL(), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, fmt.Errorf("%w: message %q is not in the ledger (%s): never published, published by a process without the ledger, or pruned after its retention (%v)", core.ErrMessageNotFound, id, l.table, l.opts.Retention)
	}
	if err != nil {
		return m, fmt.Errorf("txmq ledger: looking up message %q in %s: %w", id, l.table, err)
	}
	return m, nil
}

// ListMessages returns the messages f selects, newest published first.
func (l *Ledger) ListMessages(ctx context.Context, f core.MessageFilter) ([]core.MessageInfo, error) {
	if err := l.Flush(ctx); err != nil {
		return nil, err
	}
	q, args := l.listQuery(f)
	rows, err := l.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("txmq ledger: listing messages in %s: %w", l.table, err)
	}
	defer rows.Close()
	var out []core.MessageInfo
	for rows.Next() {
		m, err := scanInfo(rows)
		if err != nil {
			return nil, fmt.Errorf("txmq ledger: listing messages in %s: %w", l.table, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("txmq ledger: listing messages in %s: %w", l.table, err)
	}
	return out, nil
}

// listQuery returns ListMessages' statement and arguments for f.
func (l *Ledger) listQuery(f core.MessageFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Queue != "" {
		add("queue = $%d", f.Queue)
	}
	if f.State != "" {
		add("state = $%d", string(f.State))
	}
	if !f.Since.IsZero() {
		add("published_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("published_at < $%d", f.Until)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = core.DefaultMessageLimit
	}
	args = append(args, limit)
	order := fmt.Sprintf(` ORDER BY published_at DESC, id DESC LIMIT $%d`, len(args))
	if f.Queue == "" {
		// Across queues: the newest of each queue (walking the queues of the index on queue
		// and publish time, one probe per queue), then the newest of those.
		where = append(where, "queue = qs.q")
	}
	q := `SELECT ` + columns + ` FROM ` + l.messages()
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += order
	if f.Queue == "" {
		q = `WITH RECURSIVE qs(q) AS (
	(SELECT queue FROM ` + l.table + ` ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM ` + l.table + ` WHERE queue > qs.q ORDER BY queue LIMIT 1) FROM qs WHERE qs.q IS NOT NULL)
SELECT ` + columns + ` FROM qs CROSS JOIN LATERAL (` + q + `) AS x` + order
	}
	return q, args
}

// queryCancelled returns which of ids (messages of queue) are cancelled: one indexed query.
func (l *Ledger) queryCancelled(ctx context.Context, queue string, ids []string) (map[string]bool, error) {
	rows, err := l.query(ctx, l.cancelledSQL(), queue, ids)
	if err != nil {
		return nil, fmt.Errorf("txmq ledger: reading cancelled messages of queue %q in %s: %w", queue, l.table, err)
	}
	defer rows.Close()
	var out map[string]bool
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("txmq ledger: reading cancelled messages of queue %q: %w", queue, err)
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("txmq ledger: reading cancelled messages of queue %q: %w", queue, err)
	}
	return out, nil
}

// CancelMessage marks the message with id cancelled (on every queue holding that id) unless
// it completed, after writing this process's buffered events, and returns its row once every
// node's next check sees the cancel (twice Options.CancelCheck after the update). Nodes drop
// a cancelled message from its batch before the listener sees it; a batch that is running
// already is not interrupted (if it completes, the row says completed). Cancelling a cancelled
// message is a no-op; a completed one is an error wrapping core.ErrNotCancellable, an unknown
// one core.ErrMessageNotFound.
func (l *Ledger) CancelMessage(ctx context.Context, id string) (core.MessageInfo, error) {
	if err := l.Flush(ctx); err != nil {
		return core.MessageInfo{}, err
	}
	if _, err := l.exec(ctx, l.cancelSQL(), id, time.Now()); err != nil {
		return core.MessageInfo{}, fmt.Errorf("txmq ledger: cancelling message %q in %s: %w", id, l.table, err)
	}
	m, err := l.GetMessage(ctx, id)
	if err != nil {
		return m, err
	}
	if m.State == core.StateCancelled {
		if err := l.waitCancelSeen(ctx); err != nil {
			return m, err
		}
	}
	if m.State == core.StateCompleted {
		return m, fmt.Errorf("%w: message %q (queue %q) completed at %s", core.ErrNotCancellable, id, m.Queue, m.UpdatedAt.Format(time.RFC3339))
	}
	return m, nil
}

// getSQL is GetMessage's statement ($1 the id).
func (l *Ledger) getSQL() string {
	return `SELECT ` + columns + ` FROM ` + l.messages() + ` WHERE id = $1 ORDER BY updated_at DESC LIMIT 1`
}

// cancelSQL is CancelMessage's statement ($1 the id, $2 the time).
func (l *Ledger) cancelSQL() string {
	return `UPDATE ` + l.table + ` AS m SET state = 'cancelled', updated_at = GREATEST(m.updated_at, $2), due = NULL
WHERE m.id = $1 AND m.state NOT IN ('completed', 'cancelled')
	AND NOT EXISTS (SELECT 1 FROM ` + l.states + ` AS s WHERE m.batch_id <> '' AND s.queue = m.queue AND s.batch_id = m.batch_id AND s.state = 'completed')`
}

// cancelledSQL is queryCancelled's statement ($1 the queue, $2 the ids).
func (l *Ledger) cancelledSQL() string {
	return `SELECT id FROM ` + l.table + ` WHERE queue = $1 AND id = ANY($2) AND state = 'cancelled'`
}

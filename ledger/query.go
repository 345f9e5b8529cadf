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

// A message's state is resolved at read time from two sources (layout 3, migration 0004):
//
//   - the batches that hold its id (a batch row's ids; found by the span of their ids' times,
//     ids_at, for ids made by core.NewID), the newest of them (by updated_at, then batch id)
//     being the one it is in now;
//   - its own row in txmq_ledger, if it has one: staged in a transaction (no batch; it gives
//     way to a batch updated since), cancelled (it gives way only to its own batch's
//     completion: the batch was running when the cancel came, and the message with it; a
//     node that leaves it out of a run takes it out of the batch), or pointing at its batch
//     (ids without a time, and the rows of layout 2), which competes with the other holders.
//
// resolveFrom reads the messages that from names: a FROM list binding c (columns q, id and t,
// the queue, the id and its time, NULL for none) and m (the message's row, or NULLs); pub is
// the publish time to report.
func (l *Ledger) resolveFrom(from, pub string) string {
	src := func(c string) string { return `(CASE WHEN p.batch_id IS NULL THEN m.` + c + ` ELSE p.` + c + ` END)` }
	pick := func(c string) string { return src(c) + ` AS ` + c }
	state, updated, due := current(src("state"), src("updated_at"), src("due"))
	return `SELECT c.q AS queue, c.id, ` + pick("batch_id") + `, ` + state + ` AS state, ` + pub + ` AS published_at, ` + updated + ` AS updated_at, ` +
		due + ` AS due, ` + pick("node") + `, ` + pick("runs") + `, ` + pick("error") + `, ` + pick("reason") + `
FROM ` + from + `
LEFT JOIN LATERAL (SELECT h.* FROM (
		SELECT s.* FROM ` + l.states + ` AS s WHERE m.batch_id <> '' AND s.queue = m.queue AND s.batch_id = m.batch_id
		UNION ALL
		SELECT s.* FROM ` + l.states + ` AS s WHERE s.ids_at @> c.t AND s.queue = c.q AND c.id = ANY(s.ids)) AS h
	WHERE m.id IS NULL OR (m.state = 'cancelled' AND (h.batch_id = m.batch_id AND h.state = 'completed' OR ` + laterPublish + `))
		OR (m.state <> 'cancelled' AND (m.batch_id <> '' OR h.updated_at >= m.updated_at) AND (m.cancel_at IS NULL OR ` + laterPublish + `))
	ORDER BY h.updated_at DESC, h.batch_id DESC LIMIT 1) AS p ON true
WHERE (m.id IS NOT NULL OR p.batch_id IS NOT NULL)`
}

// laterPublish is the condition for a batch h holding the id of a message row m to be a later
// publish of that id than m's cancel (if any): it is not the batch the cancel found and was
// published after it. A cancel never applies to such a batch, and the id reads as its
// message's (the newest of them).
const laterPublish = `(m.cancel_at IS NOT NULL AND h.published_at > m.cancel_at AND h.batch_id <> m.cancel_batch)`

// publishedAt is the publish time a lookup reports (p the batch it resolved, m the message's
// row): the row's, unless there is none or the batch is a later publish than the row's
// cancel. (Listings report the row's, walking the rows by it.)
const publishedAt = `CASE WHEN m.id IS NULL OR p.published_at > m.cancel_at THEN p.published_at ELSE m.published_at END`

// current returns the expressions of the state, update time and due time a reader reports for
// a recorded state, update time and due time. A running state's due time is the end of the
// run's lease (as the running node last recorded it: at the run's start and at each
// extension): once it passed, the node died or lost the lease, the backend hands the batch out
// again, and the message reads queued since the lease's end, until a node records its next
// run. A running message reports no due time. (A running state recorded without a lease end,
// by a build before this rule, stays running.)
func current(state, updated, due string) (st, up, du string) {
	ended := `(` + state + ` = 'running' AND ` + due + ` < now())`
	return `CASE WHEN ` + ended + ` THEN 'queued' ELSE ` + state + ` END`,
		`CASE WHEN ` + ended + ` THEN ` + due + ` ELSE ` + updated + ` END`,
		`CASE WHEN ` + state + ` = 'running' THEN NULL ELSE ` + due + ` END`
}

// newerOverlapping is the condition for a batch n to be newer than batch s (by update time,
// then batch id, the order in which resolveFrom picks the newest holder) and to be able to
// hold an id of s (same queue, overlapping span): the batches that may take a message of s
// away from it, for listings and the pruner.
const newerOverlapping = `n.ids_at && s.ids_at AND n.queue = s.queue AND (n.updated_at, n.batch_id) > (s.updated_at, s.batch_id)`

// resolve reads the candidates cands names (a FROM item aliased c, with columns q, id and t,
// as above).
func (l *Ledger) resolve(cands string) string {
	return l.resolveFrom(cands+` LEFT JOIN `+l.table+` AS m ON m.id = c.id AND m.queue = c.q`,
		publishedAt)
}

// byID is the candidates of a lookup by id ($1 the id, $2 its time or NULL): each queue that
// holds a row or a batch with it.
func (l *Ledger) byID() string {
	return `(SELECT qs.q, $1::text AS id, $2::timestamptz AS t FROM (
	SELECT queue AS q FROM ` + l.table + ` WHERE id = $1
	UNION SELECT queue FROM ` + l.states + ` WHERE ids_at @> $2::timestamptz AND $1 = ANY(ids)) AS qs) AS c`
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
	m, err := scanInfo(l.queryRow(ctx, l.getSQL(), id, idTime(id)))
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

// listQuery returns ListMessages' statement and arguments for f: the newest messages of the
// batches (those without a row, in the newest batch that holds them) and the newest messages
// with a row, each walked by queue and publish time and cut at the limit, merged.
func (l *Ledger) listQuery(f core.MessageFilter) (string, []any) {
	var (
		args          []any
		batch, rowsOf []string // conditions on s (a batch) and r (a message with a row)
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	queue := "qs.q" // across queues: the newest of each queue, then the newest of those
	if f.Queue != "" {
		queue = arg(f.Queue)
	}
	batch, rowsOf = append(batch, "s.queue = "+queue), append(rowsOf, "r.queue = "+queue)
	state, updated, due := current("s.state", "s.updated_at", "s.due")
	if f.State != "" {
		a := arg(string(f.State))
		batch, rowsOf = append(batch, "("+state+") = "+a), append(rowsOf, "r.state = "+a)
	}
	if !f.Since.IsZero() {
		a := arg(f.Since)
		batch, rowsOf = append(batch, "s.published_at >= "+a), append(rowsOf, "r.published_at >= "+a)
	}
	if !f.Until.IsZero() {
		a := arg(f.Until)
		batch, rowsOf = append(batch, "s.published_at < "+a), append(rowsOf, "r.published_at < "+a)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = core.DefaultMessageLimit
	}
	order := ` ORDER BY published_at DESC, id DESC LIMIT ` + arg(limit)
	// A batch's messages: its ids less those with a row and those a newer batch holds (the
	// ids of the newer batches whose span overlaps its own, gathered once per batch as the
	// keys of a jsonb object, which a lookup searches by halves).
	batches := `SELECT s.queue, x.id, s.batch_id, ` + state + ` AS state, s.published_at, ` + updated + ` AS updated_at, ` + due + ` AS due, s.node, s.runs, s.error, s.reason
	FROM ` + l.states + ` AS s
	CROSS JOIN LATERAL (SELECT coalesce(jsonb_object_agg(u.id, 1), '{}') AS ids FROM ` + l.states + ` AS n CROSS JOIN LATERAL unnest(n.ids) AS u(id)
		WHERE ` + newerOverlapping + `) AS nw
	CROSS JOIN LATERAL unnest(s.ids) AS x(id)
	WHERE s.ids_at IS NOT NULL AND ` + strings.Join(batch, " AND ") + `
		AND NOT nw.ids ? x.id
		AND NOT EXISTS (SELECT 1 FROM ` + l.table + ` AS m WHERE m.id = x.id AND m.queue = s.queue)`
	rows := `SELECT r.* FROM (` + l.resolveFrom(l.table+` AS m CROSS JOIN LATERAL (SELECT m.queue, m.id, m.id_at) AS c(q, id, t)`, `m.published_at`) + `) AS r
	WHERE ` + strings.Join(rowsOf, " AND ")
	q := `SELECT ` + columns + ` FROM ((` + batches + order + `)
UNION ALL
(` + rows + order + `)) AS v` + order
	if f.Queue == "" {
		// The queues: the distinct ones of the batches' and of the rows' indexes, one probe each.
		walk := func(name, table string) string {
			return name + `(q) AS (
	(SELECT queue FROM ` + table + ` ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM ` + table + ` WHERE queue > ` + name + `.q ORDER BY queue LIMIT 1) FROM ` + name + ` WHERE ` + name + `.q IS NOT NULL)`
		}
		q = `WITH RECURSIVE ` + walk("bq", l.states) + `, ` + walk("rq", l.table) + `,
qs(q) AS (SELECT q FROM bq WHERE q IS NOT NULL UNION SELECT q FROM rq WHERE q IS NOT NULL)
SELECT ` + columns + ` FROM qs CROSS JOIN LATERAL (` + q + `) AS x` + order
	}
	return q, args
}

// queryCancelled returns which of b.IDs are cancelled in batch b (see CancelledMessages):
// one indexed query.
func (l *Ledger) queryCancelled(ctx context.Context, b core.CancelCheck) (map[string]bool, error) {
	rows, err := l.query(ctx, l.cancelledSQL(), b.Queue, b.IDs)
	if err != nil {
		return nil, fmt.Errorf("txmq ledger: reading cancelled messages of queue %q in %s: %w", b.Queue, l.table, err)
	}
	defer rows.Close()
	var out map[string]bool
	for rows.Next() {
		var (
			id string
			sc cancelScope
		)
		if err := rows.Scan(&id, &sc.at, &sc.batch); err != nil {
			return nil, fmt.Errorf("txmq ledger: reading cancelled messages of queue %q: %w", b.Queue, err)
		}
		if !sc.covers(b) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("txmq ledger: reading cancelled messages of queue %q: %w", b.Queue, err)
	}
	return out, nil
}

// CancelMessage marks the message with id cancelled (on every queue holding that id) unless
// it completed, after writing this process's buffered events, and returns its row once every
// node's next check sees the cancel (twice Options.CancelCheck after the update). Nodes drop
// a cancelled message from its batch before the listener sees it; a batch that is running
// already is not interrupted (if it completes, the row says completed). The cancel applies to
// the batch that holds the message now and to the batches made no later than the cancel
// (core.MessageRecorder), never to a later publish of the id, which runs and which lookups
// report from then on. Cancelling a cancelled message is a no-op; a completed one is an error
// wrapping core.ErrNotCancellable, an unknown one core.ErrMessageNotFound.
func (l *Ledger) CancelMessage(ctx context.Context, id string) (core.MessageInfo, error) {
	if err := l.Flush(ctx); err != nil {
		return core.MessageInfo{}, err
	}
	if _, err := l.exec(ctx, l.cancelSQL(), id, idTime(id), time.Now()); err != nil {
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

// getSQL is GetMessage's statement ($1 the id, $2 its time or NULL).
func (l *Ledger) getSQL() string {
	return `SELECT ` + columns + ` FROM (` + l.resolve(l.byID()) + `) AS v ORDER BY updated_at DESC LIMIT 1`
}

// cancelSQL is CancelMessage's statement ($1 the id, $2 its time or NULL, $3 the time): the
// message gets a cancelled row (or its row becomes cancelled) in the batch it is in now,
// unless it completed or is cancelled already. The row records the cancel's scope: its time
// (not before the message's last event) and that batch (cancel_at, cancel_batch).
func (l *Ledger) cancelSQL() string {
	return `INSERT INTO ` + l.table + ` AS l (queue, id, batch_id, state, published_at, updated_at, node, runs, error, reason, id_at, cancel_at, cancel_batch)
SELECT v.queue, v.id, v.batch_id, 'cancelled', v.published_at, GREATEST(v.updated_at, $3), v.node, v.runs, v.error, v.reason, $2, GREATEST(v.updated_at, $3), v.batch_id
FROM (` + l.resolve(l.byID()) + `) AS v WHERE v.state NOT IN ('completed', 'cancelled')
ON CONFLICT (id, queue) DO UPDATE SET state = 'cancelled', batch_id = excluded.batch_id, due = NULL, published_at = excluded.published_at,
	updated_at = GREATEST(l.updated_at, excluded.updated_at), id_at = coalesce(l.id_at, excluded.id_at),
	cancel_at = GREATEST(l.cancel_at, excluded.cancel_at), cancel_batch = excluded.cancel_batch`
}

// cancelledSQL is queryCancelled's statement ($1 the queue, $2 the ids): the cancel of each
// id that has one, as cancelsSQL reads it.
func (l *Ledger) cancelledSQL() string {
	return `SELECT id, CASE WHEN cancel_at IS NULL THEN updated_at ELSE cancel_at END, CASE WHEN cancel_at IS NULL THEN batch_id ELSE coalesce(cancel_batch, '') END
FROM ` + l.table + ` WHERE queue = $1 AND id = ANY($2) AND (cancel_at IS NOT NULL OR state = 'cancelled')`
}

package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// A grouped write turns the buffered events into at most four statements, sent in one round
// trip and run in one transaction, always in this order (so that concurrent writes take their
// locks in one order):
//
//   - loose: events without a batch id (messages staged in a transaction, messages a node
//     left out of a run as cancelled, and events recorded one message at a time without a
//     batch) upsert the message rows themselves, state and all;
//   - attach: a batch's events insert the rows of its messages that are missing and point
//     those of another batch at it (a message staged in a transaction gets the batch the
//     outbox relay gave it; a dead letter replayed gets the replay's batch). A batch this
//     Ledger attached already costs nothing here but at its publish;
//   - states: one row per batch takes the batch's newest event;
//   - ledger mode's statements (keep.go).

// loose returns the messages of events without a batch id, one event per message, merged
// (a statement may change a row once): the newest state wins (the later one on a tie), the
// earliest publish time is kept.
func loose(events []core.BatchEvent) []core.MessageInfo {
	type key struct{ queue, id string }
	var (
		index map[key]int
		out   []core.MessageInfo
	)
	for _, ev := range events {
		if ev.BatchID != "" {
			continue
		}
		if index == nil {
			index = map[key]int{}
		}
		for _, id := range ev.IDs {
			e := core.MessageInfo{ID: id, Queue: ev.Queue, State: ev.State, PublishedAt: ev.PublishedAt, UpdatedAt: ev.UpdatedAt,
				Due: ev.Due, Node: ev.Node, Runs: ev.Runs, Error: ev.Error, Reason: ev.Reason}
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
			if e.State != core.StateCancelled && prev.State == core.StateCancelled && e.PublishedAt.After(prev.UpdatedAt) {
				out[i] = e // a publish after a message was left out: a later publish of the id
				continue
			}
			win := e
			if prev.State == core.StateCancelled && e.State != core.StateCompleted || e.UpdatedAt.Before(prev.UpdatedAt) {
				win = prev
			}
			if prev.PublishedAt.Before(e.PublishedAt) {
				win.PublishedAt = prev.PublishedAt
			} else {
				win.PublishedAt = e.PublishedAt
			}
			out[i] = win
		}
	}
	return out
}

// newer is the condition for a message row to take a loose event's state: the event is not
// older than the row's, a cancelled row takes only a completion, and a row that follows a
// later publish of a cancelled id (not cancelled, with a cancel) takes no cancelled event:
// a node leaves out only the messages the cancel found, never the later one's.
const newer = `(l.updated_at <= excluded.updated_at AND (l.state <> 'cancelled' OR excluded.state = 'completed') AND (excluded.state <> 'cancelled' OR l.cancel_at IS NULL))`

// leftOut is the condition for a cancelled row to leave its batch: a node left the message
// out of a run of it (the batch's completion is not the message's).
const leftOut = `(l.state = 'cancelled' AND excluded.state = 'cancelled' AND l.batch_id <> '')`

// republished is the condition for a cancelled row to take a loose event of a later publish
// of its id (staged in a transaction after the cancel): the row follows the new message, its
// publish time included, and keeps the cancel (cancel_at, cancel_batch).
const republished = `(l.state = 'cancelled' AND l.cancel_at IS NOT NULL AND excluded.state <> 'cancelled' AND excluded.published_at > l.cancel_at)`

// queueLoose queues the upsert of the loose events' message rows. A row that takes an event
// leaves its batch: the message is in another one now (staged again, or left out of a run).
func (l *Ledger) queueLoose(b *pgx.Batch, events []core.MessageInfo) {
	n := len(events)
	if n == 0 {
		return
	}
	c, ids, idAt := newStateCols(n), make([]string, n), make([]*time.Time, n)
	for i, e := range events {
		ids[i], idAt[i] = e.ID, idTime(e.ID)
		c.set(i, e.Queue, e.State, e.PublishedAt, e.UpdatedAt, e.Due, e.Node, e.Runs, e.Error, e.Reason)
	}
	b.Queue(`INSERT INTO `+l.table+` AS l (queue, id, batch_id, state, published_at, updated_at, due, node, runs, error, reason, id_at)
SELECT q, id, '', s, p, u, d, n, r, e, re, a FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::text[], $8::int[], $9::text[], $10::text[], $11::timestamptz[]) AS t(q, id, s, p, u, d, n, r, e, re, a)
ON CONFLICT (id, queue) DO UPDATE SET
	batch_id = CASE WHEN `+newer+` OR `+leftOut+` OR `+republished+` THEN '' ELSE l.batch_id END,
	published_at = CASE WHEN `+republished+` THEN excluded.published_at ELSE LEAST(l.published_at, excluded.published_at) END,
	`+stateSet("l", "("+newer+" OR "+republished+")")+`
WHERE `+newer+` OR `+leftOut+` OR `+republished+` OR excluded.published_at < l.published_at`,
		c.queues, ids, c.states, c.published, c.updated, c.dues, c.nodes, c.runs, c.errs, c.reasons, idAt)
}

// batchKey names a batch.
type batchKey struct{ queue, id string }

// batchRow is what a grouped write knows of one batch: its newest event, its earliest
// publish time, and the ids of the events that attach messages to it.
type batchRow struct {
	key      batchKey
	ev       core.BatchEvent // the newest event
	pub      time.Time       // the earliest publish time of its events
	attach   []string        // the ids to attach (the longest list of its events)
	attachAt time.Time       // the newest event's time
	attachS  core.MessageState
	attachD  time.Time
	attached bool // this write attaches its messages (queueAttach)
	span     idSpan
}

// batchRows folds the events with a batch id into one row per batch, sorted by queue and id.
func batchRows(events []core.BatchEvent) []*batchRow {
	var (
		index map[batchKey]*batchRow
		out   []*batchRow
	)
	for _, ev := range events {
		if ev.BatchID == "" {
			continue
		}
		if index == nil {
			index = map[batchKey]*batchRow{}
		}
		pub := ev.PublishedAt
		if pub.IsZero() {
			pub = ev.UpdatedAt
		}
		k := batchKey{ev.Queue, ev.BatchID}
		r := index[k]
		if r == nil {
			r = &batchRow{key: k, ev: ev, pub: pub}
			index[k] = r
			out = append(out, r)
		} else {
			if !ev.UpdatedAt.Before(r.ev.UpdatedAt) {
				r.ev = ev
			}
			if pub.Before(r.pub) {
				r.pub = pub
			}
		}
		if len(ev.IDs) >= len(r.attach) {
			r.attach = ev.IDs
			if ev.UpdatedAt.After(r.attachAt) {
				r.attachAt, r.attachS, r.attachD = ev.UpdatedAt, ev.State, ev.Due
			}
		}
	}
	slices.SortFunc(out, func(a, b *batchRow) int {
		return cmp.Or(cmp.Compare(a.key.queue, b.key.queue), cmp.Compare(a.key.id, b.key.id))
	})
	return out
}

// queueAttach queues the statement that attaches the batches' messages that need a row (see
// idSpan; most need none: their batch's row holds their ids and the span of their times,
// which queueStates writes): rows of another batch (not cancelled) move to this one unless
// they moved later, and the missing rows are inserted (a plain insert: an upsert's speculative
// insertion costs twice the time and more log; two writers inserting one id at once fail the
// group, which the next write takes again). Any event but a publish of a batch this Ledger
// attached already is skipped. It returns the batches it attached (rows or none).
func (l *Ledger) queueAttach(b *pgx.Batch, rows []*batchRow) []*batchRow {
	var (
		done []*batchRow
		a    attachArgs
	)
	for _, r := range rows {
		if len(r.attach) == 0 {
			continue
		}
		switch r.attachS {
		case core.StateOutbox, core.StateQueued, core.StateDelayed:
		default:
			if l.attached.has(r.key, len(r.attach)) {
				continue
			}
		}
		r.span = spanOf(r.attach)
		if len(r.span.rows) > 0 {
			a.add(r)
		}
		r.attached = true
		done = append(done, r)
	}
	if len(a.queues) == 0 {
		return done
	}
	// The messages joined with their batch's values: ids and their batch's ordinal, and one
	// entry per batch (fewer parameters to encode than one of each per message).
	// A message in two batches of one write (a batch split by per-message outcomes: the batch
	// and its part) attaches to the newest one only: a statement may insert or change a row
	// once.
	const rowsOf = `(SELECT DISTINCT ON (t.q, m.id) t.q AS queue, m.id, m.a AS id_at, t.b AS batch_id, t.s AS state, t.p AS published_at, t.u AS updated_at, t.d AS due
	FROM unnest($1::text[], $2::int[], $9::timestamptz[]) AS m(id, i, a) JOIN unnest($3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[]) WITH ORDINALITY AS t(q, b, s, p, u, d, i) USING (i)
	ORDER BY t.q, m.id, t.u DESC, t.b DESC) AS x`
	// A row moves to the batch unless it was cancelled; a row with a cancel moves only to a
	// later publish of its id (laterPublish), and a cancelled one then follows it: it takes
	// the batch's state and publish time, and keeps the cancel.
	const (
		later = `(l.cancel_at IS NOT NULL AND x.published_at > l.cancel_at AND x.batch_id <> l.cancel_batch)`
		renew = `(l.state = 'cancelled' AND ` + later + `)`
		move  = `(l.batch_id <> x.batch_id AND (l.state <> 'cancelled' AND l.updated_at <= x.updated_at AND (l.cancel_at IS NULL OR ` + later + `) OR ` + renew + `))`
	)
	// One probe per message: the rows found are updated (rarely: a message moving to another
	// batch), the others inserted.
	b.Queue(`WITH x AS (SELECT x.*, EXISTS (SELECT 1 FROM `+l.table+` AS l WHERE l.id = x.id AND l.queue = x.queue) AS found FROM `+rowsOf+`),
u AS (UPDATE `+l.table+` AS l SET
	batch_id = CASE WHEN `+move+` THEN x.batch_id ELSE l.batch_id END,
	updated_at = CASE WHEN `+move+` THEN x.updated_at ELSE l.updated_at END,
	state = CASE WHEN `+renew+` THEN x.state ELSE l.state END,
	due = CASE WHEN `+renew+` THEN x.due ELSE l.due END,
	published_at = CASE WHEN `+renew+` THEN x.published_at ELSE LEAST(l.published_at, x.published_at) END,
	id_at = coalesce(l.id_at, x.id_at)
FROM x WHERE x.found AND l.id = x.id AND l.queue = x.queue AND (`+move+` OR x.published_at < l.published_at))
INSERT INTO `+l.table+` (queue, id, batch_id, state, published_at, updated_at, due, id_at)
SELECT x.queue, x.id, x.batch_id, x.state, x.published_at, x.updated_at, x.due, x.id_at FROM x WHERE NOT x.found`, a.args()...)
	return done
}

// attachArgs are the parameters of one attach statement.
type attachArgs struct {
	queues, batches, states []string
	pubs, ats               []time.Time
	dues                    []*time.Time
	ids                     []string
	of                      []int32
	idAt                    []*time.Time
}

// add appends r's batch and messages.
func (a *attachArgs) add(r *batchRow) {
	a.queues, a.batches, a.states = append(a.queues, r.key.queue), append(a.batches, r.key.id), append(a.states, string(r.attachS))
	a.pubs, a.ats = append(a.pubs, r.pub), append(a.ats, r.attachAt)
	var due *time.Time
	if !r.attachD.IsZero() {
		d := r.attachD
		due = &d
	}
	a.dues = append(a.dues, due)
	for _, id := range r.span.rows {
		a.ids, a.of, a.idAt = append(a.ids, id), append(a.of, int32(len(a.queues))), append(a.idAt, idTime(id))
	}
}

func (a *attachArgs) args() []any {
	return []any{a.ids, a.of, a.queues, a.batches, a.states, a.pubs, a.ats, a.dues, a.idAt}
}

// queueStates queues the upsert of the batches' state rows: a row takes an event that is not
// older than its own; the publish time is the earliest recorded. A batch whose messages this
// write attaches also gets their ids (the longest list recorded stays) and the span of their
// times (idSpan), by which lookups find its messages without a row of their own, and by which
// the pruner deletes the rows of those that have one: an index on the messages' batch would
// cost every message an index entry more.
func (l *Ledger) queueStates(b *pgx.Batch, rows []*batchRow) {
	n := len(rows)
	if n == 0 {
		return
	}
	var (
		c             = newStateCols(n)
		batches, msgs = make([]string, n), make([]int32, n)
		los, his      = make([]*time.Time, n), make([]*time.Time, n)
		ids           = make([]*string, n) // joined by idSep: one string to encode per batch
	)
	for i, r := range rows {
		e := r.ev
		batches[i], msgs[i] = r.key.id, int32(len(e.IDs))
		c.set(i, r.key.queue, e.State, r.pub, e.UpdatedAt, e.Due, e.Node, e.Runs, e.Error, e.Reason)
		if r.attached && !r.span.unlisted {
			joined := strings.Join(r.attach, idSep)
			ids[i] = &joined
			if !r.span.lo.IsZero() {
				los[i], his[i] = &r.span.lo, &r.span.hi
			}
		}
	}
	const (
		take    = `(s.updated_at <= excluded.updated_at)`
		keepIDs = `(excluded.ids IS NULL OR cardinality(excluded.ids) < cardinality(s.ids))`
	)
	b.Queue(`INSERT INTO `+l.states+` AS s (queue, batch_id, state, published_at, updated_at, due, node, runs, error, reason, messages, ids, ids_at)
SELECT t.q, t.b, t.s, t.p, t.u, t.d, t.n, t.r, t.e, t.re, t.m, string_to_array(t.ids, E'\x1f'), CASE WHEN t.ids IS NOT NULL AND t.lo IS NOT NULL THEN tstzrange(t.lo, t.hi, '[]') END
FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::text[], $8::int[], $9::text[], $10::text[], $11::int[], $12::text[], $13::timestamptz[], $14::timestamptz[]) AS t(q, b, s, p, u, d, n, r, e, re, m, ids, lo, hi)
ON CONFLICT (queue, batch_id) DO UPDATE SET
	published_at = LEAST(s.published_at, excluded.published_at),
	`+stateSet("s", take)+`,
	messages = CASE WHEN `+take+` THEN excluded.messages ELSE s.messages END,
	ids = CASE WHEN `+keepIDs+` THEN s.ids ELSE excluded.ids END,
	ids_at = CASE WHEN `+keepIDs+` THEN s.ids_at ELSE excluded.ids_at END
WHERE `+take+` OR excluded.published_at < s.published_at OR excluded.ids IS NOT NULL`,
		c.queues, batches, c.states, c.published, c.updated, c.dues, c.nodes, c.runs, c.errs, c.reasons, msgs, ids, los, his)
}

// write stores events: the statements above in one round trip and one transaction.
func (l *Ledger) write(ctx context.Context, events []core.BatchEvent) error {
	b := &pgx.Batch{}
	l.queueLoose(b, loose(events))
	rows := batchRows(events)
	attached := l.queueAttach(b, rows)
	l.queueStates(b, rows)
	if l.opts.Mode {
		l.batchEvents(b, events)
	}
	if b.Len() == 0 {
		return nil
	}
	// The events were buffered in memory: a crash of this process loses them anyway, so the
	// write need not wait for the log's flush to disk either (a database crash may lose the
	// last fraction of a second of writes, as documented; visibility is at the commit). The
	// statements run behind the plan guard.
	b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: `SELECT set_config('synchronous_commit', 'off', true), set_config('enable_seqscan', 'off', true)`}}, b.QueuedQueries...)
	if err := l.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("txmq ledger: writing %d events to %s and %s: %w", len(events), l.table, l.states, err)
	}
	for _, r := range attached {
		l.attached.add(r.key, len(r.attach))
	}
	return nil
}

// attachedMax bounds the batches an attachedSet remembers; past it, it starts over.
const attachedMax = 1 << 14

// attachedSet remembers the batches whose messages this Ledger attached (with how many ids),
// so that a run's start of a batch published through this process costs no message
// statement. Only the flusher uses it (under flushMu).
type attachedSet struct {
	m map[batchKey]int
}

// has reports whether the batch was attached with at least n ids.
func (s *attachedSet) has(k batchKey, n int) bool {
	got, ok := s.m[k]
	return ok && got >= n
}

// add remembers the batch.
func (s *attachedSet) add(k batchKey, n int) {
	if s.m == nil || len(s.m) >= attachedMax {
		s.m = make(map[batchKey]int, 1024)
	}
	s.m[k] = max(s.m[k], n)
}

// stateCols are the columns of a state, one slice per column, as the grouped writes pass them
// to unnest: the message rows' (queueLoose) and the batch rows' (queueStates).
type stateCols struct {
	queues, states, nodes, errs, reasons []string
	published, updated                   []time.Time
	dues                                 []*time.Time // nil: no due time
	runs                                 []int32
}

// newStateCols returns columns for n rows.
func newStateCols(n int) stateCols {
	return stateCols{
		queues: make([]string, n), states: make([]string, n), nodes: make([]string, n), errs: make([]string, n), reasons: make([]string, n),
		published: make([]time.Time, n), updated: make([]time.Time, n), dues: make([]*time.Time, n), runs: make([]int32, n),
	}
}

// set fills row i.
func (c stateCols) set(i int, queue string, state core.MessageState, published, updated, due time.Time, node string, runs int, errText, reason string) {
	c.queues[i], c.states[i], c.nodes[i], c.errs[i], c.reasons[i] = queue, string(state), node, errText, reason
	c.published[i], c.updated[i], c.runs[i] = published, updated, int32(runs)
	if !due.IsZero() {
		c.dues[i] = &due
	}
}

// stateSet is the SET list by which a row (alias a) of a state upsert takes the event's state
// (the excluded row's) when cond holds; an empty node or error keeps the row's.
func stateSet(a, cond string) string {
	return `state = CASE WHEN ` + cond + ` THEN excluded.state ELSE ` + a + `.state END,
	updated_at = CASE WHEN ` + cond + ` THEN excluded.updated_at ELSE ` + a + `.updated_at END,
	due = CASE WHEN ` + cond + ` THEN excluded.due ELSE ` + a + `.due END,
	node = CASE WHEN ` + cond + ` AND excluded.node <> '' THEN excluded.node ELSE ` + a + `.node END,
	runs = CASE WHEN ` + cond + ` THEN excluded.runs ELSE ` + a + `.runs END,
	error = CASE WHEN ` + cond + ` AND excluded.error <> '' THEN excluded.error ELSE ` + a + `.error END,
	reason = CASE WHEN ` + cond + ` THEN excluded.reason ELSE ` + a + `.reason END`
}

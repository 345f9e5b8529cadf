package appdb

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/sqlread"
)

// The control tables (migration 0002): the queues' pause marks, the schedules' claimed ticks,
// the shared rate buckets and the nodes' heartbeats, each meaning across the processes on the
// file what it means in PostgreSQL's schema (package outbox). SQLite has one writer per file:
// every change is a BEGIN IMMEDIATE transaction (Dialect.write: run again after lock
// contention, errors classified), so a bucket's read-refill-take or a tick's claim is never
// interleaved with another process's. Times are the machine's clock in microseconds, as the
// outbox's (every process on the file runs on its machine).

var _ outbox.ControlDialect = (*Dialect)(nil)

// PauseTable implements outbox.ControlDialect (table txmq_paused).
func (d *Dialect) PauseTable() outbox.PauseTable { return pauseTable{d} }

// TickTable implements outbox.ControlDialect (tables txmq_schedule_ticks, txmq_schedules).
func (d *Dialect) TickTable() outbox.TickTable { return tickTable{d} }

// RateTable implements outbox.ControlDialect (table txmq_rate_buckets).
func (d *Dialect) RateTable() outbox.RateTable { return rateTable{d} }

// NodeTable implements outbox.ControlDialect (table txmq_nodes).
func (d *Dialect) NodeTable() outbox.NodeTable { return nodeTable{d} }

// exec runs one statement in a write transaction of its own.
func (d *Dialect) exec(ctx context.Context, op, q string, args ...any) error {
	return d.write(ctx, op, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, q, args...)
		return err
	})
}

// read runs fn (reads on the *sql.DB: WAL, no lock), again after lock contention; its error
// is classified with op.
func (d *Dialect) read(ctx context.Context, op string, fn func() error) error {
	return classify(op, withBusyRetry(ctx, fn))
}

// pauseTable is the outbox.PauseTable of txmq_paused.
type pauseTable struct{ d *Dialect }

// Pause implements outbox.PauseTable: a queue already paused keeps its first mark.
func (p pauseTable) Pause(ctx context.Context, queue, by string) error {
	return p.d.exec(ctx, "pausing queue "+queue, `INSERT INTO txmq_paused (queue, paused_at, paused_by) VALUES (?, ?, ?)
		ON CONFLICT (queue) DO NOTHING`, queue, now(), by)
}

// Resume implements outbox.PauseTable.
func (p pauseTable) Resume(ctx context.Context, queue string) error {
	return p.d.exec(ctx, "resuming queue "+queue, `DELETE FROM txmq_paused WHERE queue = ?`, queue)
}

// PausedQueues implements outbox.PauseTable.
func (p pauseTable) PausedQueues(ctx context.Context) ([]outbox.PausedQueue, error) {
	var out []outbox.PausedQueue
	err := p.d.read(ctx, "reading paused queues", func() error {
		var err error
		out, err = sqlread.PausedQueues(ctx, p.d.db, "txmq_paused")
		return err
	})
	return out, err
}

// tickTable is the outbox.TickTable of txmq_schedule_ticks and txmq_schedules.
type tickTable struct{ d *Dialect }

// InTickTx implements outbox.TickTable: a transaction of the app's *sql.DB (BEGIN IMMEDIATE
// through OpenDB's _txlock=immediate: it holds the file's writer from its start, so claimers
// of one tick in several processes run one after the other, and the later ones find the
// first's claim committed). It runs again from the start after lock contention (the writer
// held past busy_timeout); fn's own error is returned as is.
func (t tickTable) InTickTx(ctx context.Context, fn func(ctx context.Context, tx outbox.TickTx) error) error {
	var fnErr error
	err := withBusyRetry(ctx, func() error {
		fnErr = nil
		tx, err := t.d.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(ctx, tickTx{tx: tx}); err != nil {
			_ = tx.Rollback()
			if busy(err) {
				return err // run again
			}
			fnErr = err
			return nil
		}
		return tx.Commit()
	})
	if fnErr != nil {
		return fnErr
	}
	return classify("claiming a schedule tick", err)
}

// tickTx is the outbox.TickTx of InTickTx.
type tickTx struct{ tx *sql.Tx }

// Tx implements outbox.TickTx.
func (t tickTx) Tx() *sql.Tx { return t.tx }

// Claim implements outbox.TickTx: the primary key (schedule, tick) admits a tick once; an
// insert that finds it reports false.
func (t tickTx) Claim(ctx context.Context, schedule string, tick time.Time) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO txmq_schedule_ticks (schedule, tick, claimed_at) VALUES (?, ?, ?)
		ON CONFLICT (schedule, tick) DO NOTHING`, schedule, tick.UnixMicro(), now())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Record implements outbox.TickTx (the last tick never moves back).
func (t tickTx) Record(ctx context.Context, schedule, queue string, tick, next time.Time) error {
	var nextArg any
	if !next.IsZero() {
		nextArg = next.UnixMicro()
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO txmq_schedules (schedule, queue, last_tick, next_tick, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (schedule) DO UPDATE SET queue = excluded.queue, last_tick = max(last_tick, excluded.last_tick),
			next_tick = excluded.next_tick, updated_at = excluded.updated_at`,
		schedule, queue, tick.UnixMicro(), nextArg, now())
	return err
}

// LastTick implements outbox.TickTable.
func (t tickTable) LastTick(ctx context.Context, schedule string) (time.Time, error) {
	var last time.Time
	err := t.d.read(ctx, "reading the last tick of schedule "+schedule, func() error {
		var err error
		last, err = sqlread.LastTick(ctx, t.d.db, "txmq_schedules", schedule)
		return err
	})
	return last, err
}

// Recent implements outbox.TickTable.
func (t tickTable) Recent(ctx context.Context, schedule string, n int) ([]time.Time, error) {
	var out []time.Time
	err := t.d.read(ctx, "reading the recent ticks of schedule "+schedule, func() error {
		var err error
		out, err = sqlread.RecentTicks(ctx, t.d.db, "txmq_schedule_ticks", schedule, n)
		return err
	})
	return out, err
}

// Schedules implements outbox.TickTable.
func (t tickTable) Schedules(ctx context.Context) ([]outbox.ScheduleRow, error) {
	var out []outbox.ScheduleRow
	err := t.d.read(ctx, "listing schedules", func() error {
		var err error
		out, err = sqlread.Schedules(ctx, t.d.db, "txmq_schedules")
		return err
	})
	return out, err
}

// Prune implements outbox.TickTable (a range of the primary key).
func (t tickTable) Prune(ctx context.Context, schedule string, before time.Time) error {
	return t.d.exec(ctx, "deleting old ticks of schedule "+schedule,
		`DELETE FROM txmq_schedule_ticks WHERE schedule = ? AND tick < ?`, schedule, before.UnixMicro())
}

// rateTable is the outbox.RateTable of txmq_rate_buckets.
type rateTable struct{ d *Dialect }

// refill reads queue's bucket in c's write transaction and returns its tokens refilled up to
// at (at most burst; a new bucket is full) and the time it is then at (never moved back).
func refill(ctx context.Context, c *sql.Conn, queue string, burst int, perSecond float64, at int64) (tokens float64, updated int64, found bool, err error) {
	err = c.QueryRowContext(ctx, `SELECT tokens, updated_at FROM txmq_rate_buckets WHERE queue = ?`, queue).Scan(&tokens, &updated)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return float64(burst), at, false, nil
	case err != nil:
		return 0, 0, false, err
	}
	if at > updated {
		tokens += float64(at-updated) * perSecond / 1e6
		updated = at
	}
	return math.Min(float64(burst), tokens), updated, true, nil
}

// Take implements outbox.RateTable: the bucket is read, refilled, taken from and written in
// one write transaction, which no other process's interleaves.
func (r rateTable) Take(ctx context.Context, queue string, want, burst int, perSecond float64) (got int, left float64, err error) {
	err = r.d.write(ctx, "taking rate-limit tokens of queue "+queue, func(c *sql.Conn) error {
		tokens, updated, _, err := refill(ctx, c, queue, burst, perSecond, now())
		if err != nil {
			return err
		}
		got = min(want, int(math.Floor(tokens)))
		left = tokens - float64(got)
		_, err = c.ExecContext(ctx, `INSERT INTO txmq_rate_buckets (queue, tokens, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (queue) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`, queue, left, updated)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return got, left, nil
}

// Return implements outbox.RateTable (a bucket not taken from yet is full: nothing to do).
func (r rateTable) Return(ctx context.Context, queue string, n, burst int, perSecond float64) error {
	return r.d.write(ctx, "giving back rate-limit tokens of queue "+queue, func(c *sql.Conn) error {
		tokens, updated, found, err := refill(ctx, c, queue, burst, perSecond, now())
		if err != nil || !found {
			return err
		}
		_, err = c.ExecContext(ctx, `UPDATE txmq_rate_buckets SET tokens = ?, updated_at = ? WHERE queue = ?`,
			math.Min(float64(burst), tokens+float64(n)), updated, queue)
		return err
	})
}

// nodeTable is the outbox.NodeTable of txmq_nodes.
type nodeTable struct{ d *Dialect }

// Beat implements outbox.NodeTable: the node's row, then the rows older than retention
// (through the last_seen index), in one write transaction.
func (n nodeTable) Beat(ctx context.Context, row outbox.NodeRow, retention time.Duration) error {
	b := row.Beat
	return n.d.write(ctx, "writing the heartbeat of node "+b.Node, func(c *sql.Conn) error {
		at := now()
		if _, err := c.ExecContext(ctx, `INSERT INTO txmq_nodes (node, queues, version, started_at, every_ms, last_seen, stopped)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (node) DO UPDATE SET queues = excluded.queues, version = excluded.version, started_at = excluded.started_at,
				every_ms = excluded.every_ms, last_seen = excluded.last_seen, stopped = excluded.stopped`,
			b.Node, row.QueuesJSON, b.Version, b.StartedAt.UnixMicro(), b.Every.Milliseconds(), at, b.Stopped); err != nil {
			return err
		}
		_, err := c.ExecContext(ctx, `DELETE FROM txmq_nodes WHERE last_seen < ?`, at-retention.Microseconds())
		return err
	})
}

// List implements outbox.NodeTable.
func (n nodeTable) List(ctx context.Context) ([]outbox.NodeRow, time.Time, error) {
	var out []outbox.NodeRow
	var at time.Time
	err := n.d.read(ctx, "reading node heartbeats", func() error {
		at = time.UnixMicro(now())
		var err error
		out, err = sqlread.Nodes(ctx, n.d.db, "txmq_nodes")
		return err
	})
	return out, at, err
}

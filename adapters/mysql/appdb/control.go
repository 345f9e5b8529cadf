package appdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/adapters/mysql/internal/myerr"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlcall"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/sqlread"
)

// The control tables (migration 0002): the queues' pause marks, the schedules' claimed ticks,
// the shared rate buckets and the nodes' heartbeats, each the same table and the same meaning
// across the nodes of the app as in PostgreSQL's schema (package outbox). Every statement runs
// through one sqlcall.Runner: bounded by controlTimeout, run again while InnoDB picks it as a
// deadlock victim or its lock wait times out, and its error classified here (unreachable or
// refusing work: core.ErrBackendUnavailable).

var _ outbox.ControlDialect = (*Dialect)(nil)

// controlTimeout bounds each call on the control tables (every try of it). A tick's claim
// runs its messages' inserts in the same transaction; the callers bound their calls tighter
// (a rate-limit take: 5 s, a tick: 30 s).
const controlTimeout = 30 * time.Second

// controlTries is how many times a call on the control tables runs while its transaction is
// rolled back as a deadlock victim or after a lock wait timeout (the ticks of one schedule
// claimed at once by several nodes, the first inserts of a bucket or a schedule row).
const controlTries = 5

// erDupEntry is the server's duplicate-key error (a tick claimed before).
const erDupEntry = 1062

// newControlRunner returns the runner of the control tables' calls.
func newControlRunner() *sqlcall.Runner {
	return &sqlcall.Runner{
		Name: "mysql appdb", Timeout: controlTimeout, Retryable: myerr.Retryable, Tries: controlTries,
		Classify: classify, Unavailable: myerr.Unavailable, Closed: new(atomic.Bool),
	}
}

// classify is the one place the control tables' errors are sorted: the database unreachable
// or refusing work for a while is wrapped in core.ErrBackendUnavailable, any other error
// named with op only.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if myerr.Unavailable(err) {
		return fmt.Errorf("mysql appdb: %s: the app database is unreachable or refusing work: %w: %w", op, core.ErrBackendUnavailable, err)
	}
	return fmt.Errorf("mysql appdb: %s: %w", op, err)
}

// PauseTable implements outbox.ControlDialect (table txmq_paused).
func (d *Dialect) PauseTable() outbox.PauseTable { return pauseTable{d} }

// TickTable implements outbox.ControlDialect (tables txmq_schedule_ticks, txmq_schedules).
func (d *Dialect) TickTable() outbox.TickTable { return tickTable{d} }

// RateTable implements outbox.ControlDialect (table txmq_rate_buckets).
func (d *Dialect) RateTable() outbox.RateTable { return rateTable{d} }

// NodeTable implements outbox.ControlDialect (table txmq_nodes).
func (d *Dialect) NodeTable() outbox.NodeTable { return nodeTable{d} }

// exec runs one statement through the control runner.
func (d *Dialect) exec(ctx context.Context, op, q string, args ...any) error {
	return d.call.Run(ctx, op, func(ctx context.Context) error {
		_, err := d.db.ExecContext(ctx, q, args...)
		return err
	})
}

// micros is t in microseconds since the Unix epoch (the tables' times).
func micros(t time.Time) int64 { return t.UnixMicro() }

// pauseTable is the outbox.PauseTable of txmq_paused.
type pauseTable struct{ d *Dialect }

// Pause implements outbox.PauseTable: a queue already paused keeps its first mark.
func (p pauseTable) Pause(ctx context.Context, queue, by string) error {
	return p.d.exec(ctx, "pausing queue "+queue, `INSERT INTO `+p.d.q+`txmq_paused (queue, paused_at, paused_by)
		VALUES (?, `+sqlNow+`, ?) ON DUPLICATE KEY UPDATE queue = queue`, queue, by)
}

// Resume implements outbox.PauseTable.
func (p pauseTable) Resume(ctx context.Context, queue string) error {
	return p.d.exec(ctx, "resuming queue "+queue, `DELETE FROM `+p.d.q+`txmq_paused WHERE queue = ?`, queue)
}

// PausedQueues implements outbox.PauseTable.
func (p pauseTable) PausedQueues(ctx context.Context) ([]outbox.PausedQueue, error) {
	var out []outbox.PausedQueue
	err := p.d.call.Run(ctx, "reading paused queues", func(ctx context.Context) error {
		var err error
		out, err = sqlread.PausedQueues(ctx, p.d.db, p.d.q+"txmq_paused")
		return err
	})
	return out, err
}

// tickTable is the outbox.TickTable of txmq_schedule_ticks and txmq_schedules.
type tickTable struct{ d *Dialect }

// InTickTx implements outbox.TickTable: a READ COMMITTED transaction (no gap locks: the ticks
// of other schedules, and the app's inserts, never wait for it), run again from the start when
// InnoDB rolls it back as a deadlock victim (two claimers of a tick whose first claimer rolled
// back both wake to insert it; one of them is the victim, and its next run finds the other's
// claim).
func (t tickTable) InTickTx(ctx context.Context, fn func(ctx context.Context, tx outbox.TickTx) error) error {
	return t.d.call.Run(ctx, "claiming a schedule tick", func(ctx context.Context) error {
		return t.d.inTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tickTx{d: t.d, tx: tx}) })
	})
}

// tickTx is the outbox.TickTx of InTickTx.
type tickTx struct {
	d  *Dialect
	tx *sql.Tx
}

// Tx implements outbox.TickTx.
func (t tickTx) Tx() *sql.Tx { return t.tx }

// Claim implements outbox.TickTx: a plain INSERT, whose duplicate-key error means the tick
// was claimed by a transaction that committed (the insert waits for one still open, and
// inserts when it rolls back). The primary key (schedule, tick) admits a tick once.
func (t tickTx) Claim(ctx context.Context, schedule string, tick time.Time) (bool, error) {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO `+t.d.q+`txmq_schedule_ticks (schedule, tick, claimed_at) VALUES (?, ?, `+sqlNow+`)`,
		schedule, micros(tick))
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == erDupEntry {
		return false, nil
	}
	return err == nil, err
}

// Record implements outbox.TickTx. The assignments read last_tick before it is set (MySQL
// and MariaDB assign left to right).
func (t tickTx) Record(ctx context.Context, schedule, queue string, tick, next time.Time) error {
	var nextArg any
	if !next.IsZero() {
		nextArg = micros(next)
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO `+t.d.q+`txmq_schedules (schedule, queue, last_tick, next_tick, updated_at)
		VALUES (?, ?, ?, ?, `+sqlNow+`)
		ON DUPLICATE KEY UPDATE queue = VALUES(queue), last_tick = GREATEST(last_tick, VALUES(last_tick)),
			next_tick = VALUES(next_tick), updated_at = VALUES(updated_at)`,
		schedule, queue, micros(tick), nextArg)
	return err
}

// LastTick implements outbox.TickTable.
func (t tickTable) LastTick(ctx context.Context, schedule string) (time.Time, error) {
	var last time.Time
	err := t.d.call.Run(ctx, "reading the last tick of schedule "+schedule, func(ctx context.Context) error {
		var err error
		last, err = sqlread.LastTick(ctx, t.d.db, t.d.q+"txmq_schedules", schedule)
		return err
	})
	return last, err
}

// Recent implements outbox.TickTable.
func (t tickTable) Recent(ctx context.Context, schedule string, n int) ([]time.Time, error) {
	var out []time.Time
	err := t.d.call.Run(ctx, "reading the recent ticks of schedule "+schedule, func(ctx context.Context) error {
		var err error
		out, err = sqlread.RecentTicks(ctx, t.d.db, t.d.q+"txmq_schedule_ticks", schedule, n)
		return err
	})
	return out, err
}

// Schedules implements outbox.TickTable.
func (t tickTable) Schedules(ctx context.Context) ([]outbox.ScheduleRow, error) {
	var out []outbox.ScheduleRow
	err := t.d.call.Run(ctx, "listing schedules", func(ctx context.Context) error {
		var err error
		out, err = sqlread.Schedules(ctx, t.d.db, t.d.q+"txmq_schedules")
		return err
	})
	return out, err
}

// Prune implements outbox.TickTable (a range of the primary key).
func (t tickTable) Prune(ctx context.Context, schedule string, before time.Time) error {
	return t.d.exec(ctx, "deleting old ticks of schedule "+schedule,
		`DELETE FROM `+t.d.q+`txmq_schedule_ticks WHERE schedule = ? AND tick < ?`, schedule, micros(before))
}

// rateTable is the outbox.RateTable of txmq_rate_buckets.
type rateTable struct{ d *Dialect }

// refilledSQL is a bucket's tokens refilled up to now (the database's clock at the statement's
// start), at most the burst; its parameters are burst and the rate a second. A statement
// that waited for the row's lock may see a now before the row's updated_at: it then refills
// nothing (never a negative interval), and updated_at never moves back (GREATEST), so no
// interval is refilled twice.
const refilledSQL = `LEAST(?, tokens + GREATEST(0, ` + sqlNow + ` - updated_at) * ? / 1000000)`

// Take implements outbox.RateTable: the bucket's row is inserted full (less what is taken)
// or refilled and taken from in one INSERT ... ON DUPLICATE KEY UPDATE, which holds the row's
// lock until the commit, and read back in the same transaction (MySQL has no RETURNING). The
// assignments are ordered so that each reads the row as it was, whether the server assigns
// left to right (MySQL, MariaDB's default) or all at once (MariaDB's SIMULTANEOUS_ASSIGNMENT):
// last_take and tokens read tokens and updated_at, which are set after them.
func (r rateTable) Take(ctx context.Context, queue string, want, burst int, perSecond float64) (got int, left float64, err error) {
	take := `LEAST(?, FLOOR(` + refilledSQL + `))`
	q := `INSERT INTO ` + r.d.q + `txmq_rate_buckets (queue, tokens, last_take, updated_at)
		VALUES (?, ? - LEAST(?, ?), LEAST(?, ?), ` + sqlNow + `)
		ON DUPLICATE KEY UPDATE
			last_take = ` + take + `,
			tokens = ` + refilledSQL + ` - ` + take + `,
			updated_at = GREATEST(updated_at, ` + sqlNow + `)`
	args := []any{queue, burst, want, burst, want, burst,
		want, burst, perSecond, // last_take
		burst, perSecond, want, burst, perSecond} // tokens
	err = r.d.call.Run(ctx, "taking rate-limit tokens of queue "+queue, func(ctx context.Context) error {
		return r.d.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, `SELECT last_take, tokens FROM `+r.d.q+`txmq_rate_buckets WHERE queue = ?`, queue).Scan(&got, &left)
		})
	})
	if err != nil {
		return 0, 0, err
	}
	return got, left, nil
}

// Return implements outbox.RateTable (tokens is set before updated_at, which it reads).
func (r rateTable) Return(ctx context.Context, queue string, n, burst int, perSecond float64) error {
	return r.d.exec(ctx, "giving back rate-limit tokens of queue "+queue, `UPDATE `+r.d.q+`txmq_rate_buckets SET
		tokens = LEAST(?, `+refilledSQL+` + ?),
		updated_at = GREATEST(updated_at, `+sqlNow+`) WHERE queue = ?`, burst, burst, perSecond, n, queue)
}

// nodeTable is the outbox.NodeTable of txmq_nodes.
type nodeTable struct{ d *Dialect }

// Beat implements outbox.NodeTable: the node's row, then the rows older than retention
// (through the last_seen index), each statement on its own.
func (n nodeTable) Beat(ctx context.Context, row outbox.NodeRow, retention time.Duration) error {
	b := row.Beat
	if err := n.d.exec(ctx, "writing the heartbeat of node "+b.Node, `INSERT INTO `+n.d.q+`txmq_nodes
		(node, queues, version, started_at, every_ms, last_seen, stopped) VALUES (?, ?, ?, ?, ?, `+sqlNow+`, ?)
		ON DUPLICATE KEY UPDATE queues = VALUES(queues), version = VALUES(version), started_at = VALUES(started_at),
			every_ms = VALUES(every_ms), last_seen = VALUES(last_seen), stopped = VALUES(stopped)`,
		b.Node, row.QueuesJSON, b.Version, micros(b.StartedAt), b.Every.Milliseconds(), b.Stopped); err != nil {
		return err
	}
	return n.d.exec(ctx, "deleting old heartbeats", `DELETE FROM `+n.d.q+`txmq_nodes WHERE last_seen < `+sqlNow+` - ?`, retention.Microseconds())
}

// List implements outbox.NodeTable.
func (n nodeTable) List(ctx context.Context) ([]outbox.NodeRow, time.Time, error) {
	var out []outbox.NodeRow
	var now time.Time
	err := n.d.call.Run(ctx, "reading node heartbeats", func(ctx context.Context) error {
		var dbNow int64
		if err := n.d.db.QueryRowContext(ctx, `SELECT `+sqlNow).Scan(&dbNow); err != nil {
			return err
		}
		now = time.UnixMicro(dbNow)
		var err error
		out, err = sqlread.Nodes(ctx, n.d.db, n.d.q+"txmq_nodes")
		return err
	})
	return out, now, err
}

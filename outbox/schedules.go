package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ticks are the claimed ticks of the app's schedules, in the store's schema (tables
// txmq_schedule_ticks and txmq_schedules): each tick of a schedule is claimed once
// cluster-wide, in the transaction that stages its messages in the outbox. Ticks implements
// txmq.TickClaimer (txmq.Open sets NodeOptions.Ticks to it); `txmq schedules` lists them.
// Get them with Store.Ticks. The methods of a nil *Ticks (a nil Store's) return
// ErrNoDatabase. Safe for concurrent use. On a store of another dialect they are that
// database's tables (ControlDialect), and a tick's messages are staged in the claim's
// transaction with WithSQLTx.
type Ticks struct {
	s         *Store // its RunInTx stages a tick's messages with the claim
	ticks     string // quoted table names
	schedules string
	tab       TickTable // set on a store of another dialect: ticks and schedules are unset
}

// Ticks returns the store's schedule ticks; nil for a nil Store.
func (s *Store) Ticks() *Ticks {
	if s == nil {
		return nil
	}
	return s.ticks
}

// newTicks returns the schedule ticks of s, in schema.
func newTicks(s *Store, schema string) *Ticks {
	return &Ticks{s: s,
		ticks:     pgx.Identifier{schema, "txmq_schedule_ticks"}.Sanitize(),
		schedules: pgx.Identifier{schema, "txmq_schedules"}.Sanitize()}
}

// tickRetention is how long claimed ticks are kept (a tick older than that cannot be claimed
// again by a node that comes back late: nodes only claim ticks near their own clock's now).
const tickRetention = 24 * time.Hour

// ClaimTick claims tick of schedule and runs publish in the same transaction, so that the tick
// is published once cluster-wide: it returns true when this call claimed it, false (without
// running publish) when a node did before. It implements txmq.TickClaimer.
func (t *Ticks) ClaimTick(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (bool, error) {
	if t == nil {
		return false, errNoStore("Ticks().ClaimTick")
	}
	if t.tab != nil {
		return t.claimOn(ctx, schedule, queue, tick, next, publish)
	}
	ticks, schedules := t.ticks, t.schedules
	claimed := false
	err := t.s.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO `+ticks+` (schedule, tick) VALUES ($1, $2) ON CONFLICT DO NOTHING`, schedule, tick)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errTickTaken
		}
		if err := publish(ctx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+schedules+` (schedule, queue, last_tick, next_tick) VALUES ($1, $2, $3, $4)
			ON CONFLICT (schedule) DO UPDATE SET queue = $2, last_tick = greatest(`+schedules+`.last_tick, $3), next_tick = $4, updated_at = now()`,
			schedule, queue, tick, nullTime(next)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+ticks+` WHERE schedule = $1 AND tick < $2`, schedule, tick.Add(-tickRetention))
		claimed = true
		return err
	})
	if errors.Is(err, errTickTaken) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("txmq outbox: schedule %q, tick %s: %w", schedule, tick.UTC().Format(time.RFC3339), err)
	}
	return claimed, nil
}

var errTickTaken = errors.New("tick already claimed")

// claimOn is ClaimTick on a TickTable: the claim (a row whose primary key admits the tick
// once), the tick's messages (written into the claim's transaction: WithSQLTx) and the
// schedule's last tick commit together, or not at all. Once committed the relay of this
// store is woken (a pass in the background on a store not started), and the ticks older than
// tickRetention are deleted, apart from the claim (a failure there is logged: the next claim
// deletes them).
func (t *Ticks) claimOn(ctx context.Context, schedule, queue string, tick, next time.Time, publish func(ctx context.Context) error) (bool, error) {
	err := t.tab.InTickTx(ctx, func(ctx context.Context, tx TickTx) error {
		ok, err := tx.Claim(ctx, schedule, tick)
		if err != nil {
			return err
		}
		if !ok {
			return errTickTaken
		}
		if err := publish(t.s.WithSQLTx(ctx, tx.Tx())); err != nil {
			return err
		}
		return tx.Record(ctx, schedule, queue, tick, next)
	})
	if errors.Is(err, errTickTaken) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("txmq outbox: schedule %q, tick %s: %w", schedule, tick.UTC().Format(time.RFC3339), err)
	}
	t.s.relayNow()
	if err := t.tab.Prune(ctx, schedule, tick.Add(-tickRetention)); err != nil && ctx.Err() == nil {
		t.s.log.Warn("txmq outbox: deleting old claimed ticks failed; the next claim tries again", "schedule", schedule, "error", err)
	}
	return true, nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// LastTick returns the latest claimed tick of schedule, zero if none. It implements
// txmq.TickClaimer.
func (t *Ticks) LastTick(ctx context.Context, schedule string) (time.Time, error) {
	if t == nil {
		return time.Time{}, errNoStore("Ticks().LastTick")
	}
	if t.tab != nil {
		last, err := t.tab.LastTick(ctx, schedule)
		if err != nil {
			return time.Time{}, fmt.Errorf("txmq outbox: last tick of schedule %q: %w", schedule, err)
		}
		return last, nil
	}
	var last time.Time
	err := t.s.pool.QueryRow(ctx, `SELECT last_tick FROM `+t.schedules+` WHERE schedule = $1`, schedule).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("txmq outbox: last tick of schedule %q: %w", schedule, err)
	}
	return last, nil
}

// ScheduleRow is one schedule as the app database knows it.
type ScheduleRow struct {
	// Schedule and Queue name the schedule and the queue it publishes to.
	Schedule, Queue string
	// LastTick is the latest published tick; NextTick the one after it.
	LastTick, NextTick time.Time
}

// Recent returns the latest n ticks claimed of schedule, newest first (claims are kept a day),
// for the dashboard's tick history.
func (t *Ticks) Recent(ctx context.Context, schedule string, n int) ([]time.Time, error) {
	if t == nil {
		return nil, errNoStore("Ticks().Recent")
	}
	if t.tab != nil {
		list, err := t.tab.Recent(ctx, schedule, n)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: recent ticks of schedule %q: %w", schedule, err)
		}
		return list, nil
	}
	rows, err := t.s.pool.Query(ctx, `SELECT tick FROM `+t.ticks+` WHERE schedule = $1 ORDER BY tick DESC LIMIT $2`, schedule, n)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: recent ticks of schedule %q: %w", schedule, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[time.Time])
}

// Schedules lists the schedules that published at least one tick, by name.
func (t *Ticks) Schedules(ctx context.Context) ([]ScheduleRow, error) {
	if t == nil {
		return nil, errNoStore("Ticks().Schedules")
	}
	if t.tab != nil {
		list, err := t.tab.Schedules(ctx)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: listing schedules: %w", err)
		}
		return list, nil
	}
	rows, err := t.s.pool.Query(ctx, `SELECT schedule, queue, last_tick, coalesce(next_tick, 'epoch') FROM `+t.schedules+` ORDER BY schedule`)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: listing schedules: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduleRow, error) {
		var x ScheduleRow
		err := r.Scan(&x.Schedule, &x.Queue, &x.LastTick, &x.NextTick)
		if x.NextTick.Unix() == 0 {
			x.NextTick = time.Time{}
		}
		return x, err
	})
}

package sqlread

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/txmq/txmq/outbox"
)

// PausedQueues returns the rows of the paused-queues table (txmq_paused).
func PausedQueues(ctx context.Context, q Querier, table string) ([]outbox.PausedQueue, error) {
	return collect(ctx, q, func(rs *sql.Rows) (outbox.PausedQueue, error) {
		var p outbox.PausedQueue
		var at int64
		if err := rs.Scan(&p.Queue, &at, &p.PausedBy); err != nil {
			return p, err
		}
		p.PausedAt = time.UnixMicro(at)
		return p, nil
	}, `SELECT queue, paused_at, paused_by FROM `+table)
}

// LastTick returns the last tick schedule recorded in the schedules table (txmq_schedules),
// the zero time if it has none.
func LastTick(ctx context.Context, q Querier, table, schedule string) (time.Time, error) {
	var us int64
	err := q.QueryRowContext(ctx, `SELECT last_tick FROM `+table+` WHERE schedule = ?`, schedule).Scan(&us)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, err
	}
	return time.UnixMicro(us), nil
}

// RecentTicks returns the n latest ticks of schedule in the ticks table
// (txmq_schedule_ticks), the latest first.
func RecentTicks(ctx context.Context, q Querier, table, schedule string, n int) ([]time.Time, error) {
	return collect(ctx, q, func(rs *sql.Rows) (time.Time, error) {
		var us int64
		err := rs.Scan(&us)
		return time.UnixMicro(us), err
	}, `SELECT tick FROM `+table+` WHERE schedule = ? ORDER BY tick DESC LIMIT ?`, schedule, n)
}

// Schedules returns the rows of the schedules table (txmq_schedules) in schedule order.
func Schedules(ctx context.Context, q Querier, table string) ([]outbox.ScheduleRow, error) {
	return collect(ctx, q, func(rs *sql.Rows) (outbox.ScheduleRow, error) {
		var r outbox.ScheduleRow
		var last int64
		var next sql.NullInt64
		if err := rs.Scan(&r.Schedule, &r.Queue, &last, &next); err != nil {
			return r, err
		}
		r.LastTick = time.UnixMicro(last)
		if next.Valid {
			r.NextTick = time.UnixMicro(next.Int64)
		}
		return r, nil
	}, `SELECT schedule, queue, last_tick, next_tick FROM `+table+` ORDER BY schedule`)
}

// Nodes returns the rows of the heartbeats table (txmq_nodes), the most recently seen first.
func Nodes(ctx context.Context, q Querier, table string) ([]outbox.NodeRow, error) {
	return collect(ctx, q, func(rs *sql.Rows) (outbox.NodeRow, error) {
		var r outbox.NodeRow
		var started, everyMS, seen int64
		if err := rs.Scan(&r.Beat.Node, &r.QueuesJSON, &r.Beat.Version, &started, &everyMS, &seen, &r.Beat.Stopped); err != nil {
			return r, err
		}
		r.Beat.StartedAt, r.Beat.LastSeen = time.UnixMicro(started), time.UnixMicro(seen)
		r.Beat.Every = time.Duration(everyMS) * time.Millisecond
		return r, nil
	}, `SELECT node, queues, version, started_at, every_ms, last_seen, stopped
		FROM `+table+` ORDER BY last_seen DESC, node`)
}

package sqlread

import (
	"context"
	"database/sql"
	"time"

	"github.com/txmq/txmq/outbox"
)

// ListOutbox returns the rows of the outbox table (outbox.InspectDialect.ListOutbox): those
// of f.Queue (any queue if empty) with an id above f.AfterID, at most f.Limit, in id order.
func ListOutbox(ctx context.Context, q Querier, table string, f outbox.OutboxFilter) ([]outbox.OutboxRow, error) {
	where, args := "id > ?", []any{f.AfterID}
	if f.Queue != "" {
		where += " AND queue = ?"
		args = append(args, f.Queue)
	}
	return collect(ctx, q, func(rs *sql.Rows) (outbox.OutboxRow, error) {
		var o outbox.OutboxRow
		var nb, next sql.NullInt64
		var created int64
		if err := rs.Scan(&o.ID, &o.Queue, &o.BatchID, &o.Body, &nb, &o.Exclusive, &created, &o.Attempts, &next, &o.LastError); err != nil {
			return o, err
		}
		o.CreatedAt = time.UnixMicro(created)
		if nb.Valid {
			o.NotBefore = time.UnixMicro(nb.Int64)
		}
		if next.Valid {
			o.NextAttemptAt = time.UnixMicro(next.Int64)
		}
		return o, nil
	}, `SELECT id, queue, batch_id, body, not_before, exclusive, created_at, attempts,
		next_attempt_at, COALESCE(last_error, '') FROM `+table+` WHERE `+where+` ORDER BY id LIMIT ?`, append(args, f.Limit)...)
}

// Backlog returns the outbox table's rows per queue (outbox.InspectDialect.Backlog): how
// many, how many have failed, the oldest's creation and age. now is the SQL expression of
// the current time in microseconds, with its arguments (the database's clock, or a
// parameter).
func Backlog(ctx context.Context, q Querier, table, now string, nowArgs ...any) (map[string]outbox.Backlog, error) {
	type row struct {
		queue string
		b     outbox.Backlog
	}
	rows, err := collect(ctx, q, func(rs *sql.Rows) (row, error) {
		var r row
		var oldest, age int64
		if err := rs.Scan(&r.queue, &r.b.Rows, &r.b.Failing, &oldest, &age); err != nil {
			return r, err
		}
		r.b.Oldest, r.b.OldestAge = time.UnixMicro(oldest), time.Duration(age)*time.Microsecond
		return r, nil
	}, `SELECT queue, COUNT(*), SUM(attempts > 0), MIN(created_at), `+now+` - MIN(created_at)
		FROM `+table+` GROUP BY queue`, nowArgs...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]outbox.Backlog, len(rows))
	for _, r := range rows {
		out[r.queue] = r.b
	}
	return out, nil
}

// DeadLetterCounts returns the dead letters not replayed per queue of the dead-letter table
// (outbox.InspectDialect.DeadLetterCounts); a queue whose dead letters were all replayed
// counts 0.
func DeadLetterCounts(ctx context.Context, q Querier, table string) (map[string]int64, error) {
	type row struct {
		queue string
		n     int64
	}
	rows, err := collect(ctx, q, func(rs *sql.Rows) (row, error) {
		var r row
		return r, rs.Scan(&r.queue, &r.n)
	}, `SELECT queue, SUM(replayed_at IS NULL) FROM `+table+` GROUP BY queue`)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.queue] = r.n
	}
	return out, nil
}

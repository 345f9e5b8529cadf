package appdb

import (
	"context"
	"database/sql"
	"time"

	"github.com/txmq/txmq/outbox"
)

var _ outbox.InspectDialect = (*Dialect)(nil)

// ListOutbox implements outbox.InspectDialect.
func (d *Dialect) ListOutbox(ctx context.Context, f outbox.OutboxFilter) ([]outbox.OutboxRow, error) {
	where, args := "id > ?", []any{f.AfterID}
	if f.Queue != "" {
		where += " AND queue = ?"
		args = append(args, f.Queue)
	}
	rs, err := d.db.QueryContext(ctx, `SELECT id, queue, batch_id, body, not_before, exclusive, created_at, attempts,
		next_attempt_at, COALESCE(last_error, '') FROM `+outboxTable+` WHERE `+where+` ORDER BY id LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []outbox.OutboxRow
	for rs.Next() {
		var o outbox.OutboxRow
		var nb, next sql.NullInt64
		var created int64
		if err := rs.Scan(&o.ID, &o.Queue, &o.BatchID, &o.Body, &nb, &o.Exclusive, &created, &o.Attempts, &next, &o.LastError); err != nil {
			return nil, err
		}
		o.CreatedAt = time.UnixMicro(created)
		if nb.Valid {
			o.NotBefore = time.UnixMicro(nb.Int64)
		}
		if next.Valid {
			o.NextAttemptAt = time.UnixMicro(next.Int64)
		}
		out = append(out, o)
	}
	return out, rs.Err()
}

// Backlog implements outbox.InspectDialect.
func (d *Dialect) Backlog(ctx context.Context) (map[string]outbox.Backlog, error) {
	rs, err := d.db.QueryContext(ctx, `SELECT queue, COUNT(*), SUM(attempts > 0), MIN(created_at), ? - MIN(created_at)
		FROM `+outboxTable+` GROUP BY queue`, now())
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]outbox.Backlog{}
	for rs.Next() {
		var q string
		var b outbox.Backlog
		var oldest, age int64
		if err := rs.Scan(&q, &b.Rows, &b.Failing, &oldest, &age); err != nil {
			return nil, err
		}
		b.Oldest, b.OldestAge = time.UnixMicro(oldest), time.Duration(age)*time.Microsecond
		out[q] = b
	}
	return out, rs.Err()
}

// DeadLetterCounts implements outbox.InspectDialect.
func (d *Dialect) DeadLetterCounts(ctx context.Context) (map[string]int64, error) {
	rs, err := d.db.QueryContext(ctx, `SELECT queue, SUM(replayed_at IS NULL) FROM `+deadTable+` GROUP BY queue`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]int64{}
	for rs.Next() {
		var q string
		var n int64
		if err := rs.Scan(&q, &n); err != nil {
			return nil, err
		}
		out[q] = n
	}
	return out, rs.Err()
}

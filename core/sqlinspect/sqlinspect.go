package sqlinspect

import (
	"database/sql"
	"math"
	"time"

	"github.com/txmq/txmq/core"
)

// HeldAt is the run_at of a row held behind the first row of its ordering key: never due.
const HeldAt = math.MaxInt64

// Row is one row of the jobs table as an inspect page reads it. Times are microseconds since
// the Unix epoch.
type Row struct {
	// ID is the row's id, the second half of its position.
	ID int64
	// Batch holds the batch's ID, Body and Deliveries.
	Batch core.StoredBatch
	// RunAt is when the row is due, or its lease ends when Leased (HeldAt: held behind its
	// key).
	RunAt int64
	// DueAt is the due time of a row held behind its key, if it has one.
	DueAt sql.NullInt64
	// Leased reports that a claim holds a lease token on the row.
	Leased bool
	// Now is the clock the page was read at.
	Now int64
}

// Stored returns the row as a stored batch of queue: in flight under a lease not ended,
// delayed while held or not due (due at its due time, if any), otherwise ready. Its body is
// a copy.
func (r *Row) Stored(queue string) core.StoredBatch {
	s := core.StoredBatch{Queue: queue, ID: r.Batch.ID, Body: append([]byte(nil), r.Batch.Body...), Deliveries: r.Batch.Deliveries, State: core.BatchReady}
	held := r.RunAt == HeldAt
	switch {
	case r.Leased && !held && r.RunAt > r.Now:
		s.State = core.BatchInFlight
	case held || r.RunAt > r.Now:
		s.State = core.BatchDelayed
		if r.DueAt.Valid {
			s.Due = time.UnixMicro(r.DueAt.Int64)
		} else if !held {
			s.Due = time.UnixMicro(r.RunAt)
		}
	}
	return s
}

// Walk calls fn for each batch of queue, in position order, reading pages of up to limit
// rows with page: the rows after the position (afterAt, afterID), the run_at and id of the
// last row of the page before (the smallest BIGINT and 0 at first). It reports false when fn
// asked to stop, true when the queue's rows ran out, and page's error as is.
func Walk(queue string, limit int, page func(afterAt, afterID int64) ([]Row, error), fn func(core.StoredBatch) bool) (bool, error) {
	afterAt, afterID := int64(math.MinInt64), int64(0)
	for {
		rows, err := page(afterAt, afterID)
		if err != nil {
			return false, err
		}
		for i := range rows {
			if !fn(rows[i].Stored(queue)) {
				return false, nil
			}
		}
		if len(rows) < limit {
			return true, nil
		}
		last := rows[len(rows)-1]
		afterAt, afterID = last.RunAt, last.ID
	}
}

package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// Stats are a Backend's counters since it was made.
type Stats struct {
	// Reaped counts abandoned batches handed to Options.DeadLetters and deleted.
	Reaped int64
	// Abandoned is how many abandoned batches the last reaper run found and left in place
	// (no DeadLetters sink, or the sink failed).
	Abandoned int64
	// ReapRuns counts reaper runs, failed ones included.
	ReapRuns int64
}

type stats struct {
	reaped, abandoned, runs atomic.Int64
}

// Stats returns the Backend's counters.
func (be *Backend) Stats() Stats {
	return Stats{Reaped: be.stats.reaped.Load(), Abandoned: be.stats.abandoned.Load(), ReapRuns: be.stats.runs.Load()}
}

// ReapResult is what one reaper run did.
type ReapResult struct {
	// Queues are the abandoned queues found: no node fetched them within AbandonedAfter.
	Queues []string
	// Reaped is how many batches went to the DeadLetters sink and were deleted.
	Reaped int
	// LeftInPlace is how many abandoned batches stayed (no sink, or the sink failed).
	LeftInPlace int
	// ExpiredIDs is how many message ids whose dedup window had passed were deleted.
	ExpiredIDs int64
}

// sqlReapQueues lists the queues that have batches (a loose index scan of the claim index)
// and no fetch heartbeat younger than $1 µs.
const sqlReapQueues = `
SELECT q.queue, h.last_fetch_at
FROM (SELECT DISTINCT queue FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)) q
LEFT JOIN {{s}}txmq_jobs_queues h ON h.queue = q.queue
WHERE h.last_fetch_at IS NULL OR h.last_fetch_at < {{now}} - ?`

// sqlReapPick locks up to $3 batches of queue $1 older than $2 µs that are not in flight, in
// claim index order.
const sqlReapPick = `
SELECT id, batch_id, body, deliveries, messages, order_key, run_at = 9223372036854775807
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND created_at < {{now}} - ? AND (lease_token IS NULL OR run_at <= {{now}})
ORDER BY run_at LIMIT ?
FOR UPDATE SKIP LOCKED`

// sqlReapCount counts the batches of queue $1 older than $2 µs that are not in flight.
const sqlReapCount = `
SELECT COUNT(*) FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND created_at < {{now}} - ? AND (lease_token IS NULL OR run_at <= {{now}})`

// reapLoop runs Reap now and then every ReapInterval until Close.
func (be *Backend) reapLoop() {
	defer be.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-be.done
		cancel()
	}()
	t := time.NewTicker(be.o.ReapInterval)
	defer t.Stop()
	for {
		if _, err := be.Reap(ctx); err != nil && ctx.Err() == nil {
			be.o.Logger.Warn("mysql: reaper run failed; it runs again at the next interval", "interval", be.o.ReapInterval, "error", err)
		}
		select {
		case <-be.done:
			return
		case <-t.C:
		}
	}
}

// Reap deletes the message ids whose dedup window has passed (see DedupIDs), in pages of
// ReapBatch, and runs the abandoned-queue reaper once (the Backend also runs it when made and
// every ReapInterval). A queue is abandoned when it has batches and no Backend on this schema
// has fetched it within AbandonedAfter; its batches older than AbandonedAfter and not in
// flight are handed to Options.DeadLetters (reason ReasonAbandoned) and then deleted, in
// transactions of ReapBatch that lock their rows, so concurrent reapers on several nodes
// never hand out one batch twice. Without a sink they are left in place, logged and counted.
// Batches are never deleted without reaching a sink first.
func (be *Backend) Reap(ctx context.Context) (ReapResult, error) {
	var res ReapResult
	if err := be.usable("reap"); err != nil {
		return res, err
	}
	be.stats.runs.Add(1)
	var err error
	if res.ExpiredIDs, err = be.pruneIDs(ctx); err != nil {
		return res, err
	}
	type abandoned struct {
		queue string
		last  sql.NullInt64
	}
	var found []abandoned
	err = be.run(ctx, "reaper: listing abandoned queues", func(ctx context.Context) error {
		found = found[:0]
		var a abandoned
		rows, err := be.db.QueryContext(ctx, be.sql.reapQueues, micros(be.o.AbandonedAfter))
		return eachRow(rows, err, []any{&a.queue, &a.last}, func() error { found = append(found, a); return nil })
	})
	if err != nil {
		return res, err
	}
	for _, a := range found {
		res.Queues = append(res.Queues, a.queue)
		last := "never"
		if a.last.Valid {
			last = time.UnixMicro(a.last.Int64).UTC().Format(time.RFC3339)
		}
		reaped, left, err := be.reapQueue(ctx, a.queue)
		res.Reaped += reaped
		res.LeftInPlace += left
		if reaped > 0 {
			be.o.Logger.Warn("mysql: dead-lettered batches of an abandoned queue", "queue", a.queue, "batches", reaped, "last_fetch", last, "abandoned_after", be.o.AbandonedAfter, "reason", ReasonAbandoned)
		}
		if left > 0 {
			be.o.Logger.Warn("mysql: abandoned queue: no node has fetched it, batches left in place; listen to the queue, or set Options.DeadLetters to move them to the dead letters", "queue", a.queue, "batches", left, "last_fetch", last, "abandoned_after", be.o.AbandonedAfter)
		}
		if err != nil {
			be.stats.abandoned.Store(int64(res.LeftInPlace))
			return res, err
		}
	}
	be.stats.abandoned.Store(int64(res.LeftInPlace))
	return res, nil
}

// reapCount counts what the reaper would take of queue.
func (be *Backend) reapCount(ctx context.Context, queue string) (int, error) {
	var n int
	err := be.run(ctx, fmt.Sprintf("reaper: counting queue %q", queue), func(ctx context.Context) error {
		return be.db.QueryRowContext(ctx, be.sql.reapCount, queue, micros(be.o.AbandonedAfter)).Scan(&n)
	})
	return n, err
}

// reapQueue hands the old batches of one abandoned queue to the sink and deletes them, or
// only counts them when there is no sink. It returns how many were reaped and left.
func (be *Backend) reapQueue(ctx context.Context, queue string) (reaped, left int, err error) {
	if be.o.DeadLetters == nil {
		n, err := be.reapCount(ctx, queue)
		return 0, n, err
	}
	for ctx.Err() == nil {
		var picked, done int
		var wake bool
		err := be.run(ctx, fmt.Sprintf("reaper: dead-lettering queue %q", queue), func(ctx context.Context) error {
			picked, done, wake = 0, 0, false
			return inTx(ctx, be.db, readCommitted, func(tx *sql.Tx) error {
				return be.reapPage(ctx, tx, queue, &picked, &done, &wake)
			})
		})
		if err != nil {
			return reaped, left, err
		}
		if wake {
			be.wake.signal(queue)
		}
		reaped += done
		be.stats.reaped.Add(int64(done))
		if done < picked {
			// The sink failed: count what stays and stop for this run.
			n, _ := be.reapCount(ctx, queue)
			return reaped, n, nil
		}
		if picked < be.o.ReapBatch {
			return reaped, 0, nil
		}
	}
	return reaped, left, ctx.Err()
}

// reapPage locks one page of an abandoned queue's old batches, hands them to the sink in
// order, and deletes those the sink took (making the next row of their keys due).
func (be *Backend) reapPage(ctx context.Context, tx *sql.Tx, queue string, picked, done *int, wake *bool) error {
	type row struct {
		id   int64
		dl   *core.DeadLetter
		key  sql.NullString
		held bool
	}
	var page []row
	var (
		r          row
		dl         core.DeadLetter
		deliveries int
		messages   int
	)
	rows, err := tx.QueryContext(ctx, be.sql.reapPick, queue, micros(be.o.AbandonedAfter), be.o.ReapBatch)
	err = eachRow(rows, err, []any{&r.id, &dl.BatchID, &dl.Body, &deliveries, &messages, &r.key, &r.held}, func() error {
		c := r
		c.dl = &core.DeadLetter{
			Queue: queue, BatchID: dl.BatchID, Body: append([]byte(nil), dl.Body...),
			Reason: ReasonAbandoned, Attempts: deliveries, Messages: messages,
			Error: fmt.Sprintf("mysql: no node fetched queue %q for %v", queue, be.o.AbandonedAfter),
			At:    time.Now(),
		}
		page = append(page, c)
		return nil
	})
	if err != nil {
		return err
	}
	*picked = len(page)
	for _, r := range page {
		if err := be.deadLetter(ctx, r.dl); err != nil {
			be.o.Logger.Error("mysql: the dead-letter sink refused an abandoned batch; it stays in the jobs table", "queue", queue, "batch", r.dl.BatchID, "error", err)
			break
		}
		if _, err := tx.ExecContext(ctx, be.sql.removeRow, r.id); err != nil {
			return err
		}
		if r.key.Valid && !r.held {
			promoted, err := be.promoteNext(ctx, tx, queue, r.key.String, r.id)
			if err != nil {
				return err
			}
			*wake = *wake || promoted
		}
		*done++
	}
	return nil
}

// deadLetter calls the sink, turning a panic into an error.
func (be *Backend) deadLetter(ctx context.Context, d *core.DeadLetter) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("mysql: the dead-letter sink panicked: %v", r)
		}
	}()
	err = be.o.DeadLetters.DeadLetter(ctx, d)
	if errors.Is(err, core.ErrAlreadyDeadLettered) {
		return nil // the sink keeps the first dead letter: the batch is dead-lettered
	}
	return err
}

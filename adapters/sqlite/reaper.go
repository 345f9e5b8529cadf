package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

// Stats are a Backend's reaper counters since it was made.
type Stats = reaper.Stats

// ReapResult is what one reaper run did.
type ReapResult = reaper.Result

// Stats returns the Backend's reaper counters.
func (be *Backend) Stats() Stats { return be.reaper.Stats() }

// sqlReapQueues lists the queues that have batches (a loose index scan of the claim index)
// and no fetch heartbeat younger than :age µs.
const sqlReapQueues = `
WITH RECURSIVE qs(queue) AS (
	SELECT (SELECT MIN(queue) FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx)
	UNION ALL
	SELECT (SELECT MIN(queue) FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx WHERE queue > qs.queue)
	FROM qs WHERE qs.queue IS NOT NULL
)
SELECT qs.queue, h.last_fetch_at
FROM qs LEFT JOIN txmq_jobs_queues h ON h.queue = qs.queue
WHERE qs.queue IS NOT NULL AND (h.last_fetch_at IS NULL OR h.last_fetch_at < :now - :age)`

// sqlReapPick reads up to :limit batches of queue :queue older than :age µs that are not in
// flight, in claim index order (inside the page's transaction, which holds the write lock).
const sqlReapPick = `
SELECT id, batch_id, body, deliveries, messages, order_key, run_at = 9223372036854775807
FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :queue AND created_at < :now - :age AND (lease_token IS NULL OR run_at <= :now)
ORDER BY run_at LIMIT :limit`

// sqlReapCount counts the batches of queue :queue older than :age µs that are not in flight.
const sqlReapCount = `
SELECT COUNT(*) FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :queue AND created_at < :now - :age AND (lease_token IS NULL OR run_at <= :now)`

// newReaper returns the Backend's abandoned-queue reaper (package core/reaper).
func (be *Backend) newReaper() *reaper.Reaper {
	return &reaper.Reaper{
		Name: "sqlite", Store: reapStore{be}, Sink: be.o.DeadLetters,
		AbandonedAfter: be.o.AbandonedAfter, Batch: be.o.ReapBatch, Logger: be.o.Logger,
	}
}

// Reap deletes the message ids whose dedup window has passed (see DedupIDs), in pages of
// ReapBatch, and runs the abandoned-queue reaper once (the Backend also runs it when made and
// every ReapInterval). A queue is abandoned when it has batches and no Backend on this file
// has fetched it within AbandonedAfter; its batches older than AbandonedAfter and not in
// flight are handed to Options.DeadLetters (reason ReasonAbandoned) and then deleted, in
// transactions of ReapBatch, so concurrent reapers in several processes never hand out one
// batch twice. Without a sink they are left in place, logged and counted. Batches are never
// deleted without reaching a sink first.
func (be *Backend) Reap(ctx context.Context) (ReapResult, error) {
	if err := be.usable("reap"); err != nil {
		return ReapResult{}, err
	}
	return be.reaper.Reap(ctx)
}

// reapStore runs the reaper's statements (reaper.Store).
type reapStore struct{ be *Backend }

// PruneIDs deletes expired dedup ids, then the unique keys no batch holds any more.
func (s reapStore) PruneIDs(ctx context.Context) (int64, error) {
	n, err := s.be.pruneIDs(ctx)
	if err != nil {
		return n, err
	}
	k, err := s.be.pruneUnique(ctx)
	return n + k, err
}

func (s reapStore) age() sql.NamedArg { return sql.Named("age", micros(s.be.o.AbandonedAfter)) }

func (s reapStore) Abandoned(ctx context.Context) ([]reaper.Queue, error) {
	var found []reaper.Queue
	err := s.be.run(ctx, "reaper: listing abandoned queues", func(ctx context.Context) error {
		found = found[:0]
		var (
			q    string
			last sql.NullInt64
		)
		rows, err := s.be.db.QueryContext(ctx, sqlReapQueues, nowArg(), s.age())
		return eachRow(rows, err, []any{&q, &last}, func() error {
			a := reaper.Queue{Name: q}
			if last.Valid {
				a.LastFetch = time.UnixMicro(last.Int64)
			}
			found = append(found, a)
			return nil
		})
	})
	return found, err
}

func (s reapStore) Count(ctx context.Context, queue string) (int, error) {
	var n int
	err := s.be.run(ctx, fmt.Sprintf("reaper: counting queue %q", queue), func(ctx context.Context) error {
		return s.be.db.QueryRowContext(ctx, sqlReapCount, nowArg(), sql.Named("queue", queue), s.age()).Scan(&n)
	})
	return n, err
}

// Page reads one page of an abandoned queue's old batches, hands them to give in order, and
// deletes those it took (making the next row of their keys due), in one transaction.
func (s reapStore) Page(ctx context.Context, queue string, give func(*core.DeadLetter) error) (picked, given int, err error) {
	be := s.be
	var wake bool
	err = be.run(ctx, fmt.Sprintf("reaper: dead-lettering queue %q", queue), func(ctx context.Context) error {
		picked, given, wake = 0, 0, false
		return be.inTx(ctx, func(tx execer) error {
			var (
				page                 []reaper.Picked
				id                   int64
				key                  sql.NullString
				held                 bool
				batchID              string
				body                 []byte
				deliveries, messages int
			)
			now := time.Now().UnixMicro()
			rows, err := tx.QueryContext(ctx, sqlReapPick, sql.Named("now", now), sql.Named("queue", queue), s.age(), sql.Named("limit", be.o.ReapBatch))
			err = eachRow(rows, err, []any{&id, &batchID, &body, &deliveries, &messages, &key, &held}, func() error {
				dl := be.reaper.DeadLetter(queue, batchID, append([]byte(nil), body...), deliveries, messages)
				page = append(page, reaper.Picked{ID: id, DeadLetter: dl, Key: key.String, Keyed: key.Valid, Held: held})
				return nil
			})
			if err != nil {
				return err
			}
			picked = len(page)
			given, wake, err = reaper.Give(page, give, func(id int64) error {
				_, err := tx.ExecContext(ctx, sqlRemoveRow, sql.Named("id", id))
				return err
			}, func(key string, id int64) (bool, error) {
				return promoteNext(ctx, tx, queue, key, id, now)
			})
			return err
		})
	})
	if err == nil && wake {
		be.wake.Signal(queue)
	}
	return picked, given, err
}

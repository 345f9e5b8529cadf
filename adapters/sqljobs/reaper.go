package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

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
			be.o.Logger.Warn("sqljobs: reaper run failed; it runs again at the next interval", "interval", be.o.ReapInterval, "error", err)
		}
		select {
		case <-be.done:
			return
		case <-t.C:
		}
	}
}

// Reap deletes the message ids whose dedup window has passed (see DedupIDs), in pages of
// ReapBatch, and runs the abandoned-queue reaper once (the Backend also runs it when made and every
// ReapInterval). A queue is abandoned when it has batches and no Backend on this schema has
// fetched it within AbandonedAfter; its batches older than AbandonedAfter and not in flight
// are handed to Options.DeadLetters (reason ReasonAbandoned) and then deleted, in
// transactions of ReapBatch that lock their rows, so concurrent reapers on several nodes never
// hand out one batch twice. Without a sink they are left in place, logged and counted. Batches
// are never deleted without reaching a sink first.
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
	age := micros(be.o.AbandonedAfter)
	type abandoned struct {
		queue string
		last  *time.Time
	}
	var found []abandoned
	err = be.run(ctx, "reaper: listing abandoned queues", func(ctx context.Context) error {
		found = found[:0]
		rows, err := query(ctx, be.on(be.pool), be.sql.reapQueues, age)
		if err != nil {
			return err
		}
		var a abandoned
		_, err = pgx.ForEachRow(rows, []any{&a.queue, &a.last}, func() error {
			found = append(found, a)
			return nil
		})
		return err
	})
	if err != nil {
		return res, err
	}
	for _, a := range found {
		res.Queues = append(res.Queues, a.queue)
		last := "never"
		if a.last != nil {
			last = a.last.UTC().Format(time.RFC3339)
		}
		reaped, left, err := be.reapQueue(ctx, a.queue)
		res.Reaped += reaped
		res.LeftInPlace += left
		if reaped > 0 {
			be.o.Logger.Warn("sqljobs: dead-lettered batches of an abandoned queue", "queue", a.queue, "batches", reaped, "last_fetch", last, "abandoned_after", be.o.AbandonedAfter, "reason", ReasonAbandoned)
		}
		if left > 0 {
			be.o.Logger.Warn("sqljobs: abandoned queue: no node has fetched it, batches left in place; listen to the queue, or set Options.DeadLetters to move them to the dead letters", "queue", a.queue, "batches", left, "last_fetch", last, "abandoned_after", be.o.AbandonedAfter)
		}
		if err != nil {
			be.stats.abandoned.Store(int64(res.LeftInPlace))
			return res, err
		}
	}
	be.stats.abandoned.Store(int64(res.LeftInPlace))
	return res, nil
}

// reapQueue hands the old batches of one abandoned queue to the sink and deletes them, or
// only counts them when there is no sink. It returns how many were reaped and left.
func (be *Backend) reapQueue(ctx context.Context, queue string) (reaped, left int, err error) {
	age := micros(be.o.AbandonedAfter)
	if be.o.DeadLetters == nil {
		var n int64
		err := be.run(ctx, fmt.Sprintf("reaper: counting queue %q", queue), func(ctx context.Context) error {
			return queryRow(ctx, be.on(be.pool), be.sql.reapCount, []any{queue, age}, &n)
		})
		return 0, int(n), err
	}
	for ctx.Err() == nil {
		var picked, done int
		err := be.run(ctx, fmt.Sprintf("reaper: dead-lettering queue %q", queue), func(ctx context.Context) error {
			picked, done = 0, 0
			return pgx.BeginFunc(ctx, be.pool, func(tx pgx.Tx) error {
				rows, err := query(ctx, be.on(tx), be.sql.reapPick, queue, age, be.o.ReapBatch)
				if err != nil {
					return err
				}
				var batch []*core.DeadLetter
				var ids []int64
				var (
					id         int64
					dl         core.DeadLetter
					deliveries int32
					messages   int32
				)
				_, err = pgx.ForEachRow(rows, []any{&id, &dl.BatchID, &dl.Body, &deliveries, &messages}, func() error {
					d := &core.DeadLetter{
						Queue: queue, BatchID: dl.BatchID, Body: append([]byte(nil), dl.Body...),
						Reason: ReasonAbandoned, Attempts: int(deliveries), Messages: int(messages),
						Error: fmt.Sprintf("sqljobs: no node fetched queue %q for %v", queue, be.o.AbandonedAfter),
						At:    time.Now(),
					}
					batch = append(batch, d)
					ids = append(ids, id)
					return nil
				})
				if err != nil {
					return err
				}
				picked = len(batch)
				var ok []int64
				for i, d := range batch {
					if err := be.deadLetter(ctx, d); err != nil {
						be.o.Logger.Error("sqljobs: the dead-letter sink refused an abandoned batch; it stays in the jobs table", "queue", queue, "batch", d.BatchID, "error", err)
						break
					}
					ok = append(ok, ids[i])
				}
				if len(ok) > 0 {
					if err := execGuarded(ctx, be.on(tx), be.sql.reapDelete, ok); err != nil {
						return err
					}
				}
				done = len(ok)
				return nil
			})
		})
		if err != nil {
			return reaped, left, err
		}
		reaped += done
		be.stats.reaped.Add(int64(done))
		if done < picked {
			// The sink failed: count what stays and stop for this run.
			var n int64
			_ = be.run(ctx, "reaper: counting", func(ctx context.Context) error {
				return queryRow(ctx, be.on(be.pool), be.sql.reapCount, []any{queue, age}, &n)
			})
			return reaped, int(n), nil
		}
		if picked < be.o.ReapBatch {
			return reaped, 0, nil
		}
	}
	return reaped, left, ctx.Err()
}

// deadLetter calls the sink, turning a panic into an error.
func (be *Backend) deadLetter(ctx context.Context, d *core.DeadLetter) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqljobs: the dead-letter sink panicked: %v", r)
		}
	}()
	err = be.o.DeadLetters.DeadLetter(ctx, d)
	if errors.Is(err, core.ErrAlreadyDeadLettered) {
		return nil // the sink keeps the first dead letter: the batch is dead-lettered
	}
	return err
}

// Package reaper is the abandoned-queue reaper the SQL jobs adapters share (sqljobs on
// PostgreSQL, mysql on MySQL/MariaDB, sqlite): what a run does, its logs and its counters,
// over the few statements each adapter supplies (Store). Give is what a page does with the
// batches it picked, for the adapters whose Store.Page runs it row by row (mysql, sqlite).
//
// A queue is abandoned when it has batches and no node has fetched it within AbandonedAfter
// (the adapters record a heartbeat per fetched queue). A run first prunes expired dedup ids,
// then, per abandoned queue, hands its batches older than AbandonedAfter and not in flight to
// the dead-letter sink, in pages that lock their rows, deleting each batch only after the
// sink took it; without a sink, or when the sink fails, they are counted, logged and left in
// place: never deleted silently.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// Store is what an adapter supplies: the statements of a run, each bounded and classified by
// the adapter.
type Store interface {
	// PruneIDs deletes the dedup ids whose window has passed and returns how many.
	PruneIDs(ctx context.Context) (int64, error)
	// Abandoned lists the queues with batches that no node fetched within AbandonedAfter.
	Abandoned(ctx context.Context) ([]Queue, error)
	// Count counts the batches of queue older than AbandonedAfter and not in flight.
	Count(ctx context.Context, queue string) (int, error)
	// Page locks up to one page of those batches (at most Reaper.Batch), in one transaction,
	// calls give for each in order until it returns an error, deletes the batches given (making
	// the next batch of their ordering keys due), commits, and returns how many it locked and
	// how many were given.
	Page(ctx context.Context, queue string, give func(*core.DeadLetter) error) (picked, given int, err error)
}

// Queue is an abandoned queue.
type Queue struct {
	// Name is the queue.
	Name string
	// LastFetch is when a node last fetched it; zero for never.
	LastFetch time.Time
}

// Stats are a reaper's counters since it was made.
type Stats struct {
	// Reaped counts abandoned batches handed to the dead-letter sink and deleted.
	Reaped int64
	// Abandoned is how many abandoned batches the last run found and left in place (no
	// sink, or the sink failed).
	Abandoned int64
	// ReapRuns counts runs, failed ones included.
	ReapRuns int64
}

// Result is what one run did.
type Result struct {
	// Queues are the abandoned queues found: no node fetched them within AbandonedAfter.
	Queues []string
	// Reaped is how many batches went to the dead-letter sink and were deleted.
	Reaped int
	// LeftInPlace is how many abandoned batches stayed (no sink, or the sink failed).
	LeftInPlace int
	// ExpiredIDs is how many message ids whose dedup window had passed were deleted.
	ExpiredIDs int64
}

// Reaper runs reaper runs over a Store. Set its fields before the first run.
type Reaper struct {
	// Name prefixes logs and errors ("sqljobs", "mysql").
	Name string
	// Store runs the statements.
	Store Store
	// Sink receives abandoned batches; nil leaves them in place.
	Sink core.DeadLetterSink
	// AbandonedAfter is how long a queue may go unfetched (for the dead letters' error text
	// and the logs).
	AbandonedAfter time.Duration
	// Batch is the page size (for telling the last page).
	Batch int
	// Logger receives the runs' warnings.
	Logger *slog.Logger

	reaped, abandoned, runs atomic.Int64
}

// Stats returns the reaper's counters.
func (r *Reaper) Stats() Stats {
	return Stats{Reaped: r.reaped.Load(), Abandoned: r.abandoned.Load(), ReapRuns: r.runs.Load()}
}

// Loop runs a run now and then every interval until done is closed; a failed run is logged.
func (r *Reaper) Loop(done <-chan struct{}, interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-done
		cancel()
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.Reap(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn(r.Name+": reaper run failed; it runs again at the next interval", "interval", interval, "error", err)
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// Reap runs once: it prunes expired dedup ids, then dead-letters (or counts) the old batches
// of every abandoned queue.
func (r *Reaper) Reap(ctx context.Context) (Result, error) {
	var res Result
	r.runs.Add(1)
	var err error
	if res.ExpiredIDs, err = r.Store.PruneIDs(ctx); err != nil {
		return res, err
	}
	found, err := r.Store.Abandoned(ctx)
	if err != nil {
		return res, err
	}
	for _, q := range found {
		res.Queues = append(res.Queues, q.Name)
		last := "never"
		if !q.LastFetch.IsZero() {
			last = q.LastFetch.UTC().Format(time.RFC3339)
		}
		reaped, left, err := r.queue(ctx, q.Name)
		res.Reaped += reaped
		res.LeftInPlace += left
		if reaped > 0 {
			r.Logger.Warn(r.Name+": dead-lettered batches of an abandoned queue", "queue", q.Name, "batches", reaped, "last_fetch", last, "abandoned_after", r.AbandonedAfter, "reason", core.ReasonAbandoned)
		}
		if left > 0 {
			r.Logger.Warn(r.Name+": abandoned queue: no node has fetched it, batches left in place; listen to the queue, or set Options.DeadLetters to move them to the dead letters", "queue", q.Name, "batches", left, "last_fetch", last, "abandoned_after", r.AbandonedAfter)
		}
		if err != nil {
			r.abandoned.Store(int64(res.LeftInPlace))
			return res, err
		}
	}
	r.abandoned.Store(int64(res.LeftInPlace))
	return res, nil
}

// queue hands the old batches of one abandoned queue to the sink and deletes them, or only
// counts them when there is no sink. It returns how many were reaped and left.
func (r *Reaper) queue(ctx context.Context, queue string) (reaped, left int, err error) {
	if r.Sink == nil {
		n, err := r.Store.Count(ctx, queue)
		return 0, n, err
	}
	for ctx.Err() == nil {
		picked, given, err := r.Store.Page(ctx, queue, func(d *core.DeadLetter) error {
			if err := r.deadLetter(ctx, d); err != nil {
				r.Logger.Error(r.Name+": the dead-letter sink refused an abandoned batch; it stays in the jobs table", "queue", queue, "batch", d.BatchID, "error", err)
				return err
			}
			return nil
		})
		if err != nil {
			return reaped, left, err
		}
		reaped += given
		r.reaped.Add(int64(given))
		if given < picked {
			// The sink failed: count what stays and stop for this run.
			n, _ := r.Store.Count(ctx, queue)
			return reaped, n, nil
		}
		if picked < r.Batch {
			return reaped, 0, nil
		}
	}
	return reaped, left, ctx.Err()
}

// DeadLetter returns the dead letter of an abandoned batch.
func (r *Reaper) DeadLetter(queue, batchID string, body []byte, deliveries, messages int) *core.DeadLetter {
	return &core.DeadLetter{
		Queue: queue, BatchID: batchID, Body: body,
		Reason: core.ReasonAbandoned, Attempts: deliveries, Messages: messages,
		Error: fmt.Sprintf("%s: no node fetched queue %q for %v", r.Name, queue, r.AbandonedAfter),
		At:    time.Now(),
	}
}

// deadLetter calls the sink, turning a panic into an error.
func (r *Reaper) deadLetter(ctx context.Context, d *core.DeadLetter) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: the dead-letter sink panicked: %v", r.Name, p)
		}
	}()
	err = r.Sink.DeadLetter(ctx, d)
	if errors.Is(err, core.ErrAlreadyDeadLettered) {
		return nil // the sink keeps the first dead letter: the batch is dead-lettered
	}
	return err
}

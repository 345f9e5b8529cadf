package sqljobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/reaper"
)

// Stats are a Backend's reaper counters since it was made.
type Stats = reaper.Stats

// ReapResult is what one reaper run did.
type ReapResult = reaper.Result

// Stats returns the Backend's reaper counters.
func (be *Backend) Stats() Stats { return be.reaper.Stats() }

// newReaper returns the Backend's abandoned-queue reaper (package core/reaper).
func (be *Backend) newReaper() *reaper.Reaper {
	return &reaper.Reaper{
		Name: "sqljobs", Store: reapStore{be}, Sink: be.o.DeadLetters,
		AbandonedAfter: be.o.AbandonedAfter, Batch: be.o.ReapBatch, Logger: be.o.Logger,
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

func (s reapStore) Abandoned(ctx context.Context) ([]reaper.Queue, error) {
	var found []reaper.Queue
	err := s.be.run(ctx, "reaper: listing abandoned queues", func(ctx context.Context) error {
		found = found[:0]
		rows, err := query(ctx, s.be.on(s.be.pool), s.be.sql.reapQueues, micros(s.be.o.AbandonedAfter))
		if err != nil {
			return err
		}
		var (
			q    string
			last *time.Time
		)
		_, err = pgx.ForEachRow(rows, []any{&q, &last}, func() error {
			a := reaper.Queue{Name: q}
			if last != nil {
				a.LastFetch = *last
			}
			found = append(found, a)
			return nil
		})
		return err
	})
	return found, err
}

func (s reapStore) Count(ctx context.Context, queue string) (int, error) {
	var n int64
	err := s.be.run(ctx, fmt.Sprintf("reaper: counting queue %q", queue), func(ctx context.Context) error {
		return queryRow(ctx, s.be.on(s.be.pool), s.be.sql.reapCount, []any{queue, micros(s.be.o.AbandonedAfter)}, &n)
	})
	return int(n), err
}

// Page locks one page of an abandoned queue's old batches, hands them to give in order, and
// deletes those it took (making the next row of their keys due), in one transaction.
func (s reapStore) Page(ctx context.Context, queue string, give func(*core.DeadLetter) error) (picked, given int, err error) {
	be := s.be
	err = be.run(ctx, fmt.Sprintf("reaper: dead-lettering queue %q", queue), func(ctx context.Context) error {
		picked, given = 0, 0
		return pgx.BeginFunc(ctx, be.pool, func(tx pgx.Tx) error {
			rows, err := query(ctx, be.on(tx), be.sql.reapPick, queue, micros(be.o.AbandonedAfter), be.o.ReapBatch)
			if err != nil {
				return err
			}
			var (
				batch                []*core.DeadLetter
				ids                  []int64
				id                   int64
				batchID              string
				body                 []byte
				deliveries, messages int32
			)
			_, err = pgx.ForEachRow(rows, []any{&id, &batchID, &body, &deliveries, &messages}, func() error {
				batch = append(batch, be.reaper.DeadLetter(queue, batchID, append([]byte(nil), body...), int(deliveries), int(messages)))
				ids = append(ids, id)
				return nil
			})
			if err != nil {
				return err
			}
			picked = len(batch)
			var ok []int64
			for i, d := range batch {
				if give(d) != nil {
					break
				}
				ok = append(ok, ids[i])
			}
			if len(ok) > 0 {
				if err := execGuarded(ctx, be.on(tx), be.sql.reapDelete, ok); err != nil {
					return err
				}
			}
			given = len(ok)
			return nil
		})
	})
	return picked, given, err
}

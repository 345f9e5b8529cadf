package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/iddedup"
)

// row is one outbox row on its way to the backend.
type row struct {
	id       int64
	attempts int
	batch    core.OutgoingBatch
	// began is when the RunInTx transaction that inserted the row began (before BEGIN, on
	// this process's monotonic clock), for an after-commit row that may be published without
	// a lease (see mayPublishUnleased); zero for every other row.
	began time.Time
}

// How a row was published, for hooks and logs.
const (
	viaCommit = "commit"
	viaRelay  = "relay"
	viaSweep  = "sweep"
)

// Caps of the error texts stored, in bytes.
const (
	maxErrorText     = 2000     // txmq_outbox.last_error
	maxDeadErrorText = 64 << 10 // txmq_dead_letters.last_error
)

// dbGrace is how long the database work of a page (recording failures, deleting the published
// rows, committing) may take after the page's publish budget (Options.PublishTimeout) ran out.
const dbGrace = 15 * time.Second

// pageContexts returns the contexts of one page: db for its transaction, detached from
// parent's cancellation and bounded by the publish timeout plus dbGrace; pub, a child of db,
// for the publishes, bounded by the publish timeout. A publish that uses up the budget
// therefore still leaves time to record it and to delete the rows published before it.
func (s *Store) pageContexts(parent context.Context) (db, pub context.Context, cancel func()) {
	db, cancelDB := context.WithTimeout(context.WithoutCancel(parent), s.o.PublishTimeout+dbGrace)
	pub, cancelPub := context.WithTimeout(db, s.o.PublishTimeout)
	return db, pub, func() { cancelPub(); cancelDB() }
}

// errorText makes a publish or listener error storable in a text column: valid UTF-8 without
// NUL bytes (PostgreSQL refuses both, and a refused UPDATE would roll a whole page back),
// at most limit bytes, cut on a rune boundary.
func errorText(msg string, limit int) string {
	msg = strings.ToValidUTF8(msg, "\ufffd")
	msg = strings.ReplaceAll(msg, "\x00", "\\x00")
	if len(msg) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return msg
}

// publishOne publishes b to the backend within ctx, even if the backend ignores ctx (the call
// is then abandoned, and may still land: at-least-once), turning a panic into an error, so
// that a misbehaving backend never holds a page's row locks past its budget nor crashes the
// relay.
func (s *Store) publishOne(ctx context.Context, b core.OutgoingBatch) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("txmq outbox: the backend's Publish panicked: %v", r)
			}
		}()
		if b.DedupWindow <= 0 {
			done <- s.backend.Publish(ctx, b)
			return
		}
		// Caller ids that deduplicate: a row published before (its delete lost, a crash, a
		// retried flush) finds its ids held and publishes nothing again.
		_, _, err := iddedup.Publish(ctx, s.backend.Publish, b)
		done <- err
	}()
	select {
	case err := <-done:
		if ue, ok := errors.AsType[*core.UniqueError](err); ok {
			// A unique key held by another batch: nothing stored, and nothing to store
			// later either; the row is done (deleted as published).
			s.log.Info("txmq outbox: unique key held by another batch; the row's message was left out", "queue", ue.Queue, "unique_key", ue.Key, "mode", ue.Mode.String(), "kept_batch", ue.Kept, "batch", b.ID)
			return nil
		}
		return err
	case <-ctx.Done():
		select {
		case err := <-done: // it returned at the deadline
			return err
		default:
		}
		return fmt.Errorf("txmq outbox: the backend's Publish did not return within Options.PublishTimeout (%v); abandoned, the batch may still be published and then be published twice: %w",
			s.o.PublishTimeout, ctx.Err())
	}
}

// publishLocked publishes rows that tx holds locked, deletes the published ones in one
// statement and records failures, all in tx (the caller commits). Publishes run on pub, the
// database work on db (see pageContexts). It stops at the first error wrapping
// core.ErrBackendUnavailable, without counting an attempt, and returns that error as stop.
// A row refused permanently (core.ErrRejected), or failing past Options.MaxAttempts, is
// moved to the dead-letter table in tx, and the rows after it are tried as usual.
// When pub ends, the row in flight counts a failed attempt and the rows after it are left
// untried. tried is how many rows of rows were tried. err is a database error: the caller
// rolls back (published rows are then published again later: at-least-once).
func (s *Store) publishLocked(db, pub context.Context, tx PageTx, rows []row, via string) (published, tried int, stop, err error) {
	ok := make([]int64, 0, len(rows))
	guard, err := s.newOrderGuard(db, tx.KeyIDs, rows)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("txmq outbox: %w", err)
	}
	for _, r := range rows {
		if pub.Err() != nil {
			break // the page's budget is spent: leave the rest untried
		}
		tried++
		if !guard.may(r) {
			s.keyedWaiting.Store(true)
			continue // an earlier row of its key is still waiting: a later pass takes it
		}
		perr := s.publishOne(pub, r.batch)
		if perr == nil {
			guard.done(r)
			ok = append(ok, r.id)
			s.safeHook(func() {
				if s.o.Hooks != nil && s.o.Hooks.Published != nil {
					s.o.Hooks.Published(r.batch.Queue, via)
				}
			})
			continue
		}
		unavailable := errors.Is(perr, core.ErrBackendUnavailable)
		s.safeHook(func() {
			if s.o.Hooks != nil && s.o.Hooks.PublishFailed != nil {
				s.o.Hooks.PublishFailed(r.batch.Queue, via, unavailable)
			}
		})
		if unavailable {
			stop = fmt.Errorf("txmq outbox: publishing row %d (batch %s) of queue %q: %w; stopped, no attempt counted: the rows stay and are retried by the next sweep",
				r.id, r.batch.ID, r.batch.Queue, perr)
			break
		}
		attempts := r.attempts + 1
		if reason := poisonReason(perr, attempts, s.o.MaxAttempts); reason != "" {
			moved, err := s.deadLetterRow(db, tx, r, via, reason, attempts, perr)
			if err != nil {
				return 0, tried, stop, err
			}
			if moved {
				guard.done(r)
				continue
			}
		}
		guard.block(r)
		delay := backoff(s.o.BackoffBase, s.o.BackoffMax, attempts)
		s.log.Warn("txmq outbox: publish failed, row scheduled again",
			"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "via", via, "attempts", attempts, "retry_in", delay, "error", perr)
		if err := tx.Reschedule(db, r.id, errorText(perr.Error(), maxErrorText), delay); err != nil {
			return 0, tried, stop, fmt.Errorf("txmq outbox: recording the failed publish of row %d (queue %q): %w", r.id, r.batch.Queue, err)
		}
	}
	if len(ok) > 0 {
		if err := tx.Delete(db, ok); err != nil {
			return 0, tried, stop, fmt.Errorf("txmq outbox: deleting %d published row(s): %w; they will be published again (at-least-once)", len(ok), err)
		}
	}
	return len(ok), tried, stop, nil
}

// SweepOnce publishes every row that is due now: rows with a next-attempt time in the past,
// and rows without one that are older than Options.RecoveryAge. It claims keyset pages of
// Options.SweepPageSize rows with FOR UPDATE SKIP LOCKED (so concurrent sweepers, on this node
// or others, never publish the same row), publishes each page inside the transaction that
// locked it and deletes the published rows in one statement. A failed row counts an attempt
// and is scheduled with backoff (or moves to the dead-letter table: refused permanently, or
// past Options.MaxAttempts); a backend reported unavailable (core.ErrBackendUnavailable)
// stops the sweep at once, and the returned error wraps it. ctx is checked between pages; each
// page runs detached from ctx, bounded by Options.PublishTimeout.
func (s *Store) SweepOnce(ctx context.Context) (published int, err error) {
	if s == nil {
		return 0, errNoStore("SweepOnce")
	}
	return s.sweep(ctx, viaSweep)
}

func (s *Store) sweep(ctx context.Context, via string) (published int, err error) {
	var after int64
	for {
		if err := ctx.Err(); err != nil {
			return published, err
		}
		n, last, full, err := s.sweepPage(ctx, after, via)
		published += n
		if err != nil || !full {
			return published, err
		}
		after = last
	}
}

// sweepPage claims and publishes one page of due rows with ids above after. full reports a
// complete page (there may be more).
func (s *Store) sweepPage(parent context.Context, after int64, via string) (published int, last int64, full bool, err error) {
	ctx, pub, cancel := s.pageContexts(parent)
	defer cancel()
	var stop error
	err = s.db.ClaimPage(ctx, after, s.o.RecoveryAge, s.o.SweepPageSize, func(tx PageTx, claimedRows []Row) error {
		if len(claimedRows) == 0 {
			if after == 0 {
				s.keyedWaiting.Store(false) // nothing is due: no keyed row waits
			}
			return nil
		}
		page := make([]row, len(claimedRows))
		for i, r := range claimedRows {
			page[i] = claimed(r)
		}
		var tried int
		var err error
		published, tried, stop, err = s.publishLocked(ctx, pub, tx, page, via)
		switch {
		case tried == 0:
		case tried < len(page) && stop == nil:
			// The page's budget ran out: the next page starts after the last row tried.
			last, full = page[tried-1].id, true
		default:
			last, full = page[len(page)-1].id, len(page) == s.o.SweepPageSize
		}
		return err
	})
	if err != nil {
		return 0, last, false, fmt.Errorf("txmq outbox: %s of table %s (rows after id %d) failed and was rolled back; rows stay for the next sweep: %w", via, s.outbox, after, err)
	}
	if stop != nil {
		return published, last, false, stop
	}
	return published, last, full, nil
}

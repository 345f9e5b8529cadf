package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// After-commit publishing. RunInTx hands the rows it just committed to a small bounded set of
// background publishers owned by the Store and returns: the caller never waits for the
// backend (which may hang) nor for the second transaction that deletes the published rows.
// A publisher takes up to afterCommitPage pending rows, of as many transactions as are
// waiting, and publishes them as one page (see publishCommitted). Publishers start on demand
// and exit when nothing is pending, so a store that is never closed leaks no goroutine.
//
// The rows are committed before they are handed over, so whatever happens next (a full
// hand-off queue, a hung or failing backend, Close, a crash) they stay in the outbox table and
// the relay or recovery sweep publishes them (rows without a next-attempt time once they are
// older than Options.RecoveryAge; failed rows on their backoff schedule).

const (
	// afterCommitPublishers is the most pages of committed rows a store publishes at once.
	afterCommitPublishers = 4
	// afterCommitMaxPending is the most rows waiting for a publisher; the rows of a
	// transaction that would exceed it are left to the sweep (a hung backend holds every
	// publisher for up to Options.PublishTimeout).
	afterCommitMaxPending = 10000
	// afterCommitPage is the most rows one publisher claims and publishes in one transaction.
	afterCommitPage = 100
	// afterCommitLogEvery is the least time between two logs of rows left to the sweep.
	afterCommitLogEvery = 10 * time.Second
)

// afterCommit is the hand-off queue of a Store's after-commit publishers.
type afterCommit struct {
	mu      sync.Mutex
	pending []row
	active  int           // running publishers
	idle    chan struct{} // closed when the publishers are done; nil while there is nothing to do
	closed  bool          // Close ran: no more hand-offs
	abandon bool          // Close's ctx ended: publishers leave the pending rows to the sweep
	max     int           // afterCommitMaxPending; tests lower it

	skipped int       // rows left to the sweep since the last log
	logged  time.Time // when that log was last written

	keyed int               // pending rows of ordered queues
	busy  map[orderKey]bool // ordering keys a publisher is publishing rows of
}

// handOff queues rows, which a RunInTx transaction committed, for the after-commit
// publishers. It never blocks: after Close, or when the queue is full, the rows stay in the
// table for the sweep, which is logged (at most every afterCommitLogEvery).
func (s *Store) handOff(rows []row) {
	if len(rows) == 0 {
		return
	}
	a := &s.ac
	a.mu.Lock()
	limit := afterCommitMaxPending
	if a.max > 0 {
		limit = a.max
	}
	if a.closed || (len(a.pending) > 0 && len(a.pending)+len(rows) > limit) {
		a.skipped += len(rows)
		var skipped int
		now := time.Now()
		if now.Sub(a.logged) >= afterCommitLogEvery {
			skipped, a.skipped, a.logged = a.skipped, 0, now
		}
		closed := a.closed
		a.mu.Unlock()
		if skipped > 0 {
			reason := fmt.Sprintf("%d rows are already waiting for the after-commit publishers (a slow or hung backend?)", limit)
			if closed {
				reason = "the store is closed"
			}
			s.log.Warn("txmq outbox: committed rows left in the outbox for the relay and the recovery sweep, not published at once",
				"rows", skipped, "reason", reason, "recovery_age", s.o.RecoveryAge)
		}
		return
	}
	a.pending = append(a.pending, rows...)
	for _, r := range rows {
		if r.batch.Key != "" {
			a.keyed++
		}
	}
	if a.idle == nil {
		a.idle = make(chan struct{})
	}
	start := a.active < afterCommitPublishers
	if start {
		a.active++
	}
	a.mu.Unlock()
	if start {
		go s.publishPending()
	}
}

// publishPending is one after-commit publisher: it publishes pages of pending rows until
// none is left (or Close gave up waiting), then exits.
func (s *Store) publishPending() {
	a := &s.ac
	for {
		a.mu.Lock()
		var page []row
		var mine map[orderKey]bool
		if !a.abandon {
			page, mine = a.takePage()
		}
		if len(page) == 0 {
			// Nothing left, Close gave up, or every pending row waits for an ordering key
			// that another publisher holds (that publisher takes them next).
			left := 0
			if a.abandon {
				left, a.pending, a.keyed = len(a.pending), nil, 0
			}
			a.active--
			if a.active == 0 && a.idle != nil {
				close(a.idle)
				a.idle = nil
			}
			a.mu.Unlock()
			if left > 0 {
				s.log.Warn("txmq outbox: closed before publishing committed rows; they stay in the outbox for the recovery sweep", "rows", left)
			}
			return
		}
		a.mu.Unlock()
		s.publishCommitted(page)
		if len(mine) > 0 {
			a.mu.Lock()
			for k := range mine {
				delete(a.busy, k)
			}
			a.mu.Unlock()
		}
	}
}

// takePage takes the next page of pending rows, under a.mu. Rows of an ordering key that
// another publisher holds stay pending, and so do the later rows of that key, so that one
// key's rows are published by one publisher at a time, in the order they were committed;
// the keys taken are marked busy and returned.
func (a *afterCommit) takePage() ([]row, map[orderKey]bool) {
	if a.keyed == 0 {
		n := min(len(a.pending), afterCommitPage)
		page := a.pending[:n:n]
		a.pending = a.pending[n:]
		return page, nil
	}
	var page, rest []row
	var mine, held map[orderKey]bool
	for _, r := range a.pending {
		if len(page) >= afterCommitPage {
			rest = append(rest, r)
			continue
		}
		if r.batch.Key != "" {
			k := orderKey{r.batch.Queue, r.batch.Key}
			if held[k] || (a.busy[k] && !mine[k]) {
				if held == nil {
					held = map[orderKey]bool{}
				}
				held[k] = true
				rest = append(rest, r)
				continue
			}
			if mine == nil {
				mine = map[orderKey]bool{}
			}
			if a.busy == nil {
				a.busy = map[orderKey]bool{}
			}
			mine[k], a.busy[k] = true, true
			a.keyed--
		}
		page = append(page, r)
	}
	a.pending = rest
	return page, mine
}

// WaitIdle waits until the after-commit publishing of every RunInTx that returned before the
// call is over: each of its rows published and deleted, or left in the outbox for the relay
// and the recovery sweep (a failed publish, a full hand-off queue, Close), and, on a
// single-writer database (SQLite), until the handoffs waiting for the writer are written
// (singlewriter.go). It is meant for tests and for an orderly shutdown before Close; ctx
// bounds the wait.
func (s *Store) WaitIdle(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.ac.mu.Lock()
	idle := s.ac.idle
	s.ac.mu.Unlock()
	for _, ch := range []<-chan struct{}{idle, s.adhocIdle(), s.handoffIdle()} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("txmq outbox: WaitIdle: the after-commit publishers of schema %q are still busy: %w", s.o.Schema, ctx.Err())
		}
	}
	return nil
}

// closeAfterCommit refuses further hand-offs and waits, until ctx is done, for the
// publishers to publish the rows already handed over; then they start no other publish (the
// one in progress, if any, ends on its own) and the rest stays in the outbox.
func (s *Store) closeAfterCommit(ctx context.Context) error {
	a := &s.ac
	a.mu.Lock()
	a.closed = true
	idle := a.idle
	a.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		a.abandon = true
		a.mu.Unlock()
		return fmt.Errorf("txmq outbox: Close: the after-commit publishers of schema %q are still publishing; the rows not published yet stay in the outbox for the recovery sweep: %w", s.o.Schema, ctx.Err())
	}
}

// publishCommitted publishes one page of rows that RunInTx transactions committed, in three
// steps that hold no connection of the app's pool while the backend works (a hung backend
// must not starve the app):
//
//  1. lease: one statement gives the rows still untaken (no next-attempt time, not locked by
//     a sweep: SKIP LOCKED) a next-attempt time Options.RecoveryAge ahead, the wait a row
//     without one gets, so that no relay or sweep, of this process or another, publishes them
//     meanwhile, and a process that dies while publishing leaves them to the sweep no later
//     than RecoveryAge after that. Rows young enough that no sweep can take them before the
//     page is over (mayPublishUnleased: the common case, a short transaction of an unordered
//     queue without a delay) skip this step, and with it a round trip between the commit and
//     the publish;
//  2. publish them one by one within the page's budget, Options.PublishTimeout but at most
//     half the lease (see commitContexts and publishOne);
//  3. delete the published rows in one statement; a failed row counts an attempt and is
//     scheduled with backoff, or moves to the dead-letter table if it is poison, as in the
//     sweep (recordCommitFailure); on an unavailable backend (or a spent budget)
//     the rows not published get their lease back (no next-attempt time): the sweep takes
//     them over after Options.RecoveryAge, no attempt counted.
//
// The lease and the delete commit with synchronous_commit off: a lease lost in a crash only
// means the row is swept after RecoveryAge, a lost delete only publishes the row again, which
// at-least-once allows (so does database work that overruns the rest of the lease). Errors are logged, never returned: the app's transactions committed,
// and the rows stay in the outbox for the sweep.
func (s *Store) publishCommitted(rows []row) {
	db, pub, cancel := s.commitContexts()
	defer cancel()
	claimed, leased, err := s.claimCommitted(db, rows)
	if err != nil {
		s.log.Error("txmq outbox: claiming committed rows for publishing failed; they stay in the outbox for the recovery sweep",
			"rows", len(rows), "error", err)
		return
	}
	guard, err := s.newOrderGuard(db, func(ctx context.Context, upto map[OrderKey]int64) (map[OrderKey][]int64, error) {
		return pgKeyIDs(ctx, s.pool, s.outbox, upto)
	}, claimed)
	if err != nil {
		s.log.Error("txmq outbox: checking the order of committed rows failed; they stay in the outbox for the recovery sweep",
			"rows", len(claimed), "error", err)
		s.releaseCommitted(db, leasedIDs(nil, claimed, leased))
		return
	}
	var published, released, waiting []int64
	for i, r := range claimed {
		if pub.Err() != nil || s.abandoned() { // the page's budget is spent, or Close gave up: leave the rest to the sweep
			released = leasedIDs(released, claimed[i:], leased)
			break
		}
		if !guard.may(r) { // an earlier row of its key is still in the table
			waiting = append(waiting, r.id)
			continue
		}
		perr := s.publishOne(pub, r.batch)
		if perr == nil {
			guard.done(r)
			published = append(published, r.id)
			s.safeHook(func() {
				if s.o.Hooks != nil && s.o.Hooks.Published != nil {
					s.o.Hooks.Published(r.batch.Queue, viaCommit)
				}
			})
			continue
		}
		// A publish that ran out of the page's budget (the backend hangs) is the backend being
		// unavailable too: the rows go to the sweep at once, without an attempt or a backoff,
		// as a refused connection does (the sweep counts attempts of its own).
		unavailable := errors.Is(perr, core.ErrBackendUnavailable) || pub.Err() != nil
		s.safeHook(func() {
			if s.o.Hooks != nil && s.o.Hooks.PublishFailed != nil {
				s.o.Hooks.PublishFailed(r.batch.Queue, viaCommit, unavailable)
			}
		})
		if unavailable {
			s.log.Warn("txmq outbox: backend unavailable after commit; the recovery sweep will publish the rows",
				"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "rows", len(claimed)-i, "error", perr)
			released = leasedIDs(released, claimed[i:], leased)
			break
		}
		guard.block(r)
		s.recordCommitFailure(db, r, perr)
	}
	if len(published) > 0 {
		if _, err := s.pool.Exec(db, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
			DELETE FROM `+s.outbox+` USING async WHERE id = ANY($1)`, published); err != nil {
			s.log.Error("txmq outbox: deleting rows published after commit failed; they will be published again once their lease ends (at-least-once)",
				"rows", len(published), "error", err)
		} else if guard != nil && s.keyedWaiting.Load() {
			s.wake() // later rows of these keys may be due: the relay takes them now
		}
	}
	s.releaseCommitted(db, released)
	if len(waiting) > 0 {
		s.keyedWaiting.Store(true)
		// Due now for the relay, which publishes them once the earlier rows of their keys are
		// gone (no attempt counted).
		if _, err := s.pool.Exec(db, `UPDATE `+s.outbox+` SET next_attempt_at = now() WHERE id = ANY($1)`, waiting); err != nil {
			s.log.Error("txmq outbox: scheduling rows that wait for earlier rows of their ordering key failed; they are retried once their lease ends",
				"rows", len(waiting), "error", err)
		}
		s.wake()
	}
}

// releaseCommitted gives back the lease of after-commit rows not published: no next-attempt
// time, so the sweep takes them over after Options.RecoveryAge.
func (s *Store) releaseCommitted(db context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	if _, err := s.pool.Exec(db, `UPDATE `+s.outbox+` SET next_attempt_at = NULL WHERE id = ANY($1)`, ids); err != nil {
		s.log.Error("txmq outbox: giving back the lease of rows not published after commit failed; they are retried once it ends",
			"rows", len(ids), "error", err)
	}
}

// commitBudget is the publish budget of one after-commit page: Options.PublishTimeout but at
// most half the lease (Options.RecoveryAge), so that the page is published and recorded
// before its lease ends.
func (s *Store) commitBudget() time.Duration { return min(s.o.PublishTimeout, s.o.RecoveryAge/2) }

// commitContexts returns the contexts of one after-commit page, as pageContexts does, with
// the publish budget of commitBudget.
func (s *Store) commitContexts() (db, pub context.Context, cancel func()) {
	budget := s.commitBudget()
	db, cancelDB := context.WithTimeout(context.Background(), budget+dbGrace)
	pub, cancelPub := context.WithTimeout(db, budget)
	return db, pub, func() { cancelPub(); cancelDB() }
}

// recordCommitFailure records a failed publish of r (not an unavailable backend) in a
// transaction of its own, as publishLocked does for the sweep: a poison row (refused
// permanently, or past Options.MaxAttempts) moves to the dead-letter table; any other counts
// an attempt and is scheduled again with backoff.
func (s *Store) recordCommitFailure(db context.Context, r row, perr error) {
	attempts := r.attempts + 1
	err := s.db.InTx(db, func(tx PageTx) error {
		if reason := poisonReason(perr, attempts, s.o.MaxAttempts); reason != "" {
			moved, err := s.deadLetterRow(db, tx, r, viaCommit, reason, attempts, perr)
			if err != nil || moved {
				return err
			}
		}
		delay := backoff(s.o.BackoffBase, s.o.BackoffMax, attempts)
		s.log.Warn("txmq outbox: publish failed, row scheduled again",
			"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "via", viaCommit, "attempts", attempts, "retry_in", delay, "error", perr)
		return tx.Reschedule(db, r.id, errorText(perr.Error(), maxErrorText), delay)
	})
	if err != nil {
		s.log.Error("txmq outbox: recording a failed publish after commit failed; the row is retried once its lease ends",
			"queue", r.batch.Queue, "row", r.id, "batch", r.batch.ID, "error", err, "publish_error", perr)
	}
}

// unleasedMargin is the time left, at the least, between the end of an unleased page's
// database work and the moment the sweep may take its rows (see mayPublishUnleased).
const unleasedMargin = time.Second

// mayPublishUnleased reports whether the after-commit publisher may publish r without leasing
// it first, saving a statement (a database round trip) between a commit and the publish: r is
// a RunInTx row (began set) of a queue without ordering keys, without a delay, and young
// enough that the sweep cannot take it before this page's work is over, whatever it does:
// the sweep takes a row without a next-attempt time once its created_at (the database's
// now() in its transaction, which began after began) is Options.RecoveryAge old, and the
// page's database work ends, done or cancelled, within commitBudget + dbGrace of now. With
// the defaults (60 s, 30 s and 15 s) that is a row whose transaction began at most 14 s ago.
// No one else takes such a row: the relay and the sweep take only rows that are due or that
// old, and another after-commit publisher only the rows its own transactions committed.
func (s *Store) mayPublishUnleased(r row, now time.Time) bool {
	if r.began.IsZero() || r.batch.Key != "" || r.batch.Delay > 0 || !r.batch.NotBefore.IsZero() {
		return false
	}
	return now.Sub(r.began)+s.commitBudget()+dbGrace+unleasedMargin <= s.o.RecoveryAge
}

// claimCommitted returns the rows of rows this publisher may publish, in id order: those
// mayPublishUnleased allows as they are, the others once leaseCommitted leased them (their ids
// in leased; nil when none was).
func (s *Store) claimCommitted(ctx context.Context, rows []row) ([]row, map[int64]bool, error) {
	now := time.Now()
	var free, rest []row
	for _, r := range rows {
		if s.mayPublishUnleased(r, now) {
			free = append(free, r)
		} else {
			rest = append(rest, r)
		}
	}
	var leased map[int64]bool
	if len(rest) > 0 {
		claimed, err := s.leaseCommitted(ctx, rest)
		if err != nil {
			return nil, nil, err
		}
		leased = idSet(claimed)
		free = append(free, claimed...)
	}
	slices.SortFunc(free, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	return free, leased, nil
}

// idSet returns the ids of rows as a set.
func idSet(rows []row) map[int64]bool {
	set := make(map[int64]bool, len(rows))
	for _, r := range rows {
		set[r.id] = true
	}
	return set
}

// leasedIDs appends to ids the ids of the rows of rows that are in leased.
func leasedIDs(ids []int64, rows []row, leased map[int64]bool) []int64 {
	for _, r := range rows {
		if leased[r.id] {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// leaseCommitted claims the rows of rows that no one took yet (see publishCommitted) and
// returns them in id order, each with the delay it still has, read from its due time on the
// database's clock.
func (s *Store) leaseCommitted(ctx context.Context, rows []row) ([]row, error) {
	ids := appendIDs(make([]int64, 0, len(rows)), rows)
	lease := s.o.RecoveryAge
	got, err := s.pool.Query(ctx, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
		free AS (SELECT id FROM `+s.outbox+` WHERE id = ANY($1) AND next_attempt_at IS NULL FOR UPDATE SKIP LOCKED)
		UPDATE `+s.outbox+` o SET next_attempt_at = now() + $2 * interval '1 microsecond'
		FROM free, async WHERE o.id = free.id RETURNING o.id, `+remainingSQL, ids, lease.Microseconds())
	if err != nil {
		return nil, err
	}
	leased := map[int64]*int64{}
	var id int64
	var left *int64
	if _, err := pgx.ForEachRow(got, []any{&id, &left}, func() error {
		leased[id] = left
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]row, 0, len(leased))
	for _, r := range rows {
		if left, ok := leased[r.id]; ok {
			withRemaining(&r.batch, left)
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	return out, nil
}

// appendIDs appends the ids of rows to ids.
func appendIDs(ids []int64, rows []row) []int64 {
	for _, r := range rows {
		ids = append(ids, r.id)
	}
	return ids
}

// abandoned reports whether Close gave up waiting for the after-commit publishers.
func (s *Store) abandoned() bool {
	s.ac.mu.Lock()
	defer s.ac.mu.Unlock()
	return s.ac.abandon
}

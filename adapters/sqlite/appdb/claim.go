package appdb

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Claims. PostgreSQL and MySQL lock a page's rows (FOR UPDATE SKIP LOCKED) for the
// transaction that publishes them. SQLite has no row locks and one writer per file: a
// transaction held open while the page is published would keep every writer of the file
// waiting, the app's and a backend's in the same file alike. So a page is leased instead:
//
//  1. a read without a lock (WAL) looks for a due row; with none, the page is empty and no
//     write lock is taken (the relay polls every outbox.Options.PollInterval);
//  2. one UPDATE ... RETURNING, in a BEGIN IMMEDIATE transaction, takes the page: up to limit
//     due rows after the cursor in id order get the claim's token, their next-attempt time
//     moves to the lease's end (so no other relay or sweep takes them meanwhile), and the old
//     one is kept (claim_next);
//  3. the Store publishes the page with no lock held, its deletes and reschedules recorded;
//  4. one more transaction settles the page: the published rows are deleted in one
//     statement, the failed ones rescheduled (while still claimed by this token), and the
//     others given back their old next-attempt time. When the Store's function fails, the
//     page is given back whole, as a rollback would (published rows deleted all the same:
//     they were published).
//
// The lease ends one leaseMargin after the page's context does (Options.PublishTimeout plus
// the Store's grace for the database work): a process that dies with a page leases its rows
// until then, and the next relay or sweep takes them over (published again: at-least-once).

// leaseMargin is how long a claim's lease outlives the page's context.
const leaseMargin = 5 * time.Second

// defaultLease is a claim's lease when the page's context has no deadline.
const defaultLease = time.Minute

// settleTimeout bounds the transaction that settles a page, detached from the page's
// context (a page whose budget ran out still deletes the rows it published).
const settleTimeout = 10 * time.Second

// leaseEnd returns the end of the lease of a claim made at at (microseconds) on ctx.
func leaseEnd(ctx context.Context, at int64) int64 {
	if dl, ok := ctx.Deadline(); ok {
		return dl.Add(leaseMargin).UnixMicro()
	}
	return at + defaultLease.Microseconds()
}

// dueSubquery selects the ids of the due rows after the cursor: a next-attempt time in the past,
// or none and a creation older than the recovery age. Arguments: now, after, cutoff, after.
const dueSubquery = `SELECT id FROM ` + outboxTable + ` WHERE next_attempt_at <= ? AND id > ?
	UNION ALL SELECT id FROM ` + outboxTable + ` WHERE next_attempt_at IS NULL AND created_at <= ? AND id > ?`

// ClaimPage implements outbox.Dialect with a lease (see above): fn runs with no lock held.
func (d *Dialect) ClaimPage(ctx context.Context, after int64, recoveryAge time.Duration, limit int, fn func(outbox.PageTx, []outbox.Row) error) error {
	at := now()
	cutoff := at - recoveryAge.Microseconds()
	var due bool
	if err := d.db.QueryRowContext(ctx, `SELECT EXISTS (`+dueSubquery+`)`, at, after, cutoff, after).Scan(&due); err != nil {
		return classify("looking for due outbox rows", err)
	}
	if !due {
		return fn(&claimTx{d: d}, nil)
	}
	token := newToken()
	var page []outbox.Row
	err := d.write(ctx, "claiming a page of outbox rows", func(c *sql.Conn) error {
		page = page[:0]
		at = now()
		rs, err := c.QueryContext(ctx, `UPDATE `+outboxTable+` SET claim_token = ?, claim_next = next_attempt_at, next_attempt_at = ?
			WHERE id IN (SELECT id FROM (`+dueSubquery+`) ORDER BY id LIMIT ?)
			RETURNING id, queue, batch_id, body, not_before, exclusive, attempts, COALESCE(order_key, '')`,
			token, leaseEnd(ctx, at), at, after, at-recoveryAge.Microseconds(), after, limit)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r outbox.Row
			var notBefore sql.NullInt64
			if err := rs.Scan(&r.ID, &r.Batch.Queue, &r.Batch.ID, &r.Batch.Body, &notBefore, &r.Batch.Exclusive, &r.Attempts, &r.Batch.Key); err != nil {
				return err
			}
			if notBefore.Valid && notBefore.Int64 > at {
				r.Batch.Delay = time.Duration(notBefore.Int64-at) * time.Microsecond
			}
			page = append(page, r)
		}
		return rs.Err()
	})
	if err != nil {
		return err
	}
	slices.SortFunc(page, func(a, b outbox.Row) int { return compare(a.ID, b.ID) })
	p := &claimTx{d: d, token: token, ids: make([]int64, len(page))}
	for i, r := range page {
		p.ids[i] = r.ID
	}
	fnErr := fn(p, page)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if serr := p.settle(sctx, fnErr != nil); fnErr == nil {
		return serr
	}
	return fnErr
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// claimTx is the outbox.PageTx of a claimed page: reads run at once without a lock, deletes
// and reschedules wait for settle, a move to the dead letters runs at once in a transaction
// of its own.
type claimTx struct {
	d     *Dialect
	token int64
	ids   []int64 // the page's rows

	mu      sync.Mutex
	deleted []int64
	failed  []failure
}

// failure is a recorded Reschedule.
type failure struct {
	id        int64
	lastError string
	delay     time.Duration
}

// KeyIDs implements outbox.PageTx: a read, which sees the rows other claims hold too (so a
// key's later row waits for them).
func (p *claimTx) KeyIDs(ctx context.Context, upto map[outbox.OrderKey]int64) (map[outbox.OrderKey][]int64, error) {
	ids, err := keyIDs(ctx, p.d.db, upto)
	return ids, classify("reading the rows of ordering keys", err)
}

// Reschedule implements outbox.PageTx (applied when the page settles).
func (p *claimTx) Reschedule(_ context.Context, id int64, lastError string, delay time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = append(p.failed, failure{id, lastError, delay})
	return nil
}

// Delete implements outbox.PageTx (applied when the page settles).
func (p *claimTx) Delete(_ context.Context, ids []int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deleted = append(p.deleted, ids...)
	return nil
}

// MoveToDeadLetters implements outbox.PageTx in a transaction of its own: the dead letter is
// inserted and the row deleted, both or neither.
func (p *claimTx) MoveToDeadLetters(ctx context.Context, id int64, dl *core.DeadLetter) (refused, err error) {
	err = p.d.write(ctx, "moving an outbox row to the dead letters", func(c *sql.Conn) error {
		var merr error
		refused, merr = moveToDeadLetters(ctx, c, id, dl)
		return merr
	})
	if err != nil && refused == nil {
		return err, nil // the database refused the move: the page goes on, the row stays
	}
	return refused, nil
}

// settle ends the claim in one transaction: the published rows deleted, the failed ones
// rescheduled (unless abort: fn failed, and the page is given back as it was), every other
// row still claimed by this token given back its old next-attempt time.
func (p *claimTx) settle(ctx context.Context, abort bool) error {
	if p.token == 0 {
		return nil
	}
	p.mu.Lock()
	deleted, failed := p.deleted, p.failed
	p.mu.Unlock()
	if abort {
		failed = nil
	}
	if len(p.ids) == 0 && len(deleted) == 0 {
		return nil // the claim found its rows taken by another
	}
	return p.d.write(ctx, "settling a page of outbox rows", func(c *sql.Conn) error {
		if err := deleteRows(ctx, c, deleted); err != nil {
			return err
		}
		for _, f := range failed {
			if err := reschedule(ctx, c, f.id, f.lastError, f.delay, p.token); err != nil {
				return err
			}
		}
		_, err := c.ExecContext(ctx, `UPDATE `+outboxTable+` SET next_attempt_at = claim_next, claim_token = NULL, claim_next = NULL
			WHERE id IN (`+marks(len(p.ids))+`) AND claim_token = ?`, append(int64Args(p.ids), p.token)...)
		return err
	})
}

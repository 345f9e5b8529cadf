package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// cancelCacheMax bounds the cancelled messages a Ledger keeps in memory; beyond it, nodes ask
// the table per batch.
const cancelCacheMax = 100_000

// cancelOverlap is how far before the newest cancel seen each read starts again, so that a
// cancel committed late with an earlier time (another process's clock) is still read.
const cancelOverlap = 5 * time.Minute

// cancelCache is a node's copy of the cancelled messages, read every Options.CancelCheck.
type cancelCache struct {
	start sync.Once
	first chan struct{} // closed once the reader's first read ended (nil: no reader)

	mu        sync.Mutex
	set       map[string]cancelScope // queue + "\x00" + id -> its cancel
	newest    time.Time              // the newest cancel time read
	readAt    time.Time              // when the last successful read started (this clock)
	overflown bool                   // more than cancelCacheMax: ask the table per batch
	asked     atomic.Int64           // CancelledMessages calls that asked the table
}

func cancelKey(queue, id string) string { return queue + "\x00" + id }

// cancelScope is what a cancel applies to: the batch that held the message when the cancel
// was made (empty for a message staged in a transaction), and every batch created no later than
// the cancel's time (at). Any other batch holding the id is a later publish.
type cancelScope struct {
	at    time.Time
	batch string
}

// covers reports whether the cancel applies to the batch b (its id and creation time, at the
// microsecond the database keeps).
func (s cancelScope) covers(b core.CancelCheck) bool {
	return (s.batch != "" && s.batch == b.BatchID) || !b.Created.Truncate(time.Microsecond).After(s.at)
}

// cancelsSQL reads the cancels (all, or with since those made after $1): the cancel recorded
// on a row (cancel_at, migration 0005), and a cancelled row without one (cancelled by a build
// before it, during an upgrade), whose cancel is its update time and batch. Each part walks a
// partial index.
func (l *Ledger) cancelsSQL(since bool) string {
	recorded, legacy := `cancel_at IS NOT NULL`, `state = 'cancelled' AND cancel_at IS NULL`
	if since {
		recorded, legacy = `cancel_at > $1`, legacy+` AND updated_at > $1`
	}
	return `SELECT queue, id, cancel_at, coalesce(cancel_batch, '') FROM ` + l.table + ` WHERE ` + recorded + `
UNION ALL
SELECT queue, id, updated_at, batch_id FROM ` + l.table + ` WHERE ` + legacy
}

// cancelLoop reads the new cancels every CancelCheck until Close.
func (l *Ledger) cancelLoop(first chan struct{}) {
	defer l.loops.Done()
	t := time.NewTicker(l.opts.CancelCheck)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*l.opts.CancelCheck+5*time.Second)
		if err := l.readCancels(ctx); err != nil {
			l.log.Warn("txmq ledger: reading cancelled messages failed; nodes ask the table per batch until a read works", "schema", l.opts.Schema, "error", err)
		}
		cancel()
		if first != nil {
			close(first)
			first = nil
		}
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

// readCancels reads the cancels newer than the newest seen (less the overlap).
func (l *Ledger) readCancels(ctx context.Context) error {
	c := &l.cancels
	start := time.Now()
	c.mu.Lock()
	from := c.newest.Add(-cancelOverlap)
	first := c.set == nil
	c.mu.Unlock()
	var args []any
	if !first {
		args = append(args, from)
	}
	rows, err := l.query(ctx, l.cancelsSQL(!first), args...)
	if err != nil {
		return fmt.Errorf("txmq ledger: reading cancelled messages from %s: %w", l.table, err)
	}
	defer rows.Close()
	type entry struct {
		key   string
		scope cancelScope
	}
	var got []entry
	for rows.Next() {
		var queue, id string
		var sc cancelScope
		if err := rows.Scan(&queue, &id, &sc.at, &sc.batch); err != nil {
			return fmt.Errorf("txmq ledger: reading cancelled messages from %s: %w", l.table, err)
		}
		got = append(got, entry{cancelKey(queue, id), sc})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("txmq ledger: reading cancelled messages from %s: %w", l.table, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = make(map[string]cancelScope, len(got))
	}
	for _, e := range got {
		if prev, ok := c.set[e.key]; !ok || !e.scope.at.Before(prev.at) {
			c.set[e.key] = e.scope // the newest cancel of the id covers the older ones' batches
		}
		if e.scope.at.After(c.newest) {
			c.newest = e.scope.at
		}
	}
	if len(c.set) > cancelCacheMax {
		old := time.Now().Add(-l.opts.Retention - time.Hour) // pruned from the table by now
		for k, sc := range c.set {
			if sc.at.Before(old) {
				delete(c.set, k)
			}
		}
		c.overflown = len(c.set) > cancelCacheMax
	}
	c.readAt = start
	return nil
}

// fromCache answers CancelledMessages from the cache when its last read is fresh (started
// less than twice CancelCheck ago); ok is false otherwise.
func (l *Ledger) fromCache(b core.CancelCheck) (out map[string]bool, ok bool) {
	c := &l.cancels
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overflown || c.readAt.IsZero() || time.Since(c.readAt) >= 2*l.opts.CancelCheck {
		return nil, false
	}
	if len(c.set) == 0 {
		return nil, true
	}
	for _, id := range b.IDs {
		if sc, hit := c.set[cancelKey(b.Queue, id)]; hit && sc.covers(b) {
			if out == nil {
				out = map[string]bool{}
			}
			out[id] = true
		}
	}
	return out, true
}

// CancelledMessages returns which of b.IDs are cancelled in batch b: the messages whose
// cancel found them in b, or in no batch or another one when b was created no later than the
// cancel (see core.MessageRecorder); a later publish of a cancelled id is not cancelled. The
// first call starts the reader of new cancels (every CancelCheck), and calls wait for its
// first read; while its last read is fresh the answer comes from memory, else from one
// indexed query.
func (l *Ledger) CancelledMessages(ctx context.Context, b core.CancelCheck) (map[string]bool, error) {
	l.cancels.start.Do(func() {
		if l.closed.Load() {
			return
		}
		l.cancels.first = make(chan struct{})
		l.loops.Add(1)
		go l.cancelLoop(l.cancels.first)
	})
	if out, ok := l.fromCache(b); ok {
		return out, nil
	}
	if first := l.cancels.first; first != nil {
		// Until the reader's first read ends, wait for it rather than each batch asking the
		// table at once (a node's first claims come together).
		select {
		case <-first:
			if out, ok := l.fromCache(b); ok {
				return out, nil
			}
		case <-ctx.Done():
		}
	}
	l.cancels.asked.Add(1)
	return l.queryCancelled(ctx, b)
}

// waitCancelSeen waits until every node's next check sees a cancel committed now: twice
// CancelCheck (a node answers from memory only when its read started within that time).
func (l *Ledger) waitCancelSeen(ctx context.Context) error {
	t := time.NewTimer(2*l.opts.CancelCheck + 20*time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("txmq ledger: the cancel is recorded, but the wait until every node sees it was cut short: %w", ctx.Err())
	}
}

var _ core.MessageRecorder = (*Ledger)(nil)

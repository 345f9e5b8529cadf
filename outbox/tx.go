package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// scopeKey finds the RunInTx transaction or savepoint (*scopedTx) of one store in a context.
type scopeKey struct{ s *Store }

// RunInTx runs fn in a new transaction of the store's pool. Publishes on Require and Try
// queues made with fn's context become outbox rows of that transaction; Never queues wait for
// the commit. fn's error (or panic) rolls everything back and is returned as is; nothing is
// published.
//
// When fn returns nil, RunInTx inserts the staged messages (deduplicated and cut into batches
// per queue) in one statement, commits, hands the new rows to the store's after-commit
// publishers, runs the after-commit callbacks (Never queues) and returns. An insert or commit
// error rolls back (nothing is published) and is returned. After a successful commit RunInTx
// returns nil at once, whatever the backend does: it never waits for the publish nor for the
// deletion of the published rows, so a slow or hung backend never holds the caller (its
// deadline bounds only the database work). The publishers (at most four per store, started
// on demand, with at most 10,000 rows waiting for them) publish the rows within milliseconds,
// coalescing the rows of concurrent transactions into pages of up to 100, and delete them; a
// row they could not publish (backend failing or hung, hand-off queue full, store
// closed, process crashed) stays in the outbox and the relay or sweep publishes it later (see
// Options.RecoveryAge). WaitIdle waits for that work; Close waits for it, bounded by its ctx.
//
// Called with a context that already carries a RunInTx transaction of this store, RunInTx runs
// fn in a savepoint of it instead (see Savepoint).
//
// RunInTx needs the store on PostgreSQL (New); on another database (NewWithDialect) it returns
// an error wrapping ErrNeedsPostgres: use RunInSQLTx.
//
// Savepoints: the messages published (Require and Try queues) and the Never messages waiting
// for the commit follow the business rows. A savepoint that is rolled back discards those
// published inside it, and inside every savepoint nested in it, released or not; one that is
// released keeps them (they commit with the transaction); one still open at commit is kept.
// "Inside" means while the savepoint is the innermost open one, whichever context the publish
// used. This holds however the savepoint was made: tx.Begin on the tx given to fn (pgx's
// idiom, so also pgx.BeginFunc(ctx, tx, ...)) at any depth, Store.Savepoint, a nested RunInTx,
// or a SAVEPOINT / ROLLBACK TO SAVEPOINT / RELEASE SAVEPOINT statement run alone through
// tx.Exec. Savepoint statements run on tx.Conn(), through Query or SendBatch, or in a string
// of several statements are not seen: messages staged after them are kept when they are
// rolled back. The tx given to fn is a wrapper of the pgx transaction that works wherever a
// pgx.Tx does; its Commit is refused (return nil from fn instead), and its Rollback rolls the
// whole transaction back, after which RunInTx returns an error even if fn returns nil.
func (s *Store) RunInTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	if s == nil {
		return errNoStore("RunInTx")
	}
	if err := s.needsPG("RunInTx", "use RunInSQLTx"); err != nil {
		return err
	}
	if parent, ok := ctx.Value(scopeKey{s}).(*scopedTx); ok {
		return s.savepoint(ctx, parent, fn)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("txmq outbox: beginning a transaction: %w", err)
	}
	st := newTxState(s)
	root := &scopedTx{Tx: tx, st: st, fr: st.frames[0], root: true}
	rollback := func() {
		st.end()
		_ = tx.Rollback(context.WithoutCancel(ctx))
	}
	if err := callFn(root.context(ctx), root, fn, rollback); err != nil {
		return err
	}
	staged, after, rolledBack := st.end()
	if rolledBack {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return errRolledBackByFn
	}
	rows, err := s.insertStaged(ctx, tx, staged)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("txmq outbox: commit failed, nothing was published (%d outbox row(s) staged): %w", len(rows), err)
	}
	s.handOff(rows)
	for _, fn := range after {
		s.runAfter(fn)
	}
	return nil
}

// errRolledBackByFn reports a RunInTx whose fn rolled the transaction back itself.
var errRolledBackByFn = errors.New("txmq outbox: the RunInTx transaction was rolled back by fn (Rollback on the tx it was given), which then returned nil: nothing was committed or published; return an error from fn to roll back")

// Savepoint runs fn in a SAVEPOINT of the RunInTx transaction carried by ctx. If fn fails (or
// panics), the savepoint is rolled back and so are the messages staged and the after-commit
// callbacks registered inside it, and fn's error is returned; the parent transaction goes on.
// If fn returns nil, the savepoint is released and its messages and callbacks join the parent.
// ctx must come from RunInTx (or Savepoint) of this store. It is the same as pgx.BeginFunc on
// the tx that RunInTx or Savepoint gave, with a context to publish with.
func (s *Store) Savepoint(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if s == nil {
		return errNoStore("Savepoint")
	}
	if err := s.needsPG("Savepoint", "use SQLSavepoint in RunInSQLTx"); err != nil {
		return err
	}
	parent, ok := ctx.Value(scopeKey{s}).(*scopedTx)
	if !ok {
		return fmt.Errorf("%w: txmq outbox: Savepoint needs the context given by Store.RunInTx (of the same store)", core.ErrNoTransaction)
	}
	return s.savepoint(ctx, parent, fn)
}

func (s *Store) savepoint(ctx context.Context, parent *scopedTx, fn func(ctx context.Context, tx pgx.Tx) error) error {
	h, err := parent.Begin(ctx)
	if err != nil {
		return fmt.Errorf("txmq outbox: creating a savepoint: %w", err)
	}
	sp := h.(*scopedTx)
	rollback := func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }
	if err := callFn(sp.context(ctx), sp, fn, rollback); err != nil {
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("txmq outbox: releasing a savepoint (the publishes staged inside it are discarded): %w", err)
	}
	return nil
}

// callFn runs fn, calling rollback when it fails or panics (the panic goes on).
func callFn(ctx context.Context, tx pgx.Tx, fn func(context.Context, pgx.Tx) error, rollback func()) (err error) {
	ok := false
	defer func() {
		if !ok {
			rollback()
		}
	}()
	err = fn(ctx, tx)
	ok = err == nil
	return err
}

// runAfter runs one after-commit callback, recovering its panic.
func (s *Store) runAfter(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("txmq outbox: after-commit callback panicked", "panic", r)
		}
	}()
	fn()
}

// insertStaged turns the staged publishes into batches (per queue: Dedup, MaxBatchMessages)
// and inserts them as unscheduled rows, in one statement per 1000 rows.
func (s *Store) insertStaged(ctx context.Context, tx pgx.Tx, staged []*core.Pending) ([]row, error) {
	if len(staged) == 0 {
		return nil, nil
	}
	var order []string
	byQueue := map[string][]*core.Pending{}
	for _, p := range staged {
		if _, seen := byQueue[p.Queue]; !seen {
			order = append(order, p.Queue)
		}
		byQueue[p.Queue] = append(byQueue[p.Queue], p)
	}
	now := time.Now()
	var batches []core.OutgoingBatch
	for _, q := range order {
		bs, err := core.Batches(byQueue[q], now)
		if err != nil {
			return nil, fmt.Errorf("txmq outbox: queue %q: preparing batches before commit failed, the transaction was rolled back: %w", q, err)
		}
		batches = append(batches, bs...)
	}
	rows, err := insertRows(ctx, tx, s.outbox, batches, false)
	if err != nil {
		return nil, fmt.Errorf("txmq outbox: inserting %d outbox row(s) of queue(s) %s into %s failed, the transaction was rolled back: %w; check that outbox.Migrate ran for schema %q",
			len(batches), queueList(batches), s.outbox, err, s.o.Schema)
	}
	return rows, nil
}

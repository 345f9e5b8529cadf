package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// scopeKey finds the RunInTx scope of one store in a context.
type scopeKey struct{ s *Store }

// txScope is a RunInTx transaction or one of its savepoints, as the core.Tx that publishes
// stage into. Messages and after-commit callbacks are kept per scope: a rolled-back savepoint
// drops its own, a released one hands them to its parent, and the root writes them at commit.
type txScope struct {
	s      *Store
	tx     pgx.Tx
	parent *txScope

	mu     sync.Mutex
	staged []*core.Pending
	after  []func()
	ended  bool
}

// Stage keeps p for the before-commit insert. It implements core.Tx.
func (sc *txScope) Stage(_ context.Context, p *core.Pending) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ended {
		return fmt.Errorf("txmq outbox: queue %q: the transaction or savepoint of this context has already ended; publish inside the function given to RunInTx/Savepoint, with its context", p.Queue)
	}
	sc.staged = append(sc.staged, p)
	return nil
}

// AfterCommit registers fn to run after the root transaction commits. It implements core.Tx.
// It returns false once the scope has ended.
func (sc *txScope) AfterCommit(fn func()) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ended {
		return false
	}
	sc.after = append(sc.after, fn)
	return true
}

// end closes the scope to new work and returns what it holds.
func (sc *txScope) end() ([]*core.Pending, []func()) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.ended = true
	staged, after := sc.staged, sc.after
	sc.staged, sc.after = nil, nil
	return staged, after
}

// merge takes over a released savepoint's work.
func (sc *txScope) merge(staged []*core.Pending, after []func()) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ended {
		return errors.New("txmq outbox: a savepoint was released after its parent transaction ended; keep savepoints inside their parent's function")
	}
	sc.staged = append(sc.staged, staged...)
	sc.after = append(sc.after, after...)
	return nil
}

func (sc *txScope) context(ctx context.Context) context.Context {
	return context.WithValue(core.ContextWithTx(ctx, sc), scopeKey{sc.s}, sc)
}

// RunInTx runs fn in a new transaction of the store's pool. Publishes on Require and Try
// queues made with fn's context become outbox rows of that transaction; Never queues wait for
// the commit. fn's error (or panic) rolls everything back and is returned as is; nothing is
// published.
//
// When fn returns nil, RunInTx inserts the staged messages (deduplicated and cut into batches
// per queue) in one statement, commits, then publishes the new rows to the backend, deletes
// them, and runs the after-commit callbacks. An insert or commit error rolls back (nothing is
// published) and is returned. After a successful commit RunInTx returns nil even if a publish
// failed: the row stays and the relay or sweep publishes it later.
//
// Called with a context that already carries a RunInTx transaction of this store, RunInTx runs
// fn in a savepoint of it instead (see Savepoint).
func (s *Store) RunInTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	if parent, ok := ctx.Value(scopeKey{s}).(*txScope); ok {
		return s.savepoint(ctx, parent, fn)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("txmq outbox: beginning a transaction: %w", err)
	}
	sc := &txScope{s: s, tx: tx}
	rollback := func() {
		sc.end()
		_ = tx.Rollback(context.WithoutCancel(ctx))
	}
	if err := callFn(sc.context(ctx), tx, fn, rollback); err != nil {
		return err
	}
	staged, after := sc.end()
	rows, err := s.insertStaged(ctx, tx, staged)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("txmq outbox: commit failed, nothing was published (%d outbox row(s) staged): %w", len(rows), err)
	}
	s.publishCommitted(ctx, rows)
	for _, fn := range after {
		s.runAfter(fn)
	}
	return nil
}

// Savepoint runs fn in a SAVEPOINT of the RunInTx transaction carried by ctx. If fn fails (or
// panics), the savepoint is rolled back and so are the messages staged and the after-commit
// callbacks registered inside it, and fn's error is returned; the parent transaction goes on.
// If fn returns nil, the savepoint is released and its messages and callbacks join the parent.
// ctx must come from RunInTx (or Savepoint) of this store.
func (s *Store) Savepoint(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	parent, ok := ctx.Value(scopeKey{s}).(*txScope)
	if !ok {
		return fmt.Errorf("%w: txmq outbox: Savepoint needs the context given by Store.RunInTx (of the same store)", core.ErrNoTransaction)
	}
	return s.savepoint(ctx, parent, fn)
}

func (s *Store) savepoint(ctx context.Context, parent *txScope, fn func(ctx context.Context, tx pgx.Tx) error) error {
	sp, err := parent.tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("txmq outbox: creating a savepoint: %w", err)
	}
	sc := &txScope{s: s, tx: sp, parent: parent}
	rollback := func() {
		sc.end()
		_ = sp.Rollback(context.WithoutCancel(ctx))
	}
	if err := callFn(sc.context(ctx), sp, fn, rollback); err != nil {
		return err
	}
	staged, after := sc.end()
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("txmq outbox: releasing a savepoint (its %d staged publish(es) are discarded): %w", len(staged), err)
	}
	return parent.merge(staged, after)
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

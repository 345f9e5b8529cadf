package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq/core"
)

// SQLDB is implemented by a Dialect on database/sql: RunInSQLTx begins its transactions on
// the *sql.DB it returns.
type SQLDB interface {
	// DB returns the app database's handle.
	DB() *sql.DB
}

// sqlScopeKey finds the RunInSQLTx transaction of one store in a context.
type sqlScopeKey struct{ s *Store }

// sqlScope is the core.Tx of a RunInSQLTx transaction or of a savepoint of it (SQLSavepoint):
// publishes on Require and Try queues write their rows into the *sql.Tx at once (as
// WithSQLTx), so the database itself keeps them or rolls them back with the business rows,
// whatever savepoints the app makes; Never queues' callbacks wait in frames that follow the
// savepoints made through SQLSavepoint (or a nested RunInSQLTx).
type sqlScope struct {
	app    *appTx
	tx     *sql.Tx
	st     *txState
	fr     *frame
	staged *atomic.Bool // a row was written: wake the relay at commit
	depth  int          // savepoint depth, for the savepoint's name
}

var _ core.Tx = (*sqlScope)(nil)

// Stage writes p's batches into the transaction as due rows. It implements core.Tx.
func (sc *sqlScope) Stage(ctx context.Context, p *core.Pending) error {
	sc.st.mu.Lock()
	_, open := sc.st.top(sc.fr)
	sc.st.mu.Unlock()
	if !open {
		return fmt.Errorf("txmq outbox: queue %q: the transaction or savepoint of this context has already ended; publish inside the function given to RunInSQLTx/SQLSavepoint, with its context", p.Queue)
	}
	batches, err := core.Batches([]*core.Pending{p}, time.Now())
	if err != nil {
		return fmt.Errorf("txmq outbox: queue %q: preparing batches: %w", p.Queue, err)
	}
	if _, err := sc.st.s.writeHandedInto(ctx, sc.app.write, nil, sc.record); err != nil {
		return fmt.Errorf("txmq outbox: queue %q: %w", p.Queue, err)
	}
	if err := sc.app.stageRows(ctx, p.Queue, batches); err != nil {
		return err
	}
	sc.staged.Store(true)
	return nil
}

// record keeps batches handed off into the transaction at sc's level (see handoffInSQLTx),
// or, when that level has ended meanwhile, for the end of the transaction.
func (sc *sqlScope) record(batches []core.OutgoingBatch) {
	sc.st.mu.Lock()
	defer sc.st.mu.Unlock()
	if top, ok := sc.st.top(sc.fr); ok {
		top.handed = append(top.handed, batches...)
		return
	}
	sc.st.orphans = append(sc.st.orphans, batches...)
}

// AfterCommit registers fn to run after the commit, unless the innermost savepoint made with
// SQLSavepoint is rolled back. It implements core.Tx.
func (sc *sqlScope) AfterCommit(fn func()) bool {
	sc.st.mu.Lock()
	defer sc.st.mu.Unlock()
	top, ok := sc.st.top(sc.fr)
	if !ok {
		return false
	}
	top.after = append(top.after, fn)
	return true
}

func (sc *sqlScope) context(ctx context.Context) context.Context {
	return context.WithValue(core.ContextWithTx(ctx, sc), sqlScopeKey{sc.st.s}, sc)
}

// RunInSQLTx is RunInTx for a store on a database/sql Dialect (MySQL/MariaDB: see
// github.com/txmq/txmq/adapters/mysql/appdb; SQLite: adapters/sqlite/appdb): it runs fn in a new transaction of the app's
// *sql.DB, and commits when fn returns nil; fn's error (or panic) rolls everything back and is
// returned as is, and nothing is published.
//
// Publishes on Require and Try queues made with fn's context write their outbox rows into tx
// at once, as due rows (as WithSQLTx does): the database keeps or discards them with the
// business rows, through every savepoint, however it was made (SQLSavepoint, a nested
// RunInSQLTx, or SAVEPOINT / ROLLBACK TO SAVEPOINT statements run on tx). Each publish is
// its own batch (no coalescing across the publishes of one transaction). Never queues wait for
// the commit; a savepoint rolled back discards the Never messages published inside it only
// when it was made with SQLSavepoint or a nested RunInSQLTx (a SAVEPOINT statement run on tx
// is not seen by this process's memory).
//
// After the commit RunInSQLTx wakes the relay of this store (or, on a store not started, runs
// one relay pass in the background, one at a time), which publishes the due rows at once
// (within milliseconds) and deletes them; it never waits for the backend. Other processes'
// relays find rows within Options.PollInterval (default 250 ms); the recovery sweep catches up
// on any row left (a crash, a failing backend). After Close the rows are left to the relay of
// a started store. WaitIdle waits for the background passes.
//
// On a store on PostgreSQL (New) RunInSQLTx is refused: use RunInTx (pgx).
func (s *Store) RunInSQLTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if s == nil {
		return errNoStore("RunInSQLTx")
	}
	if parent, ok := ctx.Value(sqlScopeKey{s}).(*sqlScope); ok {
		return s.sqlSavepoint(ctx, parent, fn)
	}
	sdb, ok := s.db.(SQLDB)
	if !ok {
		return fmt.Errorf("%w: txmq outbox: Store.RunInSQLTx on the %s app database: use Store.RunInTx (a pgx transaction), or WithSQLTx with a transaction you begin", core.ErrInvalidConfig, s.db.Name())
	}
	tx, err := sdb.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("txmq outbox: beginning a transaction on the %s app database: %w", s.db.Name(), err)
	}
	s.sqlTxOpen.Add(1)
	defer s.sqlTxOpen.Add(-1)
	st := newTxState(s)
	root := &sqlScope{app: s.sqlAppTx(tx), tx: tx, st: st, fr: st.frames[0], staged: new(atomic.Bool)}
	rollback := func() {
		handed := st.allHanded()
		st.end()
		_ = tx.Rollback()
		s.rescueHanded(append(handed, st.orphans...))
	}
	if err := callSQLFn(root.context(ctx), tx, fn, rollback); err != nil {
		return err
	}
	handed := st.allHanded()
	_, after, _ := st.end()
	err = tx.Commit()
	s.rescueHanded(st.orphans)
	if err == nil {
		s.settle(handed) // committed: in the table
	} else {
		s.rescueHanded(handed)
		if errors.Is(err, sql.ErrTxDone) {
			return fmt.Errorf("txmq outbox: the RunInSQLTx transaction was committed or rolled back by fn itself, which then returned nil: the Never messages were dropped, and outbox rows are published only if fn committed; return nil from fn to commit, or an error to roll back: %w", err)
		}
		return fmt.Errorf("txmq outbox: commit failed, nothing was published: %w", err)
	}
	if root.staged.Load() {
		s.relayNow()
	}
	for _, fn := range after {
		s.runAfter(fn)
	}
	return nil
}

// SQLSavepoint runs fn in a SAVEPOINT of the RunInSQLTx transaction carried by ctx. If fn
// fails (or panics), the savepoint is rolled back with the outbox rows and the Never
// callbacks staged inside it, and fn's error is returned; the transaction goes on. If fn
// returns nil, the savepoint is released.
func (s *Store) SQLSavepoint(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if s == nil {
		return errNoStore("SQLSavepoint")
	}
	parent, ok := ctx.Value(sqlScopeKey{s}).(*sqlScope)
	if !ok {
		return fmt.Errorf("%w: txmq outbox: SQLSavepoint needs the context given by Store.RunInSQLTx (of the same store)", core.ErrNoTransaction)
	}
	return s.sqlSavepoint(ctx, parent, fn)
}

func (s *Store) sqlSavepoint(ctx context.Context, parent *sqlScope, fn func(ctx context.Context, tx *sql.Tx) error) error {
	name := "txmq_sp_" + strconv.Itoa(parent.depth+1)
	if _, err := parent.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("txmq outbox: creating a savepoint: %w", err)
	}
	sp := &sqlScope{app: parent.app, tx: parent.tx, st: parent.st, fr: parent.st.push(name), staged: parent.staged, depth: parent.depth + 1}
	rollback := func() {
		_, _ = parent.tx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT "+name)
		parent.rewriteHanded(ctx, parent.st.discardHanded(sp.fr))
	}
	if err := callSQLFn(sp.context(ctx), parent.tx, fn, rollback); err != nil {
		return err
	}
	if _, err := parent.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		parent.rewriteHanded(ctx, parent.st.discardHanded(sp.fr))
		return fmt.Errorf("txmq outbox: releasing a savepoint (the publishes staged inside it are discarded): %w", err)
	}
	parent.st.release(sp.fr)
	return nil
}

// sqlAppTx is the writer of rows into the app's *sql.Tx (WithSQLTx's).
func (s *Store) sqlAppTx(tx *sql.Tx) *appTx {
	return &appTx{s: s, exec: func(ctx context.Context, sql string, args ...any) error {
		_, err := tx.ExecContext(ctx, sql, args...)
		return err
	}}
}

// callSQLFn runs fn, calling rollback when it fails or panics (the panic goes on).
func callSQLFn(ctx context.Context, tx *sql.Tx, fn func(context.Context, *sql.Tx) error, rollback func()) (err error) {
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

// adhocRelay runs relay passes for RunInSQLTx on a store whose loops are not started: one at
// a time, a request during a pass asking for one more.
type adhocRelay struct {
	mu      sync.Mutex
	running bool
	again   bool
	idle    chan struct{} // closed when no pass runs; nil while none is running
}

// relayNow publishes the due rows soon: it wakes the started store's relay, or runs a pass
// in the background when the store is not started (nothing after Close).
func (s *Store) relayNow() {
	s.mu.Lock()
	started, closed := s.cancel != nil, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return
	case started:
		s.wake()
		return
	}
	a := &s.adhoc
	a.mu.Lock()
	if a.running {
		a.again = true
		a.mu.Unlock()
		return
	}
	a.running, a.again, a.idle = true, false, make(chan struct{})
	a.mu.Unlock()
	go func() {
		for {
			s.runPass(context.Background(), viaCommit)
			a.mu.Lock()
			if !a.again {
				a.running = false
				close(a.idle)
				a.idle = nil
				a.mu.Unlock()
				return
			}
			a.again = false
			a.mu.Unlock()
		}
	}()
}

// adhocIdle returns a channel closed when no background relay pass runs (nil: none runs).
func (s *Store) adhocIdle() <-chan struct{} {
	s.adhoc.mu.Lock()
	defer s.adhoc.mu.Unlock()
	if s.adhoc.idle == nil {
		return nil
	}
	return s.adhoc.idle
}

// handoffInSQLTx writes batches handed off (Store.Handoff) on a single-writer database while
// ctx carries an open transaction of this store: waiting for the writer there would wait for
// the caller itself. done reports that ctx carried one (and err how writing went). The
// handoffs still queued for the writer are written first (writeHandedInto): they were made
// earlier, and a key's rows are published in id order. Until the transaction ends the batches
// stay pending, so HoldsKey holds their keys. In a RunInSQLTx transaction the rows are its
// own until it ends: a savepoint rolled back writes them again into the enclosing level, and
// a transaction rolled back (or whose commit failed) queues them again at the head of the
// handoff queue, so they are never lost with the app's work. In a WithSQLTx transaction,
// whose end this store cannot see, they are written into it with a warning: they are lost if
// it rolls back.
func (s *Store) handoffInSQLTx(ctx context.Context, batches []core.OutgoingBatch) (done bool, err error) {
	if sc, ok := ctx.Value(sqlScopeKey{s}).(*sqlScope); ok {
		sc.st.mu.Lock()
		_, open := sc.st.top(sc.fr)
		sc.st.mu.Unlock()
		if !open {
			return false, nil
		}
		if _, err := s.writeHandedInto(ctx, sc.app.write, batches, sc.record); err != nil {
			return true, err
		}
		sc.staged.Store(true)
		return true, nil
	}
	tx, ok := core.TxFromContext(ctx)
	if !ok {
		return false, nil
	}
	a, ok := tx.(*appTx)
	if !ok || a.s != s {
		return false, nil
	}
	s.log.Warn("txmq outbox: batches handed off while a WithSQLTx transaction holds the database's only writer are written into that transaction; they are lost if it rolls back (use RunInSQLTx, which writes them again)",
		"queues", queueList(batches), "batches", len(batches))
	_, err = s.writeHandedInto(ctx, a.write, batches, nil)
	return true, err
}

// rewriteHanded writes again, at sc's level, batches handed off into a savepoint that was
// rolled back (see handoffInSQLTx).
func (sc *sqlScope) rewriteHanded(ctx context.Context, handed []core.OutgoingBatch) {
	if len(handed) == 0 {
		return
	}
	s := sc.st.s
	err := sc.app.write(context.WithoutCancel(ctx), handed)
	sc.st.mu.Lock()
	defer sc.st.mu.Unlock()
	top, ok := sc.st.top(sc.fr)
	if err != nil || !ok {
		s.log.Warn("txmq outbox: batches handed off into a savepoint that was rolled back are inserted on their own once the transaction ends",
			"queues", queueList(handed), "batches", len(handed), "error", err)
		sc.st.orphans = append(sc.st.orphans, handed...)
		return
	}
	top.handed = append(top.handed, handed...)
}

// rescueHanded queues again, at the head of the handoff queue, batches handed off into a
// RunInSQLTx transaction that did not commit (see handoffInSQLTx): the inserter writes them
// ahead of the handoffs queued since, so their keys keep their order.
func (s *Store) rescueHanded(handed []core.OutgoingBatch) {
	if len(handed) == 0 {
		return
	}
	s.requeue(handed)
	s.handoffs.mu.Lock()
	s.startInserterLocked()
	s.handoffs.mu.Unlock()
}

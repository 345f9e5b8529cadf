package parity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// The transactional properties run the Postgres outbox (package outbox) against the adapter:
// the app database is Options.PostgresURL, else TXMQ_POSTGRES_URL or the local default
// (skipped locally when it does not answer, a failure under CI=true). A skipped property is
// reported as skipped, never as passed.

func init() {
	register("transactions",
		property{name: "rollback_publishes_nothing", run: txRollback},
		property{name: "commit_delivers", run: txCommit},
		property{name: "crash_after_commit_swept", run: txCrashAfterCommit},
	)
	register("outages",
		property{name: "buffered_publishes_handed_to_outbox", run: handoffDuringOutage},
	)
}

// postgresPool returns a new pool on the suite's database, closed in x.T's cleanup.
func (x *X) postgresPool() *pgxpool.Pool {
	x.T.Helper()
	x.needPostgresAppDB("this property's direct use of the app database")
	if u := x.opts.PostgresURL; u != "" {
		return testenv.PostgresPoolAt(x.T, u, "parity.Options.PostgresURL")
	}
	return testenv.PostgresPool(x.T)
}

// store opens an outbox Store in a fresh schema of the test database, publishing to backend.
func (x *X) store(backend core.Backend, o outbox.Options) *outbox.Store {
	x.T.Helper()
	if db := x.appDB(); db != nil {
		return x.storeOn(db, backend, o, nil)
	}
	pool := x.postgresPool()
	o.Schema = testenv.PostgresSchema(x.T, pool)
	o.Backend = backend
	if o.Logger == nil {
		o.Logger = x.logger
	}
	ctx := x.ctx()
	if err := outbox.Migrate(ctx, pool, &o); err != nil {
		x.T.Fatalf("outbox.Migrate: %v", err)
	}
	s, err := outbox.New(pool, &o)
	if err != nil {
		x.T.Fatalf("outbox.New: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// sameSchemaStore opens a second Store (another process) on the schema of s.
func (x *X) sameSchemaStore(s *outbox.Store, backend core.Backend, o outbox.Options) *outbox.Store {
	x.T.Helper()
	if db := x.appDB(); db != nil {
		return x.storeOn(db, backend, o, s)
	}
	o.Schema = s.Schema()
	o.Backend = backend
	if o.Logger == nil {
		o.Logger = x.logger
	}
	s2, err := outbox.New(x.postgresPool(), &o)
	if err != nil {
		x.T.Fatalf("outbox.New: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s2.Close(ctx)
	})
	return s2
}

func outboxRows(x *X, s *outbox.Store) int {
	x.T.Helper()
	if db := x.appDB(); db != nil {
		return db.OutboxRows(x.T, s)
	}
	rows, err := s.ListOutbox(x.ctx(), outbox.OutboxFilter{Limit: 1000})
	if err != nil {
		x.T.Fatalf("ListOutbox: %v", err)
	}
	return len(rows)
}

var errRollback = errors.New("parity: roll back")

// txRollback: messages published inside a transaction that rolls back (Require, Try and
// Never queues alike) are never delivered; a later committed transaction's are.
func txRollback(x *X) {
	qr := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	qt := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try})
	qn := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Never})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{})
	for _, q := range []*txmq.Queue[Msg]{qr, qt, qn} {
		listen(x, rec, q, n, nil)
	}
	s := x.store(x.rawClient(), outbox.Options{})
	publishAll := func(ctx context.Context, prefix string) []string {
		var keys []string
		for _, q := range []*txmq.Queue[Msg]{qr, qt, qn} {
			for i := range 5 {
				k := fmt.Sprintf("%s-%s-%d", prefix, q.Name(), i)
				if err := q.Publish(ctx, n, Msg{K: k}); err != nil {
					x.T.Fatalf("Publish in tx: %v", err)
				}
				keys = append(keys, k)
			}
		}
		return keys
	}
	err := runInTx(x.ctx(), s, func(ctx context.Context) error {
		publishAll(ctx, "rolled-back")
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		x.T.Fatalf("RunInTx: %v; want the fn's error", err)
	}
	var committed []string
	if err := runInTx(x.ctx(), s, func(ctx context.Context) error {
		committed = publishAll(ctx, "committed")
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitDelivered(x, rec, committed)
	x.idle(n)
	assertSame(x, rec, committed)
	waitStoreIdle(x, s)
	if r := outboxRows(x, s); r != 0 {
		x.T.Fatalf("%d outbox rows left", r)
	}
}

// txCommit: a committed transaction's messages on Require, Try and Never queues are all
// delivered, and its outbox rows are gone.
func txCommit(x *X) {
	qr := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require, MaxBatchMessages: 7})
	qt := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try})
	qn := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Never})
	rec := newRecorder()
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	for _, q := range []*txmq.Queue[Msg]{qr, qt, qn} {
		listen(x, rec, q, a, nil)
		listen(x, rec, q, b, nil)
	}
	s := x.store(x.rawClient(), outbox.Options{})
	var keys []string
	if err := runInTx(x.ctx(), s, func(ctx context.Context) error {
		for _, q := range []*txmq.Queue[Msg]{qr, qt, qn} {
			keys = append(keys, publishKeysCtx(ctx, x, q, a, "commit-"+q.Name(), 30, 4)...)
		}
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitDelivered(x, rec, keys)
	x.idle(a, b)
	assertSame(x, rec, keys)
	x.eventually(func() bool { return outboxRows(x, s) == 0 }, "outbox rows deleted after publish")
}

// unavailable is a backend client whose process "died" right after COMMIT: every publish
// fails, so the committed rows stay in the outbox.
type unavailable struct{ core.Backend }

func (unavailable) Publish(context.Context, core.OutgoingBatch) error {
	return fmt.Errorf("parity: the committing process died before publishing: %w", core.ErrBackendUnavailable)
}

// txCrashAfterCommit: rows committed by a process that died before publishing them are
// republished by another process's recovery sweep once they are older than the recovery
// age, and delivered.
func txCrashAfterCommit(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require, MaxBatchMessages: 5})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{})
	dead := x.store(unavailable{x.rawClient()}, outbox.Options{})
	var keys []string
	if err := runInTx(x.ctx(), dead, func(ctx context.Context) error {
		keys = publishKeysCtx(ctx, x, q, n, "crash", 23, 23)
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitStoreIdle(x, dead)
	if r := outboxRows(x, dead); r == 0 {
		x.T.Fatalf("no outbox rows left after a commit whose publish failed")
	}
	listen(x, rec, q, n, nil)
	live := x.sameSchemaStore(dead, x.rawClient(), outbox.Options{RecoveryAge: 300 * time.Millisecond})
	x.eventually(func() bool {
		if _, err := live.SweepOnce(x.ctx()); err != nil {
			x.T.Logf("SweepOnce: %v", err)
		}
		return outboxRows(x, live) == 0
	}, "the sweep republishes the committed rows")
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
}

// handoffDuringOutage: publishes buffered while the backend is broken are handed to the
// outbox (none dropped) and delivered after Restore by the recovery sweep.
func handoffDuringOutage(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 10})
	rec := newRecorder()
	s := x.store(x.rawClient(), outbox.Options{RecoveryAge: 300 * time.Millisecond, SweepInterval: 200 * time.Millisecond, BackoffBase: 200 * time.Millisecond, BackoffMax: time.Second})
	n := x.node(txmq.NodeOptions{Handoff: s})
	listen(x, rec, q, n, nil)
	x.Env.Break(x.T)
	keys := publishKeys(x, q, n, "outage", 45, 5)
	x.eventually(func() bool { st := n.Stats(); return st.Buffered == 0 && st.HandedOff > 0 }, func() string {
		return fmt.Sprintf("buffered publishes handed to the outbox: %+v", n.Stats())
	})
	x.Env.Restore(x.T)
	if err := s.Start(x.ctx()); err != nil {
		x.T.Fatalf("Store.Start: %v", err)
	}
	waitDelivered(x, rec, keys)
	x.idle(n)
	assertSame(x, rec, keys)
	st := n.Stats()
	if d := st.Dropped[core.ReasonNoOutbox] + st.Dropped[core.ReasonOutboxHandoffFailed]; d != 0 {
		x.T.Fatalf("%d batches dropped instead of handed off: %v", d, st.Dropped)
	}
	x.eventually(func() bool { return outboxRows(x, s) == 0 }, "outbox rows deleted after publish")
}

package outbox_test

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	errs := make(chan error, 6)
	for range 6 {
		go func() { errs <- outbox.Migrate(ctx, e.pool, &outbox.Options{Schema: e.schema}) }()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{e.schema, "txmq_migrations"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(outbox.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files) {
		t.Fatalf("txmq_migrations has %d rows after 6 concurrent Migrate calls, want one per migration file (%d)", n, len(files))
	}
}

func TestRunInTxCommitPublishesAndDeletes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (1)"); err != nil {
			return err
		}
		for i := range 3 {
			if err := e.orders.Publish(ctx, e.node, msg{i}); err != nil {
				return err
			}
		}
		// Require queue with MaxBatchMessages 2: 5 messages are 3 batches.
		if err := e.strict.PublishMany(ctx, e.node, []msg{{10}, {11}, {12}, {13}, {14}}); err != nil {
			return err
		}
		if n := len(e.be.published()); n != 0 {
			t.Errorf("%d batches published before commit", n)
		}
		return e.notes.Publish(ctx, e.node, msg{99}) // Never: after commit
	})
	if err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	if got := e.be.messages(t, "orders"); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("orders published %v, want [0 1 2]", got)
	}
	var strictBatches int
	for _, b := range e.be.published() {
		if b.Queue == "strict" {
			strictBatches++
		}
	}
	if got := e.be.messages(t, "strict"); strictBatches != 3 || len(got) != 5 {
		t.Errorf("strict published %v in %d batches, want 5 messages in 3 batches", got, strictBatches)
	}
	if n := e.outboxRows(t); n != 0 {
		t.Errorf("%d outbox rows left after publishing, want 0", n)
	}
	if n := e.bizRows(t); n != 1 {
		t.Errorf("business rows = %d, want 1", n)
	}
	// The Never message went to the node's buffer after commit.
	waitFor(t, 3*time.Second, "the Never message", func() bool { return len(e.be.messages(t, "notes")) == 1 })
}

func TestRunInTxRollback(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	boom := errors.New("business failed")
	err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (1)"); err != nil {
			return err
		}
		if err := e.orders.Publish(ctx, e.node, msg{1}); err != nil {
			return err
		}
		if err := e.notes.Publish(ctx, e.node, msg{2}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("RunInTx = %v, want the fn's error", err)
	}
	if err := e.node.Close(ctx); err != nil { // flushes the buffer: nothing may be in it
		t.Fatal(err)
	}
	if n := e.be.callCount(); n != 0 {
		t.Errorf("%d publishes after rollback, want 0", n)
	}
	if n := e.outboxRows(t) + e.bizRows(t); n != 0 {
		t.Errorf("%d rows left after rollback, want 0", n)
	}
}

func TestRunInTxPanicRollsBack(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic did not go through RunInTx")
			}
		}()
		_ = e.store.RunInTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
			_ = e.orders.Publish(ctx, e.node, msg{1})
			panic("boom")
		})
	}()
	if n := e.be.callCount() + e.outboxRows(t); n != 0 {
		t.Errorf("something was published or left after a panic (%d)", n)
	}
}

func TestSavepoints(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	boom := errors.New("inner failed")
	var afterRan []int
	err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := e.orders.Publish(ctx, e.node, msg{1}); err != nil {
			return err
		}
		// A failed savepoint discards its own messages and rows only.
		err := e.store.Savepoint(ctx, func(ctx context.Context, sp pgx.Tx) error {
			if _, err := sp.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (2)"); err != nil {
				return err
			}
			if err := e.orders.Publish(ctx, e.node, msg{2}); err != nil {
				return err
			}
			tx, _ := core.TxFromContext(ctx)
			tx.AfterCommit(func() { afterRan = append(afterRan, 2) })
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("Savepoint = %v, want the inner error", err)
		}
		// A nested RunInTx is a savepoint too; released, it joins the parent.
		return e.store.RunInTx(ctx, func(ctx context.Context, sp pgx.Tx) error {
			if _, err := sp.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (3)"); err != nil {
				return err
			}
			tx, _ := core.TxFromContext(ctx)
			tx.AfterCommit(func() { afterRan = append(afterRan, 3) })
			return e.orders.Publish(ctx, e.node, msg{3})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	got := e.be.messages(t, "orders")
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 3}) {
		t.Errorf("published %v, want [1 3]", got)
	}
	if !slices.Equal(afterRan, []int{3}) {
		t.Errorf("after-commit callbacks ran %v, want [3]", afterRan)
	}
	if n := e.bizRows(t); n != 1 {
		t.Errorf("business rows = %d, want 1 (the released savepoint's)", n)
	}
	if err := e.store.Savepoint(ctx, func(context.Context, pgx.Tx) error { return nil }); !errors.Is(err, core.ErrNoTransaction) {
		t.Errorf("Savepoint outside RunInTx = %v, want ErrNoTransaction", err)
	}
}

func TestInsertErrorRollsBackBusinessTx(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, "ALTER TABLE "+pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()+
		" ADD CONSTRAINT no_orders CHECK (queue <> 'orders')"); err != nil {
		t.Fatal(err)
	}
	err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (1)"); err != nil {
			return err
		}
		return e.orders.Publish(ctx, e.node, msg{1})
	})
	if err == nil || !strings.Contains(err.Error(), `"orders"`) || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("RunInTx = %v, want an insert error naming the queue and the rollback", err)
	}
	if n := e.bizRows(t); n != 0 {
		t.Errorf("business row committed despite the failed outbox insert")
	}
	if n := e.be.callCount(); n != 0 {
		t.Errorf("%d publishes, want 0", n)
	}
}

func TestAfterCommitFailureLeavesRowForSweep(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.BackoffBase = 50 * time.Millisecond
		o.RecoveryAge = 200 * time.Millisecond
	})
	ctx := context.Background()
	publish := func(n int) {
		t.Helper()
		if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return e.orders.Publish(ctx, e.node, msg{n})
		}); err != nil {
			t.Fatalf("RunInTx returned %v; a committed transaction must not report a publish failure", err)
		}
		e.settle(t)
	}
	// A plain error counts an attempt and schedules the row.
	e.be.setFail(errPlain)
	publish(1)
	rows, err := e.store.ListOutbox(ctx, outbox.OutboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Attempts != 1 || rows[0].NextAttemptAt.IsZero() || !strings.Contains(rows[0].LastError, "backend said no") {
		t.Fatalf("after a failed publish: rows %+v, want one with attempts 1, a next attempt and the error", rows)
	}
	// An unavailable backend counts nothing: the row waits for the recovery age.
	e.be.setFail(errUnavailable)
	publish(2)
	rows, _ = e.store.ListOutbox(ctx, outbox.OutboxFilter{})
	if len(rows) != 2 || rows[1].Attempts != 0 || !rows[1].NextAttemptAt.IsZero() {
		t.Fatalf("after an unavailable backend: rows %+v, want the second with no attempt and no next time", rows)
	}
	e.be.setFail(nil)
	time.Sleep(100 * time.Millisecond) // past the first row's backoff, before the recovery age
	if n, err := e.store.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("SweepOnce = %d, %v; want 1 (the scheduled row only)", n, err)
	}
	time.Sleep(200 * time.Millisecond)
	if n, err := e.store.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("SweepOnce = %d, %v; want 1 (the unscheduled row, now past the recovery age)", n, err)
	}
	if got := e.be.messages(t, "orders"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("published %v, want [1 2]", got)
	}
	if n := e.outboxRows(t); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

func TestStageAfterEndIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var kept context.Context
	if err := e.store.RunInTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
		kept = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.orders.Publish(kept, e.node, msg{1}); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Fatalf("publish with a finished transaction's context = %v, want an error", err)
	}
}

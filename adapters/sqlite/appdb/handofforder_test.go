package appdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox/outboxtest"
)

// The order of a key's handoffs while a transaction of the app holds SQLite's only writer
// (the defect behind parity seed 6710994293527331955 on sqlite-appdb: "key p-1: message 14
// delivered before message 9"). A handoff made outside the transaction waits in memory for
// the writer; a later one of the same key made inside it must not take a lower id, and no
// other connection may find the key free while its rows wait in the transaction.

// publishedAfterSweeps brings the backend back, waits for the handoffs waiting for the
// writer, sweeps, and returns the numbers published on queue q, in order.
func publishedAfterSweeps(t *testing.T, e *env, q string) []int {
	t.Helper()
	ctx := context.Background()
	e.Backend.SetFail(nil)
	if err := e.Store.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.Store.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return e.Backend.Messages(t, q)
}

// TestHandoffInTxFollowsQueuedHandoff: handoff 1 of key k, made while a RunInSQLTx
// transaction holds the writer, waits in memory; handoff 2 of k, made inside the transaction
// (the node's flush of a key the transaction publishes), is written after it, not before.
func TestHandoffInTxFollowsQueuedHandoff(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		e := setup(t, nil)
		e.Backend.SetFail(errDown)
		ctx := context.Background()
		err := e.Store.RunInSQLTx(ctx, func(tctx context.Context, tx *sql.Tx) error {
			// Outside the transaction: queued, returns once it has waited singleWriterWait.
			if err := e.Store.Handoff(ctx, []core.OutgoingBatch{outboxtest.Batch("orders", "k", 1)}); err != nil {
				return err
			}
			if err := e.Store.Handoff(tctx, []core.OutgoingBatch{outboxtest.Batch("orders", "k", 2)}); err != nil {
				return err
			}
			if !commit {
				return errRolledBack
			}
			return nil
		})
		if commit && err != nil || !commit && err != errRolledBack {
			t.Fatalf("RunInSQLTx (commit %v) = %v", commit, err)
		}
		if got := publishedAfterSweeps(t, e, "orders"); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("commit %v: published %v, want [1 2]", commit, got)
		}
	}
}

var (
	errRolledBack = errSentinel("rolled back")
	errDown       = fmt.Errorf("down: %w", core.ErrBackendUnavailable)
)

type errSentinel string

func (e errSentinel) Error() string { return string(e) }

// TestHandedKeyHeldUntilCommit: a key whose queued handoff was written into an app
// transaction (RunInSQLTx or WithSQLTx) is held (HoldsKey, HeldKeys) until the transaction
// has ended, though no other connection sees its row yet: a node's later direct publish of the
// key must follow the row into the outbox, not overtake it on the backend.
func TestHandedKeyHeldUntilCommit(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"RunInSQLTx", "WithSQLTx"} {
		e := setup(t, nil)
		e.Backend.SetFail(errDown) // the rows stay in the outbox until publishedAfterSweeps
		ctx := context.Background()
		held := func() bool {
			t.Helper()
			h, err := e.Store.HoldsKey(ctx, "orders", "k2")
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		inTx := func(tctx context.Context) error {
			// k2's handoff waits for the writer; the transaction's publish writes it in first.
			if err := e.Store.Handoff(ctx, []core.OutgoingBatch{outboxtest.Batch("orders", "k2", 1)}); err != nil {
				return err
			}
			if !held() {
				t.Errorf("%s: k2 not held while its handoff is queued", via)
			}
			if err := e.Orders.Publish(tctx, e.Node, msg{N: 2}); err != nil { // staged after the handoff
				return err
			}
			if !held() {
				t.Errorf("%s: k2 not held while its row waits in the open transaction", via)
			}
			keys, err := e.Store.HeldKeys(ctx, []string{"orders"})
			if err != nil {
				return err
			}
			if !slices.Contains(keys["orders"], "k2") {
				t.Errorf("%s: HeldKeys = %v while k2's row waits in the open transaction", via, keys)
			}
			return nil
		}
		var err error
		if via == "RunInSQLTx" {
			err = e.Store.RunInSQLTx(ctx, func(tctx context.Context, _ *sql.Tx) error { return inTx(tctx) })
		} else {
			var tx *sql.Tx
			if tx, err = e.DB.BeginTx(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if err = inTx(e.Store.WithSQLTx(ctx, tx)); err == nil {
				err = tx.Commit()
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", via, err)
		}
		if err := e.Store.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if !held() {
			t.Fatalf("%s: k2 not held after the commit, its row in the table", via)
		}
		if got := publishedAfterSweeps(t, e, "orders"); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("%s: published %v, want [1 2]", via, got)
		}
		if held() {
			t.Fatalf("%s: k2 still held after its row was published", via)
		}
	}
}

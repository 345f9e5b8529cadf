package outboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// RunOutbox runs the outbox's tests on target, each a parallel subtest: RunInSQLTx,
// savepoints, WithSQLTx, the sweep's backoff and dead letters, key order, what needs
// PostgreSQL, and a transaction committed by fn itself.
func RunOutbox(t *testing.T, target *Target) {
	t.Run("RunInSQLTx", func(t *testing.T) { testRunInSQLTx(t, target) })
	t.Run("SQLSavepoints", func(t *testing.T) { testSQLSavepoints(t, target) })
	t.Run("WithSQLTx", func(t *testing.T) { testWithSQLTx(t, target) })
	t.Run("SweepBackoffDeadLetterReplay", func(t *testing.T) { testSweepBackoffDeadLetterReplay(t, target) })
	t.Run("KeyOrder", func(t *testing.T) { testKeyOrder(t, target) })
	t.Run("NeedsPostgres", func(t *testing.T) { testNeedsPostgres(t, target) })
	t.Run("RunInSQLTxCommittedByFn", func(t *testing.T) { testRunInSQLTxCommittedByFn(t, target) })
}

// RunInSQLTx: committed publishes are published (at once, by the relay woken at commit)
// and their rows deleted; a transaction that fails publishes nothing, on every routing mode.
func testRunInSQLTx(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	ctx := context.Background()
	if err := e.Store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+e.Biz+" VALUES (?)", i); err != nil {
				return err
			}
			if err := e.Orders.Publish(ctx, e.Node, Msg{i}); err != nil {
				return err
			}
			if err := e.Strict.Publish(ctx, e.Node, Msg{i}); err != nil {
				return err
			}
			return e.Notes.Publish(ctx, e.Node, Msg{i})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+e.Biz+" VALUES (99)"); err != nil {
			return err
		}
		_ = e.Orders.Publish(ctx, e.Node, Msg{99})
		_ = e.Strict.Publish(ctx, e.Node, Msg{99})
		_ = e.Notes.Publish(ctx, e.Node, Msg{99})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("RunInSQLTx = %v, want fn's error", err)
	}
	txmqtest.Eventually(t, 5*time.Second, func() bool {
		return len(e.Backend.Messages(t, "orders")) == 3 && len(e.Backend.Messages(t, "strict")) == 3 && e.Count(t, "txmq_outbox") == 0
	}, "the outbox rows published")
	if err := e.Node.Close(ctx); err != nil { // flushes the Never messages' buffer
		t.Fatal(err)
	}
	for _, q := range []string{"orders", "strict", "notes"} {
		got := e.Backend.Messages(t, q)
		slices.Sort(got)
		if !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("queue %s published %v, want [0 1 2] (nothing of the rolled-back transaction)", q, got)
		}
	}
	if n := e.Count(t, "biz"); n != 3 {
		t.Errorf("biz rows = %d, want 3", n)
	}
}

// SQLSavepoints: a savepoint rolled back discards what was published inside it, however
// it was made (SQLSavepoint, a nested RunInSQLTx, SAVEPOINT statements on the tx); a released
// one keeps it.
func testSQLSavepoints(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	ctx := context.Background()
	if err := e.Store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_ = e.Orders.Publish(ctx, e.Node, Msg{1})
		_ = e.Notes.Publish(ctx, e.Node, Msg{1})
		if err := e.Store.SQLSavepoint(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_ = e.Orders.Publish(ctx, e.Node, Msg{2})
			_ = e.Notes.Publish(ctx, e.Node, Msg{2})
			return boom
		}); !errors.Is(err, boom) {
			return fmt.Errorf("savepoint: %v", err)
		}
		if err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_ = e.Orders.Publish(ctx, e.Node, Msg{3})
			_ = e.Notes.Publish(ctx, e.Node, Msg{3})
			return nil
		}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT raw"); err != nil {
			return err
		}
		_ = e.Orders.Publish(ctx, e.Node, Msg{4})
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT raw"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT raw2"); err != nil {
			return err
		}
		_ = e.Orders.Publish(ctx, e.Node, Msg{5})
		_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT raw2")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 5*time.Second, func() bool { return e.Count(t, "txmq_outbox") == 0 && len(e.Backend.Messages(t, "orders")) >= 3 }, "the outbox rows published")
	if err := e.Node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.Backend.Messages(t, "orders")
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 3, 5}) {
		t.Errorf("orders published %v, want [1 3 5]", got)
	}
	notes := e.Backend.Messages(t, "notes")
	slices.Sort(notes)
	if !slices.Equal(notes, []int{1, 3}) {
		t.Errorf("notes published %v, want [1 3]", notes)
	}
}

// WithSQLTx: rows written into an app-managed transaction are published after its commit
// by the polling relay, and never after a rollback.
func testWithSQLTx(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, func(o *outbox.Options) { o.PollInterval = 20 * time.Millisecond })
	ctx := context.Background()
	if err := e.Store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, commit := range []bool{true, false, true} {
		tx, err := e.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Strict.Publish(e.Store.WithSQLTx(ctx, tx), e.Node, Msg{i}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	txmqtest.Eventually(t, 5*time.Second, func() bool { return len(e.Backend.Messages(t, "strict")) == 2 }, "the committed rows published")
	got := e.Backend.Messages(t, "strict")
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 2}) {
		t.Errorf("published %v, want [0 2]", got)
	}
}

// SweepBackoffDeadLetterReplay: a failing publish counts attempts and backs off; past
// MaxAttempts the row moves to the dead-letter table in the page's transaction; a dead letter
// replays once; an unavailable backend stops the sweep without counting.
func testSweepBackoffDeadLetterReplay(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, func(o *outbox.Options) {
		o.MaxAttempts = 2
		o.BackoffBase, o.BackoffMax = time.Microsecond, time.Microsecond
	})
	ctx := context.Background()
	if err := e.Store.Handoff(ctx, []core.OutgoingBatch{Batch("orders", "", 1)}); err != nil {
		t.Fatal(err)
	}
	e.Backend.SetFail(fmt.Errorf("down: %w", core.ErrBackendUnavailable))
	if _, err := e.Store.SweepOnce(ctx); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("sweep on an unavailable backend = %v", err)
	}
	var attempts int
	if err := e.DB.QueryRow("SELECT attempts FROM " + e.Table("txmq_outbox")).Scan(&attempts); err != nil || attempts != 0 {
		t.Fatalf("attempts after an outage = %d (%v), want 0", attempts, err)
	}
	e.Backend.SetFail(ErrPlain)
	for range 2 {
		time.Sleep(2 * time.Millisecond) // the microsecond backoff passes
		if _, err := e.Store.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Count(t, "txmq_outbox"); n != 0 {
		t.Fatalf("outbox rows = %d after MaxAttempts, want 0", n)
	}
	dead, err := e.Store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders"})
	if err != nil || len(dead) != 1 || dead[0].Reason != core.ReasonPublishExhausted || !dead[0].Dead() {
		t.Fatalf("dead letters = %+v, %v", dead, err)
	}
	// The engine's dead letter of the same batch keeps the first row.
	err = e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonDeliveryExhausted, Error: "x"})
	if !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("second dead letter = %v, want ErrAlreadyDeadLettered", err)
	}
	e.Backend.SetFail(nil)
	if err := e.Store.Replay(ctx, dead[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Replay(ctx, dead[0].ID); !errors.Is(err, outbox.ErrAlreadyReplayed) {
		t.Fatalf("second replay = %v, want ErrAlreadyReplayed", err)
	}
	if got := e.Backend.Messages(t, "orders"); !slices.Equal(got, []int{1}) {
		t.Fatalf("published %v, want [1]", got)
	}
	// The original coming back (generation 0, below the row's one replay) is not a failure of
	// the replay: the row stays replayed.
	err = e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonWorkerLost, Error: "stale", Attempts: 2})
	if !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("dead letter of the original after its replay = %v, want ErrAlreadyDeadLettered", err)
	}
	if got, err := e.Store.GetDeadLetter(ctx, dead[0].ID); err != nil || got.Dead() || got.Reason != core.ReasonPublishExhausted {
		t.Fatalf("dead letter after the original came back = %+v, %v; want it replayed, first reason kept", got, err)
	}
	// The replay (generation 1) failing again makes it dead again.
	if err := e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonDeliveryExhausted, Error: "again", Attempts: 5, Replays: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := e.Store.GetDeadLetter(ctx, dead[0].ID)
	if err != nil || !got.Dead() || got.Reason != core.ReasonDeliveryExhausted || got.ReplayCount != 1 {
		t.Fatalf("dead letter after failing again = %+v, %v", got, err)
	}
	if _, err := e.Store.GetDeadLetter(ctx, 1<<40); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing dead letter = %v", err)
	}
	if n, err := e.Store.ReplayQueue(ctx, "orders"); err != nil || n != 1 {
		t.Fatalf("ReplayQueue = %d, %v", n, err)
	}
	if counts, err := e.Store.DeadLetterCounts(ctx); err != nil || counts["orders"] != 0 {
		t.Fatalf("DeadLetterCounts after the replay = %v, %v", counts, err)
	}
	if n, err := e.Store.Purge(ctx, outbox.DLQFilter{Queue: "orders", Limit: 10}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	// Purged, the batch's second replay (generation 2) fails for good: its new row starts its
	// replay count at the generation, so that once replayed again (generation 3) a stale copy
	// of generation 2 coming back is not taken for a failure of the new replay.
	if err := e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonDeliveryExhausted, Error: "after purge", Attempts: 5, Replays: 2}); err != nil {
		t.Fatal(err)
	}
	again, err := e.Store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders"})
	if err != nil || len(again) != 1 || !again[0].Dead() || again[0].ReplayCount != 2 {
		t.Fatalf("dead letters after the purge = %+v, %v; want one, dead, its replay count the generation (2)", again, err)
	}
	if err := e.Store.Replay(ctx, again[0].ID); err != nil {
		t.Fatal(err)
	}
	err = e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonWorkerLost, Error: "stale", Attempts: 2, Replays: 2})
	if !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("dead letter of generation 2 after the row's replay = %v, want ErrAlreadyDeadLettered", err)
	}
	if got, err := e.Store.GetDeadLetter(ctx, again[0].ID); err != nil || got.Dead() || got.ReplayCount != 3 {
		t.Fatalf("dead letter after a stale copy came back = %+v, %v; want it replayed (count 3), not dead", got, err)
	}
	// A generation above the row's count (a copy from before the row) makes it dead and raises
	// the count to it.
	if err := e.Store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonDeliveryExhausted, Error: "later", Attempts: 5, Replays: 5}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Store.GetDeadLetter(ctx, again[0].ID); err != nil || !got.Dead() || got.ReplayCount != 5 || got.LastError != "later" {
		t.Fatalf("dead letter of generation 5 = %+v, %v; want dead, replay count 5, the new error", got, err)
	}
	if n, err := e.Store.Purge(ctx, outbox.DLQFilter{Queue: "orders", Limit: 10}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
}

// KeyOrder: the rows of an ordering key leave in id order; a failed row holds the rest of
// its key for the pass, and other keys go on.
func testKeyOrder(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, func(o *outbox.Options) { o.BackoffBase, o.BackoffMax = time.Microsecond, time.Microsecond })
	ctx := context.Background()
	var bs []core.OutgoingBatch
	for i := range 6 {
		bs = append(bs, Batch("orders", []string{"a", "b"}[i%2], i))
	}
	if err := e.Store.Handoff(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if rows, err := e.Store.ListOutbox(ctx, outbox.OutboxFilter{Queue: "orders"}); err != nil || len(rows) != 6 || rows[0].CreatedAt.IsZero() {
		t.Fatalf("ListOutbox = %d rows, %v", len(rows), err)
	}
	if b, err := e.Store.Backlog(ctx); err != nil || b["orders"].Rows != 6 {
		t.Fatalf("Backlog = %v, %v", b, err)
	}
	held, err := e.Store.HoldsKey(ctx, "orders", "a")
	if err != nil || !held {
		t.Fatalf("HoldsKey = %v, %v", held, err)
	}
	keys, err := e.Store.HeldKeys(ctx, []string{"orders"})
	if err != nil || len(keys["orders"]) != 2 {
		t.Fatalf("HeldKeys = %v, %v", keys, err)
	}
	if _, err := e.Store.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.Backend.Messages(t, "orders"); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("published %v, want id order", got)
	}
}

// NeedsPostgres: what only PostgreSQL has is refused with an error naming it.
func testNeedsPostgres(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	ctx := context.Background()
	if err := e.Store.RunInTx(ctx, nil); !errors.Is(err, outbox.ErrNeedsPostgres) {
		t.Errorf("RunInTx = %v", err)
	}
	if e.Store.Dialect() != target.Dialect {
		t.Errorf("Dialect = %q, want %q", e.Store.Dialect(), target.Dialect)
	}
}

// RunInSQLTxCommittedByFn: fn committing the transaction itself is reported, not taken for
// a failed commit that published nothing.
func testRunInSQLTxCommittedByFn(t *testing.T, target *Target) {
	t.Parallel()
	e := Setup(t, target, nil)
	ctx := context.Background()
	err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := e.Orders.Publish(ctx, e.Node, Msg{1}); err != nil {
			return err
		}
		return tx.Commit()
	})
	if !errors.Is(err, sql.ErrTxDone) || !strings.Contains(err.Error(), "committed or rolled back by fn itself") {
		t.Fatalf("RunInSQLTx = %v", err)
	}
}

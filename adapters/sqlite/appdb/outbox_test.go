package appdb_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
)

// TestRunInSQLTx: committed publishes are published (at once, by the relay woken at commit)
// and their rows deleted; a transaction that fails publishes nothing, on every routing mode.
func TestRunInSQLTx(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	if err := e.store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := e.store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO biz VALUES (?)", i); err != nil {
				return err
			}
			if err := e.orders.Publish(ctx, e.node, msg{i}); err != nil {
				return err
			}
			if err := e.strict.Publish(ctx, e.node, msg{i}); err != nil {
				return err
			}
			return e.notes.Publish(ctx, e.node, msg{i})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	err := e.store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO biz VALUES (99)"); err != nil {
			return err
		}
		_ = e.orders.Publish(ctx, e.node, msg{99})
		_ = e.strict.Publish(ctx, e.node, msg{99})
		_ = e.notes.Publish(ctx, e.node, msg{99})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("RunInSQLTx = %v, want fn's error", err)
	}
	waitFor(t, 5*time.Second, "the outbox rows published", func() bool {
		return len(e.be.messages(t, "orders")) == 3 && len(e.be.messages(t, "strict")) == 3 && e.count(t, "txmq_outbox") == 0
	})
	if err := e.node.Close(ctx); err != nil { // flushes the Never messages' buffer
		t.Fatal(err)
	}
	for _, q := range []string{"orders", "strict", "notes"} {
		got := e.be.messages(t, q)
		slices.Sort(got)
		if !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("queue %s published %v, want [0 1 2] (nothing of the rolled-back transaction)", q, got)
		}
	}
	if n := e.count(t, "biz"); n != 3 {
		t.Errorf("biz rows = %d, want 3", n)
	}
}

// TestSQLSavepoints: a savepoint rolled back discards what was published inside it, however
// it was made (SQLSavepoint, a nested RunInSQLTx, SAVEPOINT statements on the tx); a released
// one keeps it.
func TestSQLSavepoints(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	if err := e.store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := e.store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_ = e.orders.Publish(ctx, e.node, msg{1})
		_ = e.notes.Publish(ctx, e.node, msg{1})
		if err := e.store.SQLSavepoint(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_ = e.orders.Publish(ctx, e.node, msg{2})
			_ = e.notes.Publish(ctx, e.node, msg{2})
			return boom
		}); !errors.Is(err, boom) {
			return fmt.Errorf("savepoint: %v", err)
		}
		if err := e.store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_ = e.orders.Publish(ctx, e.node, msg{3})
			_ = e.notes.Publish(ctx, e.node, msg{3})
			return nil
		}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT raw"); err != nil {
			return err
		}
		_ = e.orders.Publish(ctx, e.node, msg{4})
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT raw"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT raw2"); err != nil {
			return err
		}
		_ = e.orders.Publish(ctx, e.node, msg{5})
		_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT raw2")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the outbox rows published", func() bool { return e.count(t, "txmq_outbox") == 0 && len(e.be.messages(t, "orders")) >= 3 })
	if err := e.node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.be.messages(t, "orders")
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 3, 5}) {
		t.Errorf("orders published %v, want [1 3 5]", got)
	}
	notes := e.be.messages(t, "notes")
	slices.Sort(notes)
	if !slices.Equal(notes, []int{1, 3}) {
		t.Errorf("notes published %v, want [1 3]", notes)
	}
}

// TestWithSQLTx: rows written into an app-managed transaction are published after its commit
// by the polling relay, and never after a rollback.
func TestWithSQLTx(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.PollInterval = 20 * time.Millisecond })
	ctx := context.Background()
	if err := e.store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, commit := range []bool{true, false, true} {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.strict.Publish(e.store.WithSQLTx(ctx, tx), e.node, msg{i}); err != nil {
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
	waitFor(t, 5*time.Second, "the committed rows published", func() bool { return len(e.be.messages(t, "strict")) == 2 })
	got := e.be.messages(t, "strict")
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 2}) {
		t.Errorf("published %v, want [0 2]", got)
	}
}

// batch makes a one-message batch of queue, with ordering key key.
func batch(queue, key string, n int) core.OutgoingBatch {
	id := core.NewID()
	return core.OutgoingBatch{ID: id, Queue: queue, Key: key, Body: envelope.Encode(&envelope.Envelope{
		ID: id, Queue: queue, Key: key, Created: time.Now(), MessageIDs: []string{core.NewID()},
		Messages: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))},
	})}
}

// TestSweepBackoffDeadLetterReplay: a failing publish counts attempts and backs off; past
// MaxAttempts the row moves to the dead-letter table in the page's transaction; a dead letter
// replays once; an unavailable backend stops the sweep without counting.
func TestSweepBackoffDeadLetterReplay(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.MaxAttempts = 2
		o.BackoffBase, o.BackoffMax = time.Microsecond, time.Microsecond
	})
	ctx := context.Background()
	if err := e.store.Handoff(ctx, []core.OutgoingBatch{batch("orders", "", 1)}); err != nil {
		t.Fatal(err)
	}
	e.be.setFail(fmt.Errorf("down: %w", core.ErrBackendUnavailable))
	if _, err := e.store.SweepOnce(ctx); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("sweep on an unavailable backend = %v", err)
	}
	var attempts int
	if err := e.db.QueryRow("SELECT attempts FROM txmq_outbox").Scan(&attempts); err != nil || attempts != 0 {
		t.Fatalf("attempts after an outage = %d (%v), want 0", attempts, err)
	}
	e.be.setFail(errPlain)
	for range 2 {
		time.Sleep(2 * time.Millisecond) // the microsecond backoff passes
		if _, err := e.store.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count(t, "txmq_outbox"); n != 0 {
		t.Fatalf("outbox rows = %d after MaxAttempts, want 0", n)
	}
	dead, err := e.store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: "orders"})
	if err != nil || len(dead) != 1 || dead[0].Reason != core.ReasonPublishExhausted || !dead[0].Dead() {
		t.Fatalf("dead letters = %+v, %v", dead, err)
	}
	// The engine's dead letter of the same batch keeps the first row.
	err = e.store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonDeliveryExhausted, Error: "x"})
	if !errors.Is(err, core.ErrAlreadyDeadLettered) {
		t.Fatalf("second dead letter = %v, want ErrAlreadyDeadLettered", err)
	}
	e.be.setFail(nil)
	if err := e.store.Replay(ctx, dead[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replay(ctx, dead[0].ID); !errors.Is(err, outbox.ErrAlreadyReplayed) {
		t.Fatalf("second replay = %v, want ErrAlreadyReplayed", err)
	}
	if got := e.be.messages(t, "orders"); !slices.Equal(got, []int{1}) {
		t.Fatalf("published %v, want [1]", got)
	}
	// Failing again after the replay makes it dead again.
	if err := e.store.DeadLetter(ctx, &core.DeadLetter{Queue: "orders", BatchID: dead[0].BatchID, Body: dead[0].Body, Reason: core.ReasonDeliveryExhausted, Error: "again", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.GetDeadLetter(ctx, dead[0].ID)
	if err != nil || !got.Dead() || got.Reason != core.ReasonDeliveryExhausted || got.ReplayCount != 1 {
		t.Fatalf("dead letter after failing again = %+v, %v", got, err)
	}
	if _, err := e.store.GetDeadLetter(ctx, 1<<40); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing dead letter = %v", err)
	}
	if n, err := e.store.ReplayQueue(ctx, "orders"); err != nil || n != 1 {
		t.Fatalf("ReplayQueue = %d, %v", n, err)
	}
	if counts, err := e.store.DeadLetterCounts(ctx); err != nil || counts["orders"] != 0 {
		t.Fatalf("DeadLetterCounts after the replay = %v, %v", counts, err)
	}
	if n, err := e.store.Purge(ctx, outbox.DLQFilter{Queue: "orders", Limit: 10}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
}

// TestKeyOrder: the rows of an ordering key leave in id order; a failed row holds the rest of
// its key for the pass, and other keys go on.
func TestKeyOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.BackoffBase, o.BackoffMax = time.Microsecond, time.Microsecond })
	ctx := context.Background()
	var bs []core.OutgoingBatch
	for i := range 6 {
		bs = append(bs, batch("orders", []string{"a", "b"}[i%2], i))
	}
	if err := e.store.Handoff(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if rows, err := e.store.ListOutbox(ctx, outbox.OutboxFilter{Queue: "orders"}); err != nil || len(rows) != 6 || rows[0].CreatedAt.IsZero() {
		t.Fatalf("ListOutbox = %d rows, %v", len(rows), err)
	}
	if b, err := e.store.Backlog(ctx); err != nil || b["orders"].Rows != 6 {
		t.Fatalf("Backlog = %v, %v", b, err)
	}
	held, err := e.store.HoldsKey(ctx, "orders", "a")
	if err != nil || !held {
		t.Fatalf("HoldsKey = %v, %v", held, err)
	}
	keys, err := e.store.HeldKeys(ctx, []string{"orders"})
	if err != nil || len(keys["orders"]) != 2 {
		t.Fatalf("HeldKeys = %v, %v", keys, err)
	}
	if _, err := e.store.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.be.messages(t, "orders"); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("published %v, want id order", got)
	}
}

// TestNeedsPostgres: what only PostgreSQL has is refused with an error naming it.
func TestNeedsPostgres(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	if err := e.store.RunInTx(ctx, nil); !errors.Is(err, outbox.ErrNeedsPostgres) {
		t.Errorf("RunInTx = %v", err)
	}
	if e.store.Dialect() != "sqlite" {
		t.Errorf("Pauses = %v, Dialect = %q", e.store.Pauses(), e.store.Dialect())
	}
}

// TestRunInSQLTxCommittedByFn: fn committing the transaction itself is reported, not taken for
// a failed commit that published nothing.
func TestRunInSQLTxCommittedByFn(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	err := e.store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := e.orders.Publish(ctx, e.node, msg{1}); err != nil {
			return err
		}
		return tx.Commit()
	})
	if !errors.Is(err, sql.ErrTxDone) || !strings.Contains(err.Error(), "committed or rolled back by fn itself") {
		t.Fatalf("RunInSQLTx = %v", err)
	}
}

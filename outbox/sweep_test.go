package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestHandoffRowsAreDueAtOnce: rows handed off by core's buffer are eligible for the very next
// sweep, while rows left by a crash between commit and the after-commit publish (no next-attempt
// time) still wait for the recovery age.
func TestHandoffRowsAreDueAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Hour })
	ctx := context.Background()
	table := pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()
	// A row as a RunInTx commit leaves it when its process dies before publishing.
	crashed := e.handoff(t, 1)[0]
	if _, err := e.pool.Exec(ctx, "UPDATE "+table+" SET next_attempt_at = NULL WHERE batch_id = $1", crashed.ID); err != nil {
		t.Fatal(err)
	}
	e.handoff(t, 2)
	if n, err := e.store.SweepOnce(ctx); err != nil || n != 2 {
		t.Fatalf("SweepOnce right after the handoff = %d, %v; want 2: handed-off rows are due at once", n, err)
	}
	if n := e.outboxRows(t); n != 1 {
		t.Fatalf("%d rows left; want 1: the crash-left row waits for the recovery age", n)
	}
}

func TestSweepBackoffSchedule(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond })
	ctx := context.Background()
	e.handoff(t, 3)
	time.Sleep(5 * time.Millisecond)
	e.be.setFail(errPlain)
	table := pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i, delay := range want {
		n, err := e.store.SweepOnce(ctx)
		if err != nil || n != 0 {
			t.Fatalf("sweep %d = %d, %v; want 0 published and no error (plain errors go on)", i+1, n, err)
		}
		rows, err := e.pool.Query(ctx, "SELECT attempts, extract(epoch FROM next_attempt_at - now())::float8, last_error FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for rows.Next() {
			var attempts int
			var secs float64
			var last string
			if err := rows.Scan(&attempts, &secs, &last); err != nil {
				t.Fatal(err)
			}
			count++
			got := time.Duration(secs * float64(time.Second))
			if attempts != i+1 || got < delay-5*time.Second || got > delay+time.Second || last != errPlain.Error() {
				t.Errorf("after sweep %d: attempts %d, next in %v, error %q; want %d, ~%v, %q", i+1, attempts, got, last, i+1, delay, errPlain)
			}
		}
		if count != 3 {
			t.Fatalf("%d rows, want 3: a row must never be dropped", count)
		}
		// Make them due again for the next sweep.
		if _, err := e.pool.Exec(ctx, "UPDATE "+table+" SET next_attempt_at = now() - interval '1 second'"); err != nil {
			t.Fatal(err)
		}
	}
	if calls := e.be.callCount(); calls != 3*len(want) {
		t.Errorf("%d publish calls, want %d (every row tried on every sweep)", calls, 3*len(want))
	}
}

func TestSweepStopsWhenUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond })
	ctx := context.Background()
	e.handoff(t, 3)
	time.Sleep(5 * time.Millisecond)
	e.be.setFail(errUnavailable)
	n, err := e.store.SweepOnce(ctx)
	if n != 0 || !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("SweepOnce = %d, %v; want 0 and an error wrapping ErrBackendUnavailable", n, err)
	}
	if calls := e.be.callCount(); calls != 1 {
		t.Errorf("%d publish calls, want 1: the sweep stops at the first unavailable error", calls)
	}
	rows, err := e.store.ListOutbox(ctx, outbox.OutboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Attempts != 0 || r.NextAttemptAt.After(time.Now()) { // handed-off rows stay due now
			t.Errorf("row %d: attempts %d, next %v; an unavailable backend must not count an attempt", r.ID, r.Attempts, r.NextAttemptAt)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	e.be.setFail(nil)
	if n, err := e.store.SweepOnce(ctx); err != nil || n != 3 {
		t.Fatalf("SweepOnce after recovery = %d, %v; want 3", n, err)
	}
}

func TestConcurrentSweepersPublishEachRowOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.RecoveryAge = time.Millisecond
		o.SweepPageSize = 7
	})
	e.be.delay = 200 * time.Microsecond
	ctx := context.Background()
	const rows = 300
	bs := e.handoff(t, rows)
	time.Sleep(5 * time.Millisecond)
	// Other stores on the same schema, as other nodes would have.
	stores := []*outbox.Store{e.store}
	for range 3 {
		s, err := outbox.New(e.pool, &outbox.Options{Schema: e.schema, Backend: e.be, Logger: quiet,
			RecoveryAge: time.Millisecond, SweepPageSize: 7})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	for _, s := range stores {
		for range 2 {
			wg.Go(func() {
				if _, err := s.SweepOnce(ctx); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	perBatch := map[string]int{}
	for _, b := range e.be.published() {
		perBatch[b.ID]++
	}
	for _, b := range bs {
		if perBatch[b.ID] != 1 {
			t.Errorf("batch %s published %d times, want once", b.ID, perBatch[b.ID])
		}
	}
	if n := e.outboxRows(t); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

func TestAppManagedTransactions(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.SweepInterval = time.Hour }) // only the relay can publish in time
	ctx := context.Background()
	if err := e.store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close(context.Background()) })
	if err := e.store.Start(ctx); err == nil {
		t.Error("second Start succeeded")
	}
	db, err := sql.Open("pgx", testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	type appTx struct {
		name   string
		begin  func(t *testing.T) (context.Context, func() error, func(string) error)
		number int
	}
	cases := []appTx{
		{"pgx.Tx", func(t *testing.T) (context.Context, func() error, func(string) error) {
			tx, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(ctx) })
			return e.store.WithTx(ctx, tx), func() error { return tx.Commit(ctx) },
				func(q string) error { _, err := tx.Exec(ctx, q); return err }
		}, 1},
		{"sql.Tx", func(t *testing.T) (context.Context, func() error, func(string) error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback() })
			return e.store.WithSQLTx(ctx, tx), tx.Commit,
				func(q string) error { _, err := tx.ExecContext(ctx, q); return err }
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tctx, commit, exec := tc.begin(t)
			if err := exec("INSERT INTO " + e.biz + " VALUES (" + string(rune('0'+tc.number)) + ")"); err != nil {
				t.Fatal(err)
			}
			if err := e.strict.Publish(tctx, e.node, msg{tc.number}); err != nil {
				t.Fatal(err)
			}
			if err := e.notes.Publish(tctx, e.node, msg{0}); err == nil || !strings.Contains(err.Error(), "Never") {
				t.Errorf("Never publish inside an app-managed transaction = %v, want a clear refusal", err)
			}
			time.Sleep(50 * time.Millisecond)
			if n := len(e.be.messages(t, "strict")); n != tc.number-1 {
				t.Fatalf("published before commit")
			}
			if n := e.outboxRows(t); n != 0 {
				t.Fatalf("row visible outside the transaction before commit")
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			waitFor(t, time.Second, "the relay to publish the committed row", func() bool {
				return len(e.be.messages(t, "strict")) == tc.number
			})
			t.Logf("published %v after commit", time.Since(start))
			waitFor(t, time.Second, "the published row to be deleted", func() bool { return e.outboxRows(t) == 0 })
		})
	}
	// A rolled-back app transaction leaves nothing.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.orders.Publish(e.store.WithTx(ctx, tx), e.node, msg{7}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(e.be.messages(t, "orders")) + e.outboxRows(t); n != 0 {
		t.Errorf("rolled-back app transaction published or left %d", n)
	}
	if err := e.store.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStartRunsSweepAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.RecoveryAge = time.Millisecond
		o.SweepInterval = time.Hour
	})
	e.handoff(t, 2)
	time.Sleep(5 * time.Millisecond)
	if err := e.store.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close(context.Background()) })
	waitFor(t, 2*time.Second, "the first sweep at Start", func() bool { return len(e.be.published()) == 2 })
}

func TestBacklog(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.handoff(t, 3)
	bl, err := e.store.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := bl["orders"]; len(bl) != 1 || b.Rows != 3 || b.Failing != 0 || b.Oldest.IsZero() || b.OldestAge < 0 {
		t.Fatalf("Backlog = %+v", bl)
	}
	rows, err := e.store.ListOutbox(ctx, outbox.OutboxFilter{Queue: "orders", Limit: 2})
	if err != nil || len(rows) != 2 {
		t.Fatalf("ListOutbox = %d rows, %v; want 2", len(rows), err)
	}
	more, err := e.store.ListOutbox(ctx, outbox.OutboxFilter{Queue: "orders", AfterID: rows[1].ID})
	if err != nil || len(more) != 1 {
		t.Fatalf("ListOutbox page 2 = %d rows, %v; want 1", len(more), err)
	}
	if none, _ := e.store.ListOutbox(ctx, outbox.OutboxFilter{Queue: "other"}); len(none) != 0 {
		t.Fatalf("ListOutbox(other) = %v", none)
	}
}

func TestRelayReconnects(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.SweepInterval = time.Hour })
	ctx := context.Background()
	if err := e.store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close(context.Background()) })
	var killed int
	if err := e.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, "LISTEN "+pgx.Identifier{"txmq_outbox_" + e.schema}.Sanitize()).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d LISTEN connections, want 1", killed)
	}
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.orders.Publish(e.store.WithTx(ctx, tx), e.node, msg{5}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the relay to reconnect and publish", func() bool { return len(e.be.published()) == 1 })
}

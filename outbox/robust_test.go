package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// rowsByBatch returns the outbox rows keyed by batch id.
func (e *env) rowsByBatch(t *testing.T) map[string]outbox.OutboxRow {
	t.Helper()
	rows, err := e.store.ListOutbox(context.Background(), outbox.OutboxFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]outbox.OutboxRow{}
	for _, r := range rows {
		out[r.BatchID] = r
	}
	return out
}

// publishedCount counts the successful publishes of batch id.
func (e *env) publishedCount(id string) int {
	n := 0
	for _, b := range e.be.published() {
		if b.ID == id {
			n++
		}
	}
	return n
}

// A publish that hangs until the page's timeout must not roll the page back: the rows published
// before it are deleted (not published again by every later sweep), and the hung row counts an
// attempt and is scheduled later (it does not hang every sweep at once again).
func TestSweepHungPublishKeepsThePageWork(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.RecoveryAge = time.Millisecond
		o.PublishTimeout = 300 * time.Millisecond
	})
	ctx := context.Background()
	bs := e.handoff(t, 3)
	time.Sleep(5 * time.Millisecond)
	hang := bs[1].ID
	e.be.fn = func(ctx context.Context, ob core.OutgoingBatch) error {
		if ob.ID == hang {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	start := time.Now()
	_, _ = e.store.SweepOnce(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("SweepOnce took %v with PublishTimeout 300ms", d)
	}
	rows := e.rowsByBatch(t)
	if _, left := rows[bs[0].ID]; left {
		t.Errorf("row of batch 0 was published before the hang but is still in the outbox: it will be published again")
	}
	r, ok := rows[hang]
	if !ok {
		t.Fatalf("the hung row disappeared: rows must never be dropped")
	}
	if r.Attempts != 1 || r.NextAttemptAt.IsZero() || !strings.Contains(r.LastError, "deadline") {
		t.Errorf("hung row: attempts %d, next %v, error %q; want 1 attempt, scheduled later, a deadline error", r.Attempts, r.NextAttemptAt, r.LastError)
	}
	// The next sweeps never publish batch 0 again.
	e.be.fn = nil
	_, _ = e.store.SweepOnce(ctx)
	if n := e.publishedCount(bs[0].ID); n != 1 {
		t.Errorf("batch 0 published %d times, want 1", n)
	}
	if n := e.publishedCount(bs[2].ID); n != 1 {
		t.Errorf("batch 2 published %d times, want 1", n)
	}
}

// A backend that ignores its context must not keep the page's rows locked past the publish
// timeout: other sweepers (and Replay, and the app) must get them back.
func TestSweepPublishIgnoringContextReleasesLocks(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.RecoveryAge = time.Millisecond
		o.PublishTimeout = 200 * time.Millisecond
	})
	ctx := context.Background()
	bs := e.handoff(t, 2)
	time.Sleep(5 * time.Millisecond)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	e.be.fn = func(_ context.Context, ob core.OutgoingBatch) error {
		if ob.ID == bs[0].ID {
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			return errors.New("too late")
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.store.SweepOnce(ctx)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("SweepOnce still running 2s after a 200ms publish timeout: the hung publish holds its page's row locks")
	}
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT id FROM "+pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()+" FOR UPDATE NOWAIT) x").Scan(&n); err != nil {
		t.Fatalf("locking the outbox rows after the sweep returned: %v", err)
	}
	if n != 1 {
		t.Errorf("%d rows left, want 1 (the hung one)", n)
	}
}

// A publish error whose text is not valid UTF-8 text for PostgreSQL (a NUL byte, a rune cut at
// the length cap) must still be recorded: otherwise the page rolls back and every sweep
// publishes its rows again while the failing row never backs off.
func TestSweepRecordsAnyErrorText(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"nul":     "backend echoed \x00 binary",
		"cut":     strings.Repeat("a", 1999) + "é and more",
		"invalid": "bad \xff\xfe bytes",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond })
			ctx := context.Background()
			bs := e.handoff(t, 2)
			time.Sleep(5 * time.Millisecond)
			e.be.fn = func(_ context.Context, ob core.OutgoingBatch) error {
				if ob.ID == bs[1].ID {
					return errors.New(text)
				}
				return nil
			}
			if _, err := e.store.SweepOnce(ctx); err != nil {
				t.Fatalf("SweepOnce: %v", err)
			}
			rows := e.rowsByBatch(t)
			if _, left := rows[bs[0].ID]; left {
				t.Errorf("the published row is still in the outbox")
			}
			if r := rows[bs[1].ID]; r.Attempts != 1 || r.LastError == "" {
				t.Errorf("failing row: attempts %d, error %q; want 1 and the error recorded", r.Attempts, r.LastError)
			}
		})
	}
}

// A backend whose Publish panics must not crash the sweep (and with it the app): the panic is a
// failed publish of that row.
func TestSweepSurvivesPublishPanic(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond })
	ctx := context.Background()
	bs := e.handoff(t, 2)
	time.Sleep(5 * time.Millisecond)
	e.be.fn = func(_ context.Context, ob core.OutgoingBatch) error {
		if ob.ID == bs[1].ID {
			panic("adapter bug")
		}
		return nil
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("SweepOnce panicked: %v", r)
			}
		}()
		if _, err := e.store.SweepOnce(ctx); err != nil {
			t.Fatalf("SweepOnce: %v", err)
		}
	}()
	rows := e.rowsByBatch(t)
	if _, left := rows[bs[0].ID]; left {
		t.Errorf("the published row is still in the outbox")
	}
	if r := rows[bs[1].ID]; r.Attempts != 1 || !strings.Contains(r.LastError, "adapter bug") {
		t.Errorf("panicking row: attempts %d, error %q; want 1 and the panic recorded", r.Attempts, r.LastError)
	}
}

// A dead letter whose error text holds a NUL byte or invalid UTF-8 is still stored.
func TestDeadLetterAnyErrorText(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	bs := e.handoff(t, 1)
	dl := &core.DeadLetter{Queue: "orders", BatchID: bs[0].ID, Body: bs[0].Body, Reason: "delivery_exhausted",
		Error: "listener said \x00 and \xff", Attempts: 5, Messages: 1}
	if err := e.store.DeadLetter(ctx, dl); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	got, err := e.store.ListDeadLetters(ctx, outbox.DLQFilter{})
	if err != nil || len(got) != 1 || !strings.Contains(got[0].LastError, "listener said") {
		t.Fatalf("ListDeadLetters = %+v, %v", got, err)
	}
}

// Close racing Start (an app shutting down while it starts) must never leave the relay
// running: Close returns, and no LISTEN connection of the store survives.
func TestCloseDuringStartLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.SweepInterval = time.Hour })
	ctx := context.Background()
	listen := "LISTEN " + pgx.Identifier{"txmq_outbox_" + e.schema}.Sanitize()
	for i := range 30 {
		s, err := outbox.New(e.pool, &outbox.Options{Schema: e.schema, Backend: e.be, Logger: quiet, SweepInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan error, 1)
		go func() { started <- s.Start(ctx) }()
		time.Sleep(time.Duration(i%4) * 500 * time.Microsecond)
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	waitFor(t, 3*time.Second, "no LISTEN connection left after Close", func() bool {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`, listen).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// Two operators replaying one queue at once publish each dead letter once.
func TestConcurrentReplayQueuePublishesOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	const n = 150 // more than one page of ReplayQueue
	for range n {
		if err := e.store.DeadLetter(ctx, deadBatch(t, "orders", 5)); err != nil {
			t.Fatal(err)
		}
	}
	e.be.delay = 100 * time.Microsecond
	results := make(chan int, 2)
	for range 2 {
		go func() {
			got, err := e.store.ReplayQueue(ctx, "orders")
			if err != nil {
				t.Errorf("ReplayQueue: %v", err)
			}
			results <- got
		}()
	}
	total := <-results + <-results
	if total != n {
		t.Errorf("the two ReplayQueue calls replayed %d in total, want %d", total, n)
	}
	seen := map[string]int{}
	for _, b := range e.be.published() {
		seen[b.ID]++
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("batch %s published %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d batches published, want %d", len(seen), n)
	}
}

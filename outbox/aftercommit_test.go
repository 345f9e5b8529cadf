package outbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// settle waits until the after-commit publishing of the RunInTx calls made so far is over
// (Store.WaitIdle): RunInTx returns before its rows are published and deleted.
func (e *env) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.store.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// hang makes every Publish of e's backend block, ignoring its context, until the returned
// release is called; the blocked publishes then fail (as a backend frozen mid-call would).
func (e *env) hang(t *testing.T) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	e.be.fn = func(context.Context, core.OutgoingBatch) error {
		select {
		case <-gate:
			return nil
		default:
		}
		<-gate
		return errPlain
	}
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

// A backend that hangs after commit must not hold RunInTx past its caller's deadline: the
// call returns once the transaction committed, the committed rows stay in the outbox, and
// once the backend answers again the sweep publishes every one of them (nothing lost).
func TestRunInTxReturnsWithinDeadlineOnHungBackend(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) {
		o.PublishTimeout = 5 * time.Second // far past the callers' deadline
		o.BackoffBase = time.Millisecond
		o.RecoveryAge = time.Millisecond
	})
	release := e.hang(t)
	const calls, deadline = 8, 300 * time.Millisecond
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES ($1)", i); err != nil {
					return err
				}
				return e.orders.Publish(ctx, e.node, msg{i})
			})
			// The bound is generous for a loaded machine; a call waiting for the backend
			// takes PublishTimeout (5 s).
			if took := time.Since(start); took > deadline+2*time.Second {
				t.Errorf("RunInTx %d took %v with a hung backend; want it back within its %v deadline", i, took, deadline)
			}
			if err != nil {
				t.Errorf("RunInTx %d = %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := e.bizRows(t); n != calls {
		t.Fatalf("%d business rows committed, want %d", n, calls)
	}
	if n := e.outboxRows(t); n != calls {
		t.Fatalf("%d outbox rows while the backend hangs, want %d (one per committed transaction)", n, calls)
	}
	release()
	ctx := context.Background()
	if err := e.store.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the sweep to publish every committed row", func() bool {
		if _, err := e.store.SweepOnce(ctx); err != nil {
			t.Logf("SweepOnce: %v", err)
		}
		return e.outboxRows(t) == 0
	})
	got := e.be.messages(t, "orders")
	slices.Sort(got)
	want := make([]int, calls)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(slices.Compact(got), want) {
		t.Fatalf("published %v, want each of %v at least once", got, want)
	}
}

// Close waits for the after-commit publishers only as long as its ctx allows, and leaves the
// rows they did not publish in the outbox; RunInTx after Close leaves its rows there too.
func TestCloseLeavesUnpublishedRowsInTheOutbox(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.PublishTimeout = 5 * time.Second })
	release := e.hang(t)
	ctx := context.Background()
	// More rows than publishers: some take a page of several rows, whose later rows must not be
	// published once Close gave up (the backend answers again right after Close).
	const rows = 12
	for i := range rows {
		if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return e.orders.Publish(ctx, e.node, msg{i})
		}); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.store.Close(cctx)
	if err == nil || !strings.Contains(err.Error(), "after-commit") {
		t.Fatalf("Close with hung publishers = %v, want an error naming the after-commit publishers", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v, want it bounded by its ctx (200 ms)", took)
	}
	if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return e.orders.Publish(ctx, e.node, msg{rows})
	}); err != nil {
		t.Fatalf("RunInTx after Close = %v; the store stays usable", err)
	}
	release()
	if err := e.store.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.outboxRows(t); n != rows+1 {
		t.Fatalf("%d outbox rows after Close, want %d (none published)", n, rows+1)
	}
	if n := len(e.be.published()); n != 0 {
		t.Fatalf("%d batches published after Close, want 0", n)
	}
}

// WaitIdle returns once the rows of the RunInTx calls before it are published and deleted.
func TestWaitIdleAfterRunInTx(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	for i := range 20 {
		if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return e.orders.Publish(ctx, e.node, msg{i})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.outboxRows(t); n != 0 {
		t.Fatalf("%d outbox rows left after WaitIdle, want 0", n)
	}
	if n := len(e.be.messages(t, "orders")); n != 20 {
		t.Fatalf("%d messages published, want 20", n)
	}
}

// A full hand-off queue never blocks RunInTx: the rows that do not fit stay in the outbox and
// the sweep publishes them once they are older than the recovery age.
func TestFullHandOffQueueLeavesRowsForTheSweep(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	e := setup(t, func(o *outbox.Options) {
		o.PublishTimeout = 5 * time.Second
		// An after-commit publisher gives up on a hung publish within the recovery age: it must
		// outlast the 8 calls (slow under -race on a loaded machine) for the queue to stay full.
		o.RecoveryAge = 2 * time.Second
		o.BackoffBase = time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	outbox.SetMaxPending(e.store, 1)
	release := e.hang(t)
	ctx := context.Background()
	// Each publisher holds one row; the rows after them fill the queue (1 row), then overflow.
	const calls = 8
	for i := range calls {
		start := time.Now()
		if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return e.orders.Publish(ctx, e.node, msg{i})
		}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("RunInTx %d took %v with a full hand-off queue; it must not wait", i, took)
		}
	}
	if !strings.Contains(logs.String(), "left in the outbox for the relay and the recovery sweep") {
		t.Fatalf("no log of the rows left to the sweep by the full hand-off queue; logs:\n%s", logs.String())
	}
	release() // the hung publishes fail (an attempt each); the later ones go through
	e.settle(t)
	waitFor(t, 15*time.Second, "the sweep to publish the rows left in the outbox (older than the recovery age)", func() bool {
		if _, err := e.store.SweepOnce(ctx); err != nil {
			t.Logf("SweepOnce: %v", err)
		}
		return e.outboxRows(t) == 0
	})
	got := e.be.messages(t, "orders")
	slices.Sort(got)
	if len(slices.Compact(got)) != calls {
		t.Fatalf("published %v, want each of 0..%d", got, calls-1)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers (a test logger's output).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A row young enough to be published without a lease (the default recovery age) is recorded
// as a leased one is when its publish fails: a refusal counts an attempt and schedules the
// row with backoff; an unavailable backend leaves it, no attempt counted, for the sweep.
func TestUnleasedRowFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fail      error
		attempts  int
		scheduled bool
	}{
		{"refused", errPlain, 1, true},
		{"unavailable", errUnavailable, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			e.be.setFail(tt.fail)
			ctx := context.Background()
			if err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				return e.orders.Publish(ctx, e.node, msg{1})
			}); err != nil {
				t.Fatal(err)
			}
			e.settle(t)
			if n := e.be.callCount(); n != 1 {
				t.Fatalf("%d publish calls, want 1", n)
			}
			var attempts int
			var scheduled bool
			if err := e.pool.QueryRow(ctx, "SELECT attempts, next_attempt_at IS NOT NULL FROM "+
				pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()).Scan(&attempts, &scheduled); err != nil {
				t.Fatal(err)
			}
			if attempts != tt.attempts || scheduled != tt.scheduled {
				t.Fatalf("row after a failed publish: attempts %d, scheduled %v; want %d, %v", attempts, scheduled, tt.attempts, tt.scheduled)
			}
		})
	}
}

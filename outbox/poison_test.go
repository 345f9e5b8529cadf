package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

var errRejected = fmt.Errorf("value too large for the backend: %w", core.ErrRejected)

// deadHooks counts the store's DeadLettered hook calls by reason.
type deadHooks struct {
	mu  sync.Mutex
	got map[string]int
}

func (h *deadHooks) hooks() *outbox.Hooks {
	return &outbox.Hooks{DeadLettered: func(_ string, reason string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.got == nil {
			h.got = map[string]int{}
		}
		h.got[reason]++
	}}
}

func (h *deadHooks) count(reason string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[reason]
}

// A row the backend refuses permanently (core.ErrRejected) is dead-lettered on its first
// attempt, in the page's transaction, and the rows behind it in the page are published.
func TestRejectedRowDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	h := &deadHooks{}
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond; o.Hooks = h.hooks() })
	ctx := context.Background()
	var poison string
	e.be.fn = func(_ context.Context, ob core.OutgoingBatch) error {
		if ob.ID == poison {
			return errRejected
		}
		return nil
	}
	bs := e.handoff(t, 4)
	poison = bs[0].ID // the first row of the page
	time.Sleep(5 * time.Millisecond)
	n, err := e.store.SweepOnce(ctx)
	if err != nil || n != 3 {
		t.Fatalf("SweepOnce = %d, %v; want the 3 rows behind the refused one published and no error", n, err)
	}
	if rows := e.outboxRows(t); rows != 0 {
		t.Fatalf("%d outbox rows left; the refused row must leave the outbox as a dead letter", rows)
	}
	dls, err := e.store.ListDeadLetters(ctx, outbox.DLQFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters = %+v, %v; want 1", dls, err)
	}
	dl := dls[0]
	if dl.Reason != core.ReasonRejected || dl.BatchID != poison || dl.Queue != "orders" || dl.Messages != 1 ||
		!strings.Contains(dl.LastError, "value too large") || string(dl.Body) != string(bs[0].Body) {
		t.Fatalf("dead letter %+v", dl)
	}
	calls := e.be.callCount()
	if n, err := e.store.SweepOnce(ctx); err != nil || n != 0 || e.be.callCount() != calls {
		t.Fatalf("a second sweep published %d (%v) and made %d calls; the dead letter must not be retried", n, err, e.be.callCount()-calls)
	}
	if h.count(core.ReasonRejected) != 1 {
		t.Fatalf("DeadLettered hook: %v", h.got)
	}
}

// A refusal that also says "unavailable" is an outage: the sweep stops, nothing is dead-lettered.
func TestRejectedAndUnavailableIsAnOutage(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond })
	e.handoff(t, 2)
	time.Sleep(5 * time.Millisecond)
	e.be.setFail(fmt.Errorf("%w and %w", core.ErrRejected, core.ErrBackendUnavailable))
	if _, err := e.store.SweepOnce(context.Background()); !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("SweepOnce: %v; want it stopped as unavailable", err)
	}
	if e.outboxRows(t) != 2 || e.count(t, "txmq_dead_letters") != 0 {
		t.Fatal("rows were dead-lettered during an outage")
	}
}

// A row that keeps failing with other errors is dead-lettered once it has spent
// Options.MaxAttempts, and never before.
func TestRowDeadLetteredAfterBudget(t *testing.T) {
	t.Parallel()
	h := &deadHooks{}
	e := setup(t, func(o *outbox.Options) { o.RecoveryAge = time.Millisecond; o.MaxAttempts = 3; o.Hooks = h.hooks() })
	ctx := context.Background()
	e.handoff(t, 2)
	time.Sleep(5 * time.Millisecond)
	e.be.setFail(errPlain)
	table := pgx.Identifier{e.schema, "txmq_outbox"}.Sanitize()
	for i := range 3 {
		if _, err := e.store.SweepOnce(ctx); err != nil {
			t.Fatalf("sweep %d: %v", i+1, err)
		}
		rows, dead := e.outboxRows(t), e.count(t, "txmq_dead_letters")
		if i < 2 && (rows != 2 || dead != 0) {
			t.Fatalf("after attempt %d of 3: %d rows, %d dead letters; want 2 and 0", i+1, rows, dead)
		}
		if _, err := e.pool.Exec(ctx, "UPDATE "+table+" SET next_attempt_at = now() - interval '1 second'"); err != nil {
			t.Fatal(err)
		}
	}
	dls, err := e.store.ListDeadLetters(ctx, outbox.DLQFilter{})
	if err != nil || len(dls) != 2 || e.outboxRows(t) != 0 {
		t.Fatalf("after the budget: %d dead letters (%v), %d rows; want 2 and 0", len(dls), err, e.outboxRows(t))
	}
	for _, dl := range dls {
		if dl.Reason != core.ReasonPublishExhausted || !strings.Contains(dl.LastError, "failed 3 times") || !strings.HasSuffix(dl.LastError, errPlain.Error()) {
			t.Fatalf("dead letter %+v", dl)
		}
	}
	if h.count(core.ReasonPublishExhausted) != 2 {
		t.Fatalf("DeadLettered hook: %v", h.got)
	}
}

// A transactional publish the backend refuses after commit is dead-lettered by the commit's own
// publish, not left for the sweep to retry.
func TestRejectedAfterCommitDeadLettered(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.be.setFail(errRejected)
	if err := e.store.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error {
		return e.orders.Publish(ctx, e.node, msg{N: 1})
	}); err != nil {
		t.Fatal(err)
	}
	// The commit's publish may run in the background: wait for it, well before any sweep.
	waitFor(t, 5*time.Second, "the refused row moved to the dead letters", func() bool {
		return e.outboxRows(t) == 0 && e.count(t, "txmq_dead_letters") == 1
	})
}

func TestMaxAttemptsValidated(t *testing.T) {
	t.Parallel()
	if _, err := outbox.New(nil, &outbox.Options{MaxAttempts: -1, Backend: &fakeBackend{}}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxAttempts") {
		t.Fatalf("MaxAttempts -1: %v", err)
	}
}

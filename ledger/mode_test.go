package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// batch returns an encoded batch of queue q with the given message ids.
func batch(q, id string, ids ...string) core.OutgoingBatch {
	msgs := make([]json.RawMessage, len(ids))
	for i := range ids {
		msgs[i] = json.RawMessage(`{}`)
	}
	body := envelope.Encode(&envelope.Envelope{Version: envelope.Version, ID: id, Queue: q, Created: time.Now(), MessageIDs: ids, Messages: msgs})
	return core.OutgoingBatch{ID: id, Queue: q, Body: body, Messages: len(ids)}
}

// publishes records what a republisher published.
type publishes struct {
	mu   sync.Mutex
	got  []string // batch ids
	fail error
}

func (p *publishes) publish(_ context.Context, b core.OutgoingBatch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	if _, err := envelope.Decode(b.Body); err != nil {
		return fmt.Errorf("republished body: %w", err)
	}
	p.got = append(p.got, b.ID)
	return nil
}

func (p *publishes) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

// waitKept waits until the ledger keeps want batches.
func waitKept(t *testing.T, l *ledger.Ledger, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := l.KeptBatches(context.Background())
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept batches: %d, %v; want %d", n, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestModeSettleTouchRepublish: a batch whose completion or dead letter is recorded is no
// longer kept; one that showed a sign of life waits a horizon after it; one whose messages
// were all cancelled is settled by the republisher instead of published; the rest are
// published again once past the horizon, then not before twice the horizon; a backend
// reported unavailable stops the pass and counts no republish.
func TestModeSettleTouchRepublish(t *testing.T) {
	t.Parallel()
	horizon := time.Second
	l := open(t, ledger.Options{Mode: true, Horizon: horizon, RepublishInterval: time.Hour, NoPrune: true})
	ctx := context.Background()
	for _, b := range []core.OutgoingBatch{batch("q", "done", "d1", "d2"), batch("q", "dead", "x1"), batch("q", "alive", "a1"), batch("q", "gone", "c1"), batch("q", "lost", "l1", "l2")} {
		if err := l.KeepBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	l.RecordMessages([]core.MessageInfo{
		{ID: "d1", Queue: "q", BatchID: "done", State: core.StateCompleted, UpdatedAt: now},
		{ID: "d2", Queue: "q", BatchID: "done", State: core.StateCompleted, UpdatedAt: now},
		{ID: "x1", Queue: "q", BatchID: "dead", State: core.StateDead, UpdatedAt: now},
		{ID: "a1", Queue: "q", BatchID: "alive", State: core.StateRunning, UpdatedAt: now.Add(time.Hour)},
		{ID: "c1", Queue: "q", State: core.StateCancelled, UpdatedAt: now}, // no batch id: the republisher finds it
	})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waitKept(t, l, 3) // alive, gone, lost
	time.Sleep(horizon + 100*time.Millisecond)

	down := &publishes{fail: fmt.Errorf("%w: test", core.ErrBackendUnavailable)}
	if n, err := l.RepublishDue(ctx, down.publish); n != 0 || !errors.Is(err, core.ErrBackendUnavailable) {
		t.Fatalf("RepublishDue on a backend that is down = %d, %v; want 0 and ErrBackendUnavailable", n, err)
	}
	p := &publishes{}
	if n, err := l.RepublishDue(ctx, p.publish); n != 1 || err != nil {
		t.Fatalf("RepublishDue = %d, %v; want 1 (the lost batch)", n, err)
	}
	if got := p.ids(); len(got) != 1 || got[0] != "lost" {
		t.Fatalf("republished %v; want [lost]", got)
	}
	waitKept(t, l, 2) // the cancelled one is settled
	if n, err := l.RepublishDue(ctx, p.publish); n != 0 || err != nil {
		t.Fatalf("RepublishDue right after = %d, %v; want 0: the next deadline is twice the horizon away", n, err)
	}
	if s := l.Stats(); s.Republished != 1 || s.Kept != 5 {
		t.Fatalf("stats %+v; want 5 kept, 1 republished", s)
	}
}

// TestModeCancelScope: a kept batch whose message was cancelled is settled by the republisher
// instead of published, also when the id was published again since (the later message is
// alive, but the cancel still covers the kept batch).
func TestModeCancelScope(t *testing.T) {
	t.Parallel()
	horizon := 500 * time.Millisecond
	l := open(t, ledger.Options{Mode: true, Horizon: horizon, RepublishInterval: time.Hour, NoPrune: true, CancelCheck: 20 * time.Millisecond})
	ctx := context.Background()
	old := batch("q", "old", "r1")
	if err := l.KeepBatch(ctx, old); err != nil {
		t.Fatal(err)
	}
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "old", IDs: []string{"r1"}, State: core.StateQueued, UpdatedAt: time.Now()})
	if m, err := l.CancelMessage(ctx, "r1"); err != nil || m.State != core.StateCancelled {
		t.Fatalf("CancelMessage = %+v, %v", m, err)
	}
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "again", IDs: []string{"r1"}, State: core.StateQueued, UpdatedAt: time.Now(), PublishedAt: time.Now()})
	if m, err := l.GetMessage(ctx, "r1"); err != nil || m.State != core.StateQueued || m.BatchID != "again" {
		t.Fatalf("GetMessage after the later publish = %+v, %v; want queued in batch again", m, err)
	}
	time.Sleep(horizon + 100*time.Millisecond)
	p := &publishes{}
	if n, err := l.RepublishDue(ctx, p.publish); n != 0 || err != nil {
		t.Fatalf("RepublishDue = %d, %v (%v); want 0: the cancel covers the kept batch", n, err, p.ids())
	}
	waitKept(t, l, 0)
}

// TestModeGivesUp: after MaxRepublish republishes the ledger stops keeping a batch (counted).
func TestModeGivesUp(t *testing.T) {
	t.Parallel()
	horizon := 100 * time.Millisecond
	l := open(t, ledger.Options{Mode: true, Horizon: horizon, MaxRepublish: 1, RepublishInterval: time.Hour, NoPrune: true})
	ctx := context.Background()
	if err := l.KeepBatch(ctx, batch("q", "b", "m")); err != nil {
		t.Fatal(err)
	}
	p := &publishes{}
	deadline := time.Now().Add(20 * time.Second)
	for l.Stats().GaveUp == 0 {
		if _, err := l.RepublishDue(ctx, p.publish); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no give-up: stats %+v", l.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := p.ids(); len(got) != 1 {
		t.Fatalf("republished %v; want exactly one republish (MaxRepublish 1)", got)
	}
	waitKept(t, l, 0)
}

// TestModeOneRepublisher: while another session holds the republish lock (another node's
// pass), a pass publishes nothing; once it is released, the pass runs.
func TestModeOneRepublisher(t *testing.T) {
	t.Parallel()
	l := open(t, ledger.Options{Mode: true, Horizon: 50 * time.Millisecond, RepublishInterval: time.Hour, NoPrune: true})
	ctx := context.Background()
	if err := l.KeepBatch(ctx, batch("q", "b", "m")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	pool := testenv.PostgresPool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(0x7478_6d71), pgx.Identifier{l.Schema(), "txmq_ledger_batches"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	p := &publishes{}
	if n, err := l.RepublishDue(ctx, p.publish); n != 0 || err != nil {
		t.Fatalf("RepublishDue while another pass holds the lock = %d, %v; want 0", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := l.RepublishDue(ctx, p.publish); n != 1 || err != nil {
		t.Fatalf("RepublishDue after the lock's release = %d, %v; want 1", n, err)
	}
}

// TestModeOff: without Mode, KeepBatch keeps nothing, Keeping returns the backend itself and
// RunRepublisher returns at once.
func TestModeOff(t *testing.T) {
	t.Parallel()
	l := open(t, ledger.Options{})
	ctx := context.Background()
	if err := l.KeepBatch(ctx, batch("q", "b", "m")); err != nil {
		t.Fatal(err)
	}
	waitKept(t, l, 0)
	var be core.Backend
	if got := l.Keeping(be); got != be {
		t.Fatalf("Keeping with the mode off = %v; want the backend itself", got)
	}
	l.RunRepublisher(ctx, (&publishes{}).publish) // returns: the mode is off
}

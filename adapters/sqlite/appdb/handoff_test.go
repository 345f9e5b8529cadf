package appdb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestHandoffInsideTransaction: an ordered key's direct publish, still in the node's buffer
// when a transaction publishes the same key while the backend is down, is handed to the
// outbox inside that transaction (which holds SQLite's only writer) at once, not after the
// node's ClaimTimeout; a rolled-back transaction writes it again on its own. Nothing is lost,
// nothing dropped, and the key's rows leave in publish order.
func TestHandoffInsideTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	reg := txmq.NewRegistry()
	keyed := outboxtest.Must(txmq.DeclareIn(reg, "keyed", txmq.QueueConfig[msg]{Transactional: txmq.Try, Ordered: true}))
	var drops []string
	node := outboxtest.Must(txmq.NewNode(orderingBackend{e.Backend}, &txmq.NodeOptions{Registry: reg, Logger: quiet, Handoff: e.Store,
		FlushWindow: time.Hour, FlushCap: time.Hour, ClaimTimeout: 20 * time.Second,
		Hooks: &txmq.Hooks{Dropped: func(q, reason string, n int) { drops = append(drops, reason) }}}))
	defer node.Close(ctx)
	e.Backend.SetFail(fmt.Errorf("down: %w", core.ErrBackendUnavailable))
	boom := errors.New("boom")
	for i, commit := range []bool{true, false} {
		if err := keyed.Publish(ctx, node, msg{N: 10*i + 1}, txmq.Key("k")); err != nil { // buffered
			t.Fatal(err)
		}
		start := time.Now()
		err := e.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO biz VALUES (?)", i); err != nil {
				return err
			}
			if err := keyed.Publish(ctx, node, msg{N: 10*i + 2}, txmq.Key("k")); err != nil {
				return err
			}
			if !commit {
				return boom
			}
			return nil
		})
		if commit && err != nil || !commit && !errors.Is(err, boom) {
			t.Fatalf("RunInSQLTx (commit %v) = %v", commit, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("the transaction took %v: the handoff waited for the transaction's own lock", d)
		}
	}
	if len(drops) > 0 {
		t.Fatalf("dropped: %v", drops)
	}
	// In the outbox now: 1 and 2 (committed together), then 11 written again after the
	// rollback; 12 was rolled back.
	e.Backend.SetFail(nil)
	if err := e.Store.WaitIdle(ctx); err != nil { // the rolled-back handoff, queued again
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.Store.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.Backend.Messages(t, "keyed"); !slices.Equal(got, []int{1, 2, 11}) {
		t.Fatalf("published %v, want [1 2 11]", got)
	}
}

// orderingBackend is the fake backend claiming per-key order (it publishes nothing out of the
// order it is given, and delivers nothing).
type orderingBackend struct{ *outboxtest.Backend }

func (orderingBackend) OrdersKeys() error { return nil }

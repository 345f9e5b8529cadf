package txmq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestAppLedger: Open with Config.Ledger migrates and starts the ledger; messages published
// in a transaction and outside one are looked up through App.Inspector until completed; a
// message cancelled before its due time never reaches the listener, and its batch is acked.
func TestAppLedger(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	reg := txmq.NewRegistry()
	qtx := txmq.MustDeclareIn(reg, "ledgertx", txmq.QueueConfig[string]{Transactional: txmq.Require})
	qd := txmq.MustDeclareIn(reg, "ledgerdirect", txmq.QueueConfig[string]{Transactional: txmq.Try})
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg}, Ledger: &ledger.Options{FlushInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if app.Ledger == nil || app.Ledger.Schema() != schema {
		t.Fatalf("App.Ledger = %v; want a ledger in schema %s", app.Ledger, schema)
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	listener := func(_ context.Context, msgs []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen[m] = true
		}
		return nil
	}
	for _, q := range []*txmq.Queue[string]{qtx, qd} {
		if err := q.Listen(app.Node, listener); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Node.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := app.Store.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error {
		return qtx.Publish(ctx, app.Node, "in-tx", txmq.ID("tx-1"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := qd.PublishMany(ctx, app.Node, []string{"direct", "cancel-me"}, txmq.IDs("d-1", "d-2"), txmq.After(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := qd.Publish(ctx, app.Node, "cancel-whole", txmq.ID("d-3"), txmq.After(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	in := app.Inspector()
	waitState := func(id string, want core.MessageState) txmq.MessageInfo {
		t.Helper()
		var m txmq.MessageInfo
		txmqtest.Eventually(t, 20*time.Second, func() bool {
			m, err = in.Get(ctx, id)
			return err == nil && m.State == want
		}, "message "+id+" "+string(want))
		return m
	}
	for _, id := range []string{"d-2", "d-3"} {
		waitState(id, core.StateDelayed)
		if m, err := in.Cancel(ctx, id); err != nil || m.State != core.StateCancelled {
			t.Fatalf("Cancel(%s) = %+v, %v", id, m, err)
		}
	}
	waitState("tx-1", core.StateCompleted)
	waitState("d-1", core.StateCompleted)
	txmqtest.WaitIdle(t, app.Node)
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		d, err := app.Node.Depths(ctx)
		return err == nil && d["ledgerdirect"] == (core.Depth{})
	}, "the batch whose every message was cancelled is acked")
	mu.Lock()
	defer mu.Unlock()
	if !seen["in-tx"] || !seen["direct"] || seen["cancel-me"] || seen["cancel-whole"] {
		t.Errorf("listener saw %v; want in-tx and direct, never the cancelled ones", seen)
	}
	if m := waitState("d-2", core.StateCancelled); m.Queue != "ledgerdirect" {
		t.Errorf("cancelled message: %+v", m)
	}
	if _, err := in.Cancel(ctx, "d-1"); !errors.Is(err, txmq.ErrNotCancellable) {
		t.Errorf("Cancel of a completed message: %v; want ErrNotCancellable", err)
	}
}

// TestOpenLedgerNeedsDatabase: Config.Ledger without a database is an error naming the
// setting.
func TestOpenLedgerNeedsDatabase(t *testing.T) {
	t.Parallel()
	_, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", Ledger: &ledger.Options{}, Logger: txmqtest.DiscardLogger()})
	if !errors.Is(err, txmq.ErrInvalidConfig) || !strings.Contains(err.Error(), "TXMQ_DATABASE_URL") {
		t.Fatalf("Open = %v; want ErrInvalidConfig naming TXMQ_DATABASE_URL", err)
	}
}

// opaque hides a backend's optional interfaces.
type opaque struct{ core.Backend }

// TestInspectorNative: without a ledger, the memory backend answers Get, List and Cancel; a
// backend without core.BatchInspector gives ErrLookupUnsupported naming it.
func TestInspectorNative(t *testing.T) {
	t.Parallel()
	be := memory.New(nil)
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "native", txmq.QueueConfig[string]{Transactional: txmq.Try})
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ctx := context.Background()
	if err := q.PublishMany(ctx, n, []string{"a", "b"}, txmq.IDs("n-1", "n-2"), txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	in := n.Inspector()
	var m txmq.MessageInfo
	txmqtest.Eventually(t, 10*time.Second, func() bool { m, err = in.Get(ctx, "n-2"); return err == nil }, "n-2 stored")
	if m.State != core.StateDelayed || m.Queue != "native" || m.Due.Before(time.Now().Add(50*time.Minute)) {
		t.Errorf("Get = %+v", m)
	}
	for _, tt := range []struct {
		f    txmq.MessageFilter
		want int
	}{
		{txmq.MessageFilter{Queue: "native"}, 2},
		{txmq.MessageFilter{State: core.StateQueued}, 0},
		{txmq.MessageFilter{Limit: 1}, 1},
		{txmq.MessageFilter{Until: time.Now().Add(-time.Hour)}, 0},
	} {
		if ms, err := in.List(ctx, tt.f); err != nil || len(ms) != tt.want {
			t.Errorf("List(%+v) = %d messages, %v; want %d", tt.f, len(ms), err, tt.want)
		}
	}
	if _, err := in.List(ctx, txmq.MessageFilter{State: "sleeping"}); !errors.Is(err, txmq.ErrInvalidConfig) {
		t.Errorf("List with a bad state: %v", err)
	}
	if _, err := in.Cancel(ctx, "n-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Get(ctx, "n-1"); !errors.Is(err, txmq.ErrMessageNotFound) {
		t.Errorf("Get after Cancel: %v; want ErrMessageNotFound (taken out of its batch)", err)
	}
	if m, err := in.Get(ctx, "n-2"); err != nil || m.State != core.StateDelayed {
		t.Errorf("the other message of the batch: %+v, %v", m, err)
	}
	if _, err := in.Cancel(ctx, "n-2"); err != nil {
		t.Fatal(err)
	}
	if d, _ := be.Depths(ctx, []string{"native"}); d["native"] != (core.Depth{}) {
		t.Errorf("depths after cancelling every message: %+v; want the batch removed", d["native"])
	}

	_, err = txmq.NewInspector(nil, opaque{be}).Get(ctx, "x")
	if !errors.Is(err, txmq.ErrLookupUnsupported) || !strings.Contains(err.Error(), "opaque") || !strings.HasPrefix(err.Error(), "unknown:") {
		t.Errorf("Get on a backend without lookup: %v", err)
	}
}

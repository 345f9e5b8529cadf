package txmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestAppLedgerMode: Open with ledger mode keeps what the node publishes and what the outbox
// relays (two kept batches), settles both once they complete, and derives the horizon from
// the node's lease.
func TestAppLedgerMode(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	reg := txmq.NewRegistry()
	qtx := txmq.MustDeclareIn(reg, "modetx", txmq.QueueConfig[string]{Transactional: txmq.Require})
	qd := txmq.MustDeclareIn(reg, "modedirect", txmq.QueueConfig[string]{Transactional: txmq.Try})
	lease := 3 * time.Second
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg, Lease: lease},
		Ledger: &ledger.Options{Mode: true, FlushInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if got, want := app.Ledger.Horizon(), ledger.HorizonFor(lease); got != want {
		t.Fatalf("horizon %v; want HorizonFor(the node's lease) = %v", got, want)
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
	ctx := context.Background()
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := app.Store.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error { return qtx.Publish(ctx, app.Node, "tx") }); err != nil {
		t.Fatal(err)
	}
	if err := qd.Publish(ctx, app.Node, "direct"); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["tx"] && seen["direct"]
	}, "both messages delivered")
	if s := app.Ledger.Stats(); s.Kept < 2 {
		t.Fatalf("ledger stats %+v; want the node's batch and the outbox's kept", s)
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		n, err := app.Ledger.KeptBatches(ctx)
		return err == nil && n == 0
	}, "both kept batches settled after their completion")
}

// keeperFake is a ledger in mode whose keeps fail (the app database is down) and whose
// republisher publishes one given batch once.
type keeperFake struct {
	mu     sync.Mutex
	keeps  int
	replay core.OutgoingBatch
}

func (f *keeperFake) RecordBatch(core.BatchEvent) {}
func (f *keeperFake) CancelledMessages(context.Context, core.CancelCheck) (map[string]bool, error) {
	return nil, nil
}
func (f *keeperFake) Mode() bool { return true }
func (f *keeperFake) KeepBatch(context.Context, core.OutgoingBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keeps++
	return errors.New("keeperFake: the app database does not answer")
}
func (f *keeperFake) RunRepublisher(ctx context.Context, publish ledger.PublishFunc) {
	if err := publish(ctx, f.replay); err != nil {
		panic(err)
	}
	<-ctx.Done()
}

// TestNodeLedgerModeHooks: a node whose ledger is in mode asks it to keep each batch before
// the backend gets it, publishes the batch anyway when the keep fails, and runs the ledger's
// republisher, publishing what it hands over to the node's backend, until the node stops.
func TestNodeLedgerModeHooks(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "modehooks", txmq.QueueConfig[string]{Transactional: txmq.Never})
	replay := core.OutgoingBatch{ID: "replayed", Queue: q.Name(), Messages: 1,
		Body: envelope.Encode(&envelope.Envelope{Version: envelope.Version, ID: "replayed", Queue: q.Name(), Created: time.Now(), MessageIDs: []string{"r1"}, Messages: []json.RawMessage{json.RawMessage(`"replayed"`)}})}
	fake := &keeperFake{replay: replay}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	n, err := txmq.NewNode(memory.New(nil), &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), Ledger: fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Listen(n, func(_ context.Context, msgs []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen[m] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	if err := q.Publish(ctx, n, "direct"); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["direct"] && seen["replayed"]
	}, "the batch whose keep failed and the republished one delivered")
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.keeps != 1 {
		t.Fatalf("KeepBatch called %d times; want once, for the node's publish", fake.keeps)
	}
}

// TestLedgerRepublishKeepsIDDedup: a batch the ledger republishes still deduplicates its
// caller ids (the window rides in its envelope): a republished copy of a message whose id the
// backend holds within the queue's IDDedupWindow is not delivered again.
func TestLedgerRepublishKeepsIDDedup(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "modededup", txmq.QueueConfig[string]{Transactional: txmq.Never, IDDedupWindow: time.Minute})
	batch := func(id, body string) core.OutgoingBatch {
		env := &envelope.Envelope{Version: envelope.Version, ID: id, Queue: q.Name(), Created: time.Now(), DedupMillis: time.Minute.Milliseconds(),
			MessageIDs: []string{"r1"}, Messages: []json.RawMessage{json.RawMessage(`"` + body + `"`)}}
		return core.OutgoingBatch{ID: id, Queue: q.Name(), Messages: 1, Body: envelope.Encode(env)}
	}
	be := memory.New(nil)
	first := batch("first", "first")
	first.DedupWindow, first.DedupIDs = time.Minute, []string{"r1"}
	if err := be.Publish(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	fake := &keeperFake{replay: batch("replayed", "replayed")} // its DedupWindow left to the envelope
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), Ledger: fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Listen(n, func(_ context.Context, msgs []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen[m]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["first"] == 1
	}, "the stored message delivered")
	time.Sleep(500 * time.Millisecond) // a wrong second copy's chance to show
	txmqtest.WaitIdle(t, n)
	mu.Lock()
	defer mu.Unlock()
	if seen["replayed"] != 0 {
		t.Fatalf("the republished copy of id r1 was delivered (%v): ledger mode's republish skipped the id dedup", seen)
	}
}

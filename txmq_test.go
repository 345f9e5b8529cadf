package txmq_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/txmq/txmq/adapters/sqljobs" // postgres://

	"github.com/txmq/txmq/internal/envelope"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	app, err := txmq.Open(ctx, &txmq.Config{Logger: txmqtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if app.Store != nil || app.Pool != nil {
		t.Fatalf("no database configured, yet Store %v Pool %v", app.Store, app.Pool)
	}
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "greetings", txmq.QueueConfig[string]{Transactional: txmq.Try})
	app2, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	if err := q.Listen(app2.Node, func(_ context.Context, m []string) error { got <- m[0]; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := app2.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, app2.Node, "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "hello" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("message not delivered")
	}
	for _, a := range []*txmq.App{app, app2} {
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

func TestOpenErrorsRedactPasswords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, cfg := range []*txmq.Config{
		{Backend: "nosuch://u:hunter2@h"},
		{Backend: "memory://", DatabaseURL: "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1"},
		{Backend: "memory://?bogus=1"},
		{Backend: "postgres://u@127.0.0.1:1/db?password=hunter2&connect_timeout=1"},
		{Backend: "memory://", Drain: []string{"postgres://u@127.0.0.1:1/db?sslmode=bogus&sslpassword=hunter2"}},
	} {
		cfg.Logger = log
		_, err := txmq.Open(ctx, cfg)
		if err == nil {
			t.Fatalf("Open(%s) succeeded", cfg.Backend)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("error leaks a password: %v", err)
		}
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("logs leak a password: %s", logs.String())
	}
}

// A password given as a URL parameter (postgres://...?password=...) or in a keyword/value
// connection string never reaches the logs of a successful Open, nor its errors.
func TestOpenRedactsPasswordParameters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t) // trust authentication: any password is accepted
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", DatabaseURL: dbURL + sep + "password=hunter2", Schema: schema, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []*txmq.Config{
		{Backend: "memory://", DatabaseURL: "postgres://u@127.0.0.1:1/db?connect_timeout=1&password=hunter2"},
		{Backend: "memory://", DatabaseURL: "host=127.0.0.1 port=1 user=u dbname=db connect_timeout=1 password=hunter2"},
	} {
		cfg.Logger = log
		if _, err := txmq.Open(ctx, cfg); err == nil {
			t.Fatal("Open of an unreachable database succeeded")
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("error leaks a password: %v", err)
		}
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("logs leak a password:\n%s", logs.String())
	}
}

// TestOpenWithDatabaseAndDrain: with a database the node's handoff and dead letters go to the
// outbox store; with drain URLs the backend is a drain wrapper that consumes what the old
// backend holds and publishes to the new one.
func TestOpenWithDatabaseAndDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	oldName, newName := testenv.UniqueName("old"), testenv.UniqueName("new")

	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "orders", txmq.QueueConfig[string]{Transactional: txmq.Require, MaxAttempts: 1})
	// Work left in the old backend by the app before the swap.
	before, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://" + oldName, Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		t.Fatal(err)
	}
	oldBackend := before.Backend
	noTx := q.Publish(ctx, before.Node, "x")
	if noTx == nil {
		t.Fatal("a Require queue published without a transaction")
	}
	if err := oldBackend.Publish(ctx, rawBatch("orders", "old-1")); err != nil {
		t.Fatal(err)
	}
	// Not closed: a memory backend's batches live only while it is open (another process,
	// in real life).
	_ = before.Node.Close(ctx)

	var logs syncBuffer
	app, err := txmq.Open(ctx, &txmq.Config{
		Backend: "memory://" + newName, DatabaseURL: dbURL, Schema: schema,
		Drain: []string{"memory://" + oldName}, DrainCheckInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Node:   txmq.NodeOptions{Registry: reg, PollWait: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := app.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if app.Store == nil || app.Pool == nil {
		t.Fatal("no store with a database configured")
	}
	if _, ok := app.Backend.(*drain.Backend); !ok {
		t.Fatalf("backend is %T; want a drain wrapper", app.Backend)
	}
	rec := txmqtest.NewRecorder(func(s string) string { return s })
	if err := rec.Listen(q, app.Node, func(_ context.Context, m []string) error {
		if m[0] == "poison" {
			return context.DeadlineExceeded
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"new-1", "poison"} {
		if err := app.Store.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error { return q.Publish(ctx, app.Node, m) }); err != nil {
			t.Fatal(err)
		}
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool { return rec.HasAll([]string{"old-1", "new-1", "poison"}) }, "old, new and poison delivered")
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		n, err := app.Store.DeadLetterCounts(ctx)
		return err == nil && n["orders"] == 1
	}, "the poison batch in the dead-letter table")
	txmqtest.Eventually(t, 10*time.Second, func() bool { return len(app.Backend.(*drain.Backend).Draining()) == 0 }, "the old backend drained")
	if !strings.Contains(logs.String(), "old backend drained") {
		t.Fatalf("the drain was not logged:\n%s", logs.String())
	}
}

func rawBatch(queue string, msgs ...string) core.OutgoingBatch {
	env := &envelope.Envelope{ID: core.NewID(), Queue: queue, Created: time.Now()}
	for _, m := range msgs {
		env.MessageIDs = append(env.MessageIDs, core.NewID())
		env.Messages = append(env.Messages, []byte(`"`+m+`"`))
	}
	return core.OutgoingBatch{ID: env.ID, Queue: queue, Body: envelope.Encode(env), Messages: len(msgs)}
}

package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq/internal/envelope"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// msg is the test payload.
type msg struct {
	N int `json:"n"`
}

// fakeBackend records publishes; fail, when set, is returned by Publish instead.
type fakeBackend struct {
	mu      sync.Mutex
	batches []core.OutgoingBatch
	calls   int
	fail    error
	delay   time.Duration
	// fn, when set, runs first in Publish; a non-nil error (or a panic) is the publish's.
	fn func(ctx context.Context, ob core.OutgoingBatch) error
}

func (b *fakeBackend) setFail(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

func (b *fakeBackend) Publish(ctx context.Context, ob core.OutgoingBatch) error {
	if b.fn != nil {
		if err := b.fn(ctx, ob); err != nil {
			b.mu.Lock()
			b.calls++
			b.mu.Unlock()
			return err
		}
	}
	b.mu.Lock()
	b.calls++
	fail, delay := b.fail, b.delay
	if fail == nil {
		b.batches = append(b.batches, ob)
	}
	b.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	return fail
}

func (b *fakeBackend) published() []core.OutgoingBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]core.OutgoingBatch(nil), b.batches...)
}

func (b *fakeBackend) callCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// messages decodes every published batch of queue into its message numbers.
func (b *fakeBackend) messages(t *testing.T, queue string) []int {
	t.Helper()
	var out []int
	for _, ob := range b.published() {
		if ob.Queue != queue {
			continue
		}
		env, err := envelope.Decode(ob.Body)
		if err != nil {
			t.Fatalf("published batch %s is not an envelope: %v", ob.ID, err)
		}
		for _, m := range env.Messages {
			var v msg
			if err := json.Unmarshal(m, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v.N)
		}
	}
	return out
}

func (b *fakeBackend) Fetch(context.Context, core.FetchRequest) ([]*core.Claim, error) {
	return nil, nil
}
func (b *fakeBackend) Ack(context.Context, *core.Claim) error { return nil }
func (b *fakeBackend) Retry(context.Context, *core.Claim, []byte, time.Duration) error {
	return nil
}
func (b *fakeBackend) Drop(context.Context, *core.Claim, string) error          { return nil }
func (b *fakeBackend) Extend(context.Context, *core.Claim, time.Duration) error { return nil }
func (b *fakeBackend) Depths(context.Context, []string) (map[string]core.Depth, error) {
	return nil, nil
}
func (b *fakeBackend) Close() error { return nil }

var (
	errPlain       = errors.New("backend said no")
	errUnavailable = fmt.Errorf("connection refused: %w", core.ErrBackendUnavailable)
)

// env is one test's store, schema, backend, node and queues.
type env struct {
	pool   *pgxpool.Pool
	schema string
	be     *fakeBackend
	store  *outbox.Store
	node   *txmq.Node
	orders *txmq.Queue[msg] // Try
	strict *txmq.Queue[msg] // Require
	notes  *txmq.Queue[msg] // Never
	biz    string           // quoted business table
}

var quiet = slog.New(slog.DiscardHandler)

func setup(t *testing.T, mod func(*outbox.Options)) *env {
	t.Helper()
	return setupOn(t, testenv.PostgresPool(t), mod)
}

// setupOn is setup on the given pool.
func setupOn(t *testing.T, pool *pgxpool.Pool, mod func(*outbox.Options)) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{pool: pool, schema: testenv.PostgresSchema(t, pool), be: &fakeBackend{}}
	o := &outbox.Options{Schema: e.schema, Backend: e.be, Logger: quiet}
	if mod != nil {
		mod(o)
	}
	if err := outbox.Migrate(ctx, pool, o); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.store, err = outbox.New(pool, o); err != nil {
		t.Fatal(err)
	}
	reg := txmq.NewRegistry()
	e.orders = must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Try}))
	e.strict = must(txmq.DeclareIn(reg, "strict", txmq.QueueConfig[msg]{Transactional: txmq.Require, MaxBatchMessages: 2}))
	e.notes = must(txmq.DeclareIn(reg, "notes", txmq.QueueConfig[msg]{Transactional: txmq.Never}))
	e.node = must(txmq.NewNode(e.be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Handoff: e.store}))
	t.Cleanup(func() { _ = e.node.Close(context.Background()) })
	e.biz = pgx.Identifier{e.schema, "biz"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+e.biz+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return e
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (e *env) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{e.schema, table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) outboxRows(t *testing.T) int { return e.count(t, "txmq_outbox") }
func (e *env) bizRows(t *testing.T) int    { return e.count(t, "biz") }

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handoff stores n single-message batches of queue orders through Store.Handoff.
func (e *env) handoff(t *testing.T, n int) []core.OutgoingBatch {
	t.Helper()
	bs := make([]core.OutgoingBatch, n)
	for i := range bs {
		id := core.NewID()
		bs[i] = core.OutgoingBatch{ID: id, Queue: "orders", Body: envelope.Encode(&envelope.Envelope{
			ID: id, Queue: "orders", Created: time.Now(), MessageIDs: []string{core.NewID()},
			Messages: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))},
		})}
	}
	if err := e.store.Handoff(context.Background(), bs); err != nil {
		t.Fatal(err)
	}
	return bs
}

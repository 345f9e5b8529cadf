package appdb_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqlite/appdb"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
	"github.com/txmq/txmq/outbox"
)

var quiet = slog.New(slog.DiscardHandler)

// openFile opens (OpenDB) and migrates a new SQLite file in the test's temp dir.
func openFile(t testing.TB) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := appdb.OpenDB(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := appdb.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db, path
}

type msg struct {
	N int `json:"n"`
}

// fakeBackend records publishes; fail, when set, is returned instead.
type fakeBackend struct {
	mu      sync.Mutex
	batches []core.OutgoingBatch
	fail    error
}

func (b *fakeBackend) setFail(err error) { b.mu.Lock(); b.fail = err; b.mu.Unlock() }

func (b *fakeBackend) Publish(_ context.Context, ob core.OutgoingBatch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	b.batches = append(b.batches, ob)
	return nil
}

func (b *fakeBackend) messages(t testing.TB, queue string) []int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, ob := range b.batches {
		if ob.Queue != queue {
			continue
		}
		env, err := envelope.Decode(ob.Body)
		if err != nil {
			t.Fatal(err)
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

var errPlain = errors.New("backend said no")

// env is one test's database, store, node and queues.
type env struct {
	db     *sql.DB
	path   string
	be     *fakeBackend
	store  *outbox.Store
	node   *txmq.Node
	orders *txmq.Queue[msg] // Try
	strict *txmq.Queue[msg] // Require
	notes  *txmq.Queue[msg] // Never
}

func setup(t *testing.T, mod func(*outbox.Options)) *env {
	t.Helper()
	e := &env{be: &fakeBackend{}}
	e.db, e.path = openFile(t)
	d, err := appdb.NewDialect(e.db)
	if err != nil {
		t.Fatal(err)
	}
	o := &outbox.Options{Backend: e.be, Logger: quiet}
	if mod != nil {
		mod(o)
	}
	if e.store, err = outbox.NewWithDialect(d, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close(context.Background()) })
	reg := txmq.NewRegistry()
	e.orders = must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Try}))
	e.strict = must(txmq.DeclareIn(reg, "strict", txmq.QueueConfig[msg]{Transactional: txmq.Require, MaxBatchMessages: 2}))
	e.notes = must(txmq.DeclareIn(reg, "notes", txmq.QueueConfig[msg]{Transactional: txmq.Never}))
	e.node = must(txmq.NewNode(e.be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Handoff: e.store, DeadLetters: e.store}))
	t.Cleanup(func() { _ = e.node.Close(context.Background()) })
	if _, err := e.db.Exec("CREATE TABLE biz (id INTEGER PRIMARY KEY)"); err != nil {
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

func (e *env) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s", table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
